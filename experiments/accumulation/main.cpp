// build/experiments/accumulation [--report reports/accumulation.md] [--seed N] [--lengths K,...] [--rows M]
//     [--cols N] [--promotion N] [--jobs N] [--json]
// Experiment 9: what accumulation loses (accumulation_experiment.h).
#include <iostream>
#include <sstream>

#include "accumulation/accumulation_experiment.h"
#include "experiment_main.h"

namespace {

// "256,1024" -> {256, 1024}; a malformed list is std::invalid_argument (exit 2).
std::vector<int> parse_lengths(const std::string& text) {
  std::vector<int> lengths;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    int K = 0;
    try {
      K = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw std::invalid_argument("--lengths '" + text + "': '" + item + "' is not an integer (e.g. --lengths 256,4096)");
    lengths.push_back(K);
  }
  return lengths;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mpverify::experiments;
  CLI::App app{
      "Experiment 9, what accumulation loses: seeded GEMMs of fp16, bf16 and FP8 (E4M3 x E4M3, E4M3 x E5M2)\n"
      "operands at each K through every architecture's tensor-core instruction for them, chained along K with\n"
      "and without an fp32 promotion every N elements, against the exact product of the same rounded operands;\n"
      "per cell the maximum and median relative error and the instructions' counters, a figure per operand pair,\n"
      "and a verdict on DeepSeek-V3's Hopper FP8 claim (about 2% at K = 4096; promotion every 128 fixes it).\n"
      "Example: build/experiments/accumulation --report reports/accumulation.md",
      "accumulation"};
  ExperimentOptions common{"reports/accumulation.md", "", 2};
  AccumulationConfig config;
  std::string lengths = "256,1024,4096,16384";
  app.add_option("--report", common.report, "The Markdown report; its figures are written next to it")
      ->capture_default_str();
  app.add_option("--seed", config.seed, "Seed of the operands")->capture_default_str();
  app.add_option("--lengths", lengths, "The K of the GEMMs, increasing multiples of 32")->capture_default_str();
  app.add_option("--rows", config.rows, "Rows of each GEMM's output (M)")->capture_default_str();
  app.add_option("--cols", config.cols, "Columns of each GEMM's output (N)")->capture_default_str();
  app.add_option("--promotion", config.promotion, "The promotion interval set against none (0: none only)")
      ->capture_default_str();
  app.add_option("--jobs", common.jobs, "Cells computed at a time (threads); the results do not depend on it")
      ->capture_default_str();
  app.add_flag("--json", common.json, "Print the results and the files written as JSON on standard output");
  app.add_flag("--progress", common.progress, "Progress lines on standard error even when it is not a terminal");
  app.add_flag("--quiet", common.quiet, "No progress lines");
  return experiment_main(app, argc, argv, common, [&](const Progress& progress) {
    config.report = common.report;
    config.jobs = common.jobs;
    config.lengths = parse_lengths(lengths);
    const AccumulationResult result = run_accumulation(config, progress);
    if (common.json) {
      std::cout << result.json.dump(2) << "\n";
    } else {
      for (const auto& f : result.files) std::cout << "wrote " << f.string() << "\n";
    }
    return 0;
  });
}
