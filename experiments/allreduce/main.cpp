// build/experiments/allreduce [--report reports/allreduce.md] [--model cnn|mlp] [--data synthetic|mnist]
//     [--ranks 2,4,...,4096] [--shard-batch B] [--seed S] [--step K] [--json] [--progress]
// What does reduced-precision all-reduce lose? (allreduce_experiment.h)
#include <iostream>
#include <sstream>

#include "allreduce/allreduce_experiment.h"
#include "experiment_main.h"

namespace {

// "2,4,8" -> {2, 4, 8}; a malformed list is std::invalid_argument (exit 2).
std::vector<std::size_t> parse_ranks(const std::string& text) {
  std::vector<std::size_t> ranks;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    unsigned long long n = 0;
    try {
      n = std::stoull(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || item.front() == '-')
      throw std::invalid_argument("--ranks '" + text + "': '" + item + "' is not a number of ranks (e.g. --ranks 2,4,8)");
    ranks.push_back(static_cast<std::size_t>(n));
  }
  return ranks;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mpverify::experiments;
  CLI::App app{
      "What does reduced-precision all-reduce lose? The per-rank gradients of a real training step (one batch cut\n"
      "into N shards, each rank's gradient of its shard, FP32 reference backend) summed across N ranks in fp32,\n"
      "bf16, fp16 and fp8 (per-rank scaling) in the ring and tree orders, against the exact sum: normwise, median\n"
      "and max relative error, swamped/underflow/overflow additions, where bf16 stops being safe, the growth law.\n"
      "Example: build/experiments/allreduce --report reports/allreduce.md",
      "allreduce"};
  ExperimentOptions common{"reports/allreduce.md", "", 1};
  AllreduceExperimentConfig config;
  std::string ranks = "2,4,8,16,32,64,128,256,512,1024,2048,4096";
  std::string report = config.report.string();
  app.add_option("--report", report, "The Markdown report; its figures are written next to it")->capture_default_str();
  app.add_option("--model", config.model, "cnn or mlp")->capture_default_str();
  app.add_option("--data", config.data, "synthetic (drawn from the seed) or mnist")->capture_default_str();
  app.add_option("--ranks", ranks, "The numbers of ranks N, comma-separated, each at least 2")->capture_default_str();
  app.add_option("--shard-batch", config.shard_batch, "Examples per rank (B)")->capture_default_str();
  app.add_option("--seed", config.seed, "The training run's seed (weights, data, batches)")->capture_default_str();
  app.add_option("--step", config.step, "fp32 training steps before the gradient step (0: the initial weights)")
      ->capture_default_str();
  app.add_flag("--json", common.json, "Print the results and the files written as JSON on standard output");
  app.add_flag("--progress", common.progress, "Progress lines on standard error even when it is not a terminal");
  app.add_flag("--quiet", common.quiet, "No progress lines");
  return experiment_main(app, argc, argv, common, [&](const Progress& progress) {
    config.report = report;
    config.ranks = parse_ranks(ranks);
    validate(config);
    const AllreduceExperimentResult result = run_allreduce_experiment(config, progress);
    if (common.json) {
      std::cout << result.json.dump(2) << "\n";
    } else {
      for (const auto& f : result.files) std::cout << "wrote " << f.string() << "\n";
    }
    return 0;
  });
}
