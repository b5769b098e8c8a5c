// build/experiments/block_scaled: block-scaled formats against bf16 and fp32, and three claims.
// The work is run_block_scaled (block_scaled_experiment.h).
#include <iostream>
#include <string>

#include "block_scaled/block_scaled_experiment.h"
#include "experiment_main.h"

using namespace mpverify::experiments;

int main(int argc, char** argv) {
  BlockScaledConfig config;
  CLI::App app{
      "Block-scaled formats: the recipes mxfp8, nvfp4 and fp8-blockwise (emulator) against bf16-o1 and fp32 (ref) "
      "on the CNN and the character transformer, the parity gate against fp32, saturation, underflow and SQNR "
      "per layer and operand, and three claims each reproduced or refuted with its numbers: (a) OCP floor "
      "scales saturate E4M3 blocks whose amax significand exceeds 1.75 (E2M1: 1.5), rceil never; (b) NVFP4 with every "
      "linear layer in FP4 trains worse; (c) the Hadamard transform and stochastic rounding narrow NVFP4's gap "
      "to BF16. Writes the report, its loss figures and the run directories.\n"
      "Example: block_scaled --jobs 2 --progress (the defaults below: reports/block_scaled.md; about "
      "14 minutes of 2 idle cores (measured); --quick for a try in seconds)",
      "block_scaled"};
  ExperimentOptions common{"reports/block_scaled.md", "runs/block_scaled"};
  add_common_options(app, common);
  bool quick = false, no_amax_check = false;
  BlockScaledConfig given;
  app.add_flag("--quick", quick,
               "A tiny configuration (2 seeds of 3 steps, small batches, a built-in text for the transformer) for "
               "tests and a try; the size options below are then ignored");
  app.add_option("--seeds", given.seeds, "Seeds 1..N on every side (paired; the gate needs 2)")->capture_default_str();
  app.add_option("--steps", given.cnn_steps, "CNN training steps per run")->capture_default_str();
  app.add_option("--transformer-steps", given.transformer_steps, "Transformer training steps per run")
      ->capture_default_str();
  app.add_option("--batch", given.cnn_batch, "CNN batch size")->capture_default_str();
  app.add_option("--train-size", given.train_size, "CNN training images drawn")->capture_default_str();
  app.add_option("--test-size", given.test_size, "CNN test images")->capture_default_str();
  app.add_option("--transformer-batch", given.transformer_batch, "Transformer windows per batch")
      ->capture_default_str();
  app.add_option("--context-length", given.context_length, "Transformer tokens per window")->capture_default_str();
  app.add_option("--test-windows", given.test_windows, "Transformer held-out windows evaluated")
      ->capture_default_str();
  app.add_option("--record-every", given.record_every, "blocks.jsonl every N steps")->capture_default_str();
  app.add_option("--margin", given.margin, "The gate's margin on test accuracy, in percentage points")
      ->capture_default_str();
  app.add_option("--loss-margin", given.loss_margin, "The gate's margin on the tail-mean training loss")
      ->capture_default_str();
  app.add_option("--alpha", given.alpha, "The gate's and the claims' alpha (intervals at 1 - 2 alpha)")
      ->capture_default_str();
  app.add_flag("--no-amax-check", no_amax_check, "Skip claim (a)'s block-by-block check of the 1.75 and 1.5 rules");

  return experiment_main(app, argc, argv, common, [&](const Progress& progress) {
    config = quick ? quick_block_scaled_config() : given;
    if (quick) {
      config.margin = given.margin;
      config.loss_margin = given.loss_margin;
      config.alpha = given.alpha;
    }
    config.report = common.report;
    config.runs = common.runs;
    config.jobs = common.jobs;
    config.amax_check = !no_amax_check;
    const BlockScaledResult result = run_block_scaled(config, progress);
    if (common.json) {
      std::cout << result.json.dump(2) << "\n";
    } else if (!common.quiet) {
      std::cout << "claim (a): " << result.verdict_a << "\nclaim (b): " << result.verdict_b
                << "\nclaim (c): " << result.verdict_c << "\n";
      for (const BlockScaledGate& g : result.gates)
        std::cout << g.model << " " << g.recipe << ": " << mpverify::metrics::gate_verdict_line(g.accuracy) << "\n";
      std::cout << "wrote " << config.report.string() << "\n";
    }
    return 0;
  });
}
