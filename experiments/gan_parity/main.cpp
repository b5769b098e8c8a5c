// build/experiments/gan_parity: the GAN FID parity experiment (experiment 5).
#include <iostream>

#include "experiment_main.h"
#include "gan_parity/gan_parity_experiment.h"

int main(int argc, char** argv) {
  using namespace mpverify::experiments;
  CLI::App app{
      "GAN FID parity: trains the DCGAN on MNIST in fp32 (reference backend) and in o2 mixed precision with the torch "
      "loss scaler (fp16 emulator), the same seeds on both sides (same initial weights, batches and latent codes), and "
      "shows whether the mixed-precision generator is as good as the fp32 one: FID and KID of each run against the "
      "2000 held-out test images through a feature extractor (trained here, or --extractor), with bootstrap "
      "intervals, the parity gate on FID, FID over training, sample grids from the same latent codes, losses and "
      "loss scale. Writes the runs, the report and its figures (REPORT-*.svg).\n"
      "Example: build/experiments/gan_parity --report reports/gan_parity.md --runs runs/gan_parity --jobs 2\n"
      "         build/experiments/gan_parity --seeds 2 --steps 40 --checkpoints 2 --fid-samples 200 --bootstrap 4 "
      "--kid-subsets 5 --extractor-steps 50 --report /tmp/gan/gan_parity.md --runs /tmp/gan/runs   (a quick look)",
      "gan_parity"};
  GanParityConfig config;
  ExperimentOptions common{"reports/gan_parity.md", "runs/gan_parity"};
  add_common_options(app, common);
  std::string data_dir, extractor;
  app.add_option("--data-dir", data_dir, "MNIST's files (default: $MPVERIFY_MNIST_DIR or the source tree's .data/)");
  app.add_option("--extractor", extractor,
                 "A feature extractor file (mpverify feature-extractor --out FILE); default: train one into "
                 "RUNS/extractor/");
  app.add_option("--extractor-seed", config.extractor_seed, "Seed of the extractor trained here")->capture_default_str();
  app.add_option("--extractor-steps", config.extractor_steps, "Steps of the extractor trained here")->capture_default_str();
  app.add_option("--seeds", config.seeds, "Seeds 1..N on every side (paired; at least 2)")->capture_default_str();
  app.add_option("--steps", config.steps, "DCGAN training steps per run (batch 64)")->capture_default_str();
  app.add_option("--checkpoints", config.checkpoints, "FID measured at this many evenly spaced steps (the last included)")
      ->capture_default_str();
  app.add_option("--train-size", config.train_size, "MNIST training images used (at most 8000)")->capture_default_str();
  app.add_option("--fid-samples", config.fid_samples, "Generated images per FID/KID (equal N on every side)")
      ->capture_default_str();
  app.add_option("--bootstrap", config.bootstrap, "FID bootstrap replicates per run")->capture_default_str();
  app.add_option("--kid-subsets", config.kid_subsets, "KID subsets per run")->capture_default_str();
  app.add_option("--grid", config.grid, "Images in each sample grid")->capture_default_str();
  app.add_option("--margin-sd", config.margin_sd,
                 "The equivalence margins on FID and KID: K times the fp32 runs' standard deviation over the seeds "
                 "(2: two fp32 runs differing only in their seed are more than 2 sd apart in 16% of pairs)")
      ->type_name("K")
      ->capture_default_str();
  app.add_option("--unconverged-ratio", config.unconverged_ratio,
                 "The headline calls the generators unconverged when the fp32 runs' mean FID exceeds R times the FID "
                 "of real training images against the held-out test images (same extractor, same N)")
      ->type_name("R")
      ->capture_default_str();
  app.add_option("--alpha", config.alpha, "The equivalence tests' level")->capture_default_str();
  app.add_flag("--with-o1", config.with_o1, "Also train the o1 recipe (torch scaler) on the emulator");
  app.add_flag("--report-only", config.report_only,
               "Train nothing: write the report again from the runs in --runs (trained with the same settings)");
  return experiment_main(app, argc, argv, common, [&](const Progress& progress) {
    config.report = common.report;
    config.runs = common.runs;
    config.jobs = common.jobs;
    config.data_dir = data_dir;
    config.extractor = extractor;
    const GanParityResult result = run_gan_parity(config, progress);
    if (common.json) std::cout << result.json.dump(2) << "\n";
    return 0;
  });
}
