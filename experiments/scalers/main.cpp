// build/experiments/scalers: experiment 3, loss-scale strategies
// (scalers_experiment.h says what runs).
#include <iostream>

#include "scalers_experiment.h"

int main(int argc, char** argv) {
  using namespace mpverify::experiments;
  CLI::App app{
      "Loss-scale strategies side by side: every fp16 strategy (none, static, torch, apex, keras, deepspeed, "
      "megatron) trains the MNIST MLP under o2 on the normal model, on a model made to overflow in the backward "
      "pass and on one made to overflow in the forward pass (the images scaled up); the FP8 recipe trains with "
      "delayed, current and no operand scaling. Reports skipped steps, time at the lowest scale and at the floor, "
      "final scale, test accuracy against fp32, underflow rates and where the first non-finite value appeared; "
      "replays one recorded found_inf sequence through every strategy, checks that every run's own sequence "
      "replays to its training trajectory, and replays one recorded amax sequence through the FP8 rules.\n\n"
      "Example: build/experiments/scalers --jobs 2 --progress\n"
      "         build/experiments/scalers --seeds 1 --steps 50 --report /tmp/s/scalers.md --runs /tmp/s/runs",
      "scalers"};
  ScalersConfig config;
  ExperimentOptions common{config.report.string(), config.runs.string()};
  add_common_options(app, common);
  app.add_option("--data-dir", config.data_dir, "Where the MNIST files are (default: the loader's)");
  app.add_option("--seeds", config.seeds, "Seeds 1..N for the normal model and FP8 (paired with fp32)")
      ->capture_default_str();
  app.add_option("--overflow-seeds", config.overflow_seeds, "Seeds for the backward-overflow model")
      ->capture_default_str();
  app.add_option("--steps", config.steps, "Steps of the normal and backward-overflow runs")->capture_default_str();
  app.add_option("--forward-steps", config.forward_steps, "Steps of the forward-overflow runs")->capture_default_str();
  app.add_option("--growth-interval", config.growth_interval,
                 "The shortened growth interval of torch, apex, keras, deepspeed and megatron")
      ->capture_default_str();
  app.add_option("--static-scale", config.static_scale, "S of the static strategy")->capture_default_str();
  app.add_option("--backward-input-scale", config.backward_input_scale,
                 "Image factor of the backward-overflow model")
      ->capture_default_str();
  app.add_option("--forward-input-scale", config.forward_input_scale, "Image factor of the forward-overflow model")
      ->capture_default_str();
  app.add_option("--eval-every", config.eval_every, "Test accuracy every N steps in seed 1's runs (0: at the end)")
      ->capture_default_str();
  bool no_fp8 = false;
  app.add_flag("--no-fp8", no_fp8, "Do not train the FP8 recipe");
  return experiment_main(app, argc, argv, common, [&](const Progress& progress) {
    config.report = common.report;
    config.runs = common.runs;
    config.jobs = common.jobs;
    config.fp8 = !no_fp8;
    const ScalersResult result = run_scalers(config, progress);
    if (common.json) std::cout << result.json.dump(2) << "\n";
    progress(std::string("wrote ") + config.report.string());
    return 0;
  });
}
