// build/experiments/mma_probe [--report reports/mma_probe.md] [--cases N] [--seed N] [--dump DIR] [--no-gpu] [--json]
// The tensor-core models against the instruction itself, bit for bit (mma_probe_experiment.h).
#include <iostream>

#include "experiment_main.h"
#include "mma_probe/mma_probe_experiment.h"

int main(int argc, char** argv) {
  using namespace mpverify::experiments;
  CLI::App app{
      "The tensor-core models against the instruction: seeded adversarial dot products through each\n"
      "architecture's model of an mma.sync (mpverify eval --op dot --list) and through that instruction on\n"
      "this GPU; the bit-identical fraction per model and the mismatches by kind of case. Exit code 1 when a\n"
      "model of this GPU's own architecture differs from it. Without a GPU, the models against one another.\n"
      "Example: build/experiments/mma_probe --report reports/mma_probe.md",
      "mma_probe"};
  ExperimentOptions common{"reports/mma_probe.md", "", 1};
  app.add_option("--report", common.report, "The Markdown report")->capture_default_str();
  MmaProbeConfig config;
  bool no_gpu = false;
  app.add_option("--cases", config.cases, "Cases per instruction and length")->capture_default_str();
  app.add_option("--seed", config.seed, "Seed of the cases")->capture_default_str();
  std::string dump;
  app.add_option("--dump", dump, "With a GPU: write each case with the GPU's d to DIR/INSTRUCTION.kK.txt "
                                 "(lines of mpverify eval --op dot --check)");
  app.add_option("--dump-cases", config.dump_cases, "Cases per file written by --dump (the first ones)")
      ->capture_default_str();
  app.add_flag("--no-gpu", no_gpu, "Do not run the GPU side even when a device is usable");
  app.add_flag("--json", common.json, "Print the results and the files written as JSON on standard output");
  app.add_flag("--progress", common.progress, "Progress lines on standard error even when it is not a terminal");
  app.add_flag("--quiet", common.quiet, "No progress lines");
  return experiment_main(app, argc, argv, common, [&](const Progress& progress) {
    config.report = common.report;
    config.gpu = !no_gpu;
    config.dump = dump;
    const MmaProbeResult result = run_mma_probe(config, progress);
    if (common.json) {
      std::cout << result.json.dump(2) << "\n";
    } else {
      std::cout << (result.gpu_reason.empty() ? "mma_probe: compared with " + result.device
                                              : "mma_probe: no GPU (" + result.gpu_reason + "); the models only")
                << "\n";
      if (result.failed_models > 0)
        std::cout << "mma_probe: " << result.failed_models << " model(s) of this GPU's architecture differ from it\n";
      for (const auto& f : result.files) std::cout << "wrote " << f.string() << "\n";
    }
    return result.failed_models == 0 ? 0 : 1;
  });
}
