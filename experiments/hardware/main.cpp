// build/experiments/hardware [--report reports/hardware.md] [--seed N] [--no-gpu] [--json]
// Experiment 6: the emulated GEMM and conv2d under each accumulation model
// against cuBLAS and cuDNN, bit for bit (hardware_experiment.h).
#include <iostream>

#include "experiment_main.h"
#include "hardware/hardware_experiment.h"

int main(int argc, char** argv) {
  using namespace mpverify::experiments;
  CLI::App app{
      "Experiment 6, the emulator against the hardware: the emulated GEMM and conv2d (fp16/bf16 inputs) under\n"
      "each accumulation model (plain fp32, the tensor-core model with blocks of 4, 8 and 16, fp16 accumulation,\n"
      "chains of the Hopper and Ampere instruction models along K, whole or split)\n"
      "against cuBLAS and cuDNN on the same seeded inputs: the bit-identical fraction and the largest ulp\n"
      "distance per model. Without a usable GPU the report says so and keeps the CPU side (each model against\n"
      "FP64, and the models against one another).\n"
      "Example: build/experiments/hardware --report reports/hardware.md",
      "hardware"};
  ExperimentOptions common{"reports/hardware.md", "", 1};
  app.add_option("--report", common.report, "The Markdown report")->capture_default_str();
  HardwareConfig config;
  bool no_gpu = false;
  app.add_option("--seed", config.seed, "Seed of the inputs")->capture_default_str();
  app.add_flag("--no-gpu", no_gpu, "Do not run the GPU side even when a device is usable");
  app.add_flag("--json", common.json, "Print the results and the files written as JSON on standard output");
  app.add_flag("--progress", common.progress, "Progress lines on standard error even when it is not a terminal");
  app.add_flag("--quiet", common.quiet, "No progress lines");
  return experiment_main(app, argc, argv, common, [&](const Progress& progress) {
    config.report = common.report;
    config.gpu = !no_gpu;
    const HardwareResult result = run_hardware(config, progress);
    if (common.json) {
      std::cout << result.json.dump(2) << "\n";
    } else {
      std::cout << (result.gpu_reason.empty() ? "hardware: compared with " + result.device
                                              : "hardware: no GPU (" + result.gpu_reason + "); CPU side only")
                << "\n";
      for (const auto& f : result.files) std::cout << "wrote " << f.string() << "\n";
    }
    return 0;
  });
}
