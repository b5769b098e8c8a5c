// build/experiments/swamping: experiment 2 (swamping_experiment.h).
#include <iostream>

#include "experiment_main.h"
#include "swamping/swamping_experiment.h"

int main(int argc, char** argv) {
  using namespace mpverify::experiments;
  CLI::App app{
      "Swamping: fp16-pure (fp16 weights, no master copy) against o2 (fp32 master weights) and fp32, across "
      "learning rates. Shows the lost-update rate (w + u == w) over the steps next to the accuracy gap to fp32 "
      "(paired parity gate), the exact rate against the '2048x smaller' rule on the same updates (by where |w| "
      "sits in its binade), and why o2 loses updates even in its fp32 master weights (the default study's CNN).\n"
      "Example: build/experiments/swamping --lrs 0.001,0.01,0.1 --seeds 3 --steps 300 --jobs 2 --progress",
      "swamping"};
  ExperimentOptions common{"reports/swamping.md", "runs/swamping"};
  add_common_options(app, common);
  SwampingConfig c;
  std::string lrs = "0.0001,0.0003,0.001,0.003,0.01,0.1";
  std::string data_dir;
  app.add_option("--lrs", lrs, "Learning rates (SGD), comma-separated")->capture_default_str();
  app.add_option("--seeds", c.seeds, "Seeds 1..N on every side (paired; at least 2)")->capture_default_str();
  app.add_option("--steps", c.steps, "Training steps of each sweep run")->capture_default_str();
  app.add_option("--model", c.model, "mlp or cnn (the sweep's model)")->capture_default_str();
  app.add_option("--data", c.data, "mnist, synthetic or sklearn-digits")->capture_default_str();
  app.add_option("--data-dir", data_dir, "The data set's files (default: the loader's)");
  app.add_option("--train-size", c.train_size, "Training examples at most")->capture_default_str();
  app.add_option("--test-size", c.test_size, "Test examples at most")->capture_default_str();
  app.add_option("--momentum", c.momentum, "SGD momentum of the sweep")->capture_default_str();
  app.add_option("--diagnosis-steps", c.diagnosis_steps,
                 "Steps of the default study's CNN runs (fp32 and o2, lr 0.05, seed 1) that explain o2's lost fp32 "
                 "updates; 0 skips them")
      ->capture_default_str();
  app.add_option("--margin", c.margin, "The gate's accuracy margin (percentage points)")->capture_default_str();
  app.add_option("--alpha", c.alpha, "The gate's alpha")->capture_default_str();
  return experiment_main(app, argc, argv, common, [&](const Progress& progress) {
    c.learning_rates = parse_learning_rates(lrs);
    c.report = common.report;
    c.runs = common.runs;
    c.jobs = common.jobs;
    c.data_dir = data_dir;
    const SwampingResult r = run_swamping(c, progress);
    if (common.json) std::cout << r.json.dump(2) << "\n";
    return 0;
  });
}
