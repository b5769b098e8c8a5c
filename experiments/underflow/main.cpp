// build/experiments/underflow: gradient underflow in fp16 and loss scaling
// (experiment 1); the work is run_underflow (underflow_experiment.h).
#include <iostream>
#include <string>

#include "underflow/underflow_experiment.h"

using namespace mpverify::experiments;

int main(int argc, char** argv) {
  CLI::App app{
      "Gradient underflow in fp16 and loss scaling (after Micikevicius et al. 2018, the Multibox SSD histogram).\n"
      "Trains the MNIST CNN and the DCGAN in FP32 and takes a census of their gradients (binade histograms with\n"
      "fp16's limits; the exact fraction of non-zero values that would become zero, subnormal or overflow in fp16\n"
      "at each loss scale 1, 8, 64, ..., 2^24); then trains the CNN in o2 with a static loss scale at each scale\n"
      "against fp32 on paired seeds and gates test accuracy per scale: the smallest scale that recovers parity,\n"
      "and the scales that overflow. Writes the report and its SVG figures.\n\n"
      "Example:\n"
      "  MPVERIFY_MNIST_DIR=.data build/experiments/underflow --jobs 2 --progress\n"
      "  build/experiments/underflow --data synthetic --cnn-steps 20 --gan-steps 10 --seeds 2 --scales 1,2^24 \\\n"
      "      --report /tmp/u/underflow.md --runs /tmp/u/runs",
      "underflow"};
  ExperimentOptions common{"reports/underflow.md", "runs/underflow"};
  add_common_options(app, common);
  UnderflowConfig c;
  std::string scales = "1,2^3,2^6,2^9,2^12,2^15,2^18,2^21,2^24";
  app.add_option("--data", c.data, "Data set: mnist, synthetic or sklearn-digits")->capture_default_str();
  app.add_option("--data-dir", c.data_dir, "Where the data set's files are (default: the loader's)");
  app.add_option("--train-size", c.train_size, "Training images at most")->capture_default_str();
  app.add_option("--test-size", c.test_size, "Test images at most")->capture_default_str();
  app.add_option("--cnn-steps", c.cnn_steps, "Steps of every CNN run")->capture_default_str();
  app.add_option("--gan-steps", c.gan_steps, "Steps of the DCGAN census run (0: none)")->capture_default_str();
  app.add_option("--seeds", c.seeds, "Seeds 1..N on both sides of every gate (at least 2)")->capture_default_str();
  app.add_option("--scales", scales, "Loss scales, powers of two in increasing order (2^k or a number)")
      ->capture_default_str();
  app.add_option("--recipe", c.recipe, "The mixed-precision candidate recipe")->capture_default_str();
  app.add_option("--margin", c.margin, "Equivalence margin, percentage points of test accuracy")->capture_default_str();
  app.add_option("--alpha", c.alpha, "TOST level")->capture_default_str();
  return experiment_main(app, argc, argv, common, [&](const Progress& progress) {
    c.scales = parse_scale_list(scales);
    c.report = common.report;
    c.runs = common.runs;
    c.jobs = common.jobs;
    const UnderflowResult r = run_underflow(c, progress);
    if (common.json) std::cout << r.json.dump(2) << "\n";
    return 0;
  });
}
