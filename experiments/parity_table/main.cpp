// build/experiments/parity_table: the accuracy parity table (experiment 4).
// The work is run_parity_table (parity_table_experiment.h).
#include <iostream>
#include <sstream>
#include <string>

#include "experiment_main.h"
#include "parity_table/parity_table_experiment.h"

using namespace mpverify::experiments;

namespace {

// The recipes of --recipes: split at commas, but a recipe's own KEY=VALUE settings take commas too
// ("o2,fp8:accumulation=hopper,promotion=128" is o2 and fp8 with two settings), and a recipe name has no
// '=', so an item with '=' and no ':' continues the item before it.
std::vector<std::string> split_recipes(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const bool setting = item.find('=') != std::string::npos && item.find(':') == std::string::npos;
    if (setting && !items.empty() && items.back().find(':') != std::string::npos) items.back() += "," + item;
    else items.push_back(item);
  }
  if (!text.empty() && text.back() == ',') items.emplace_back();
  return items;
}

}  // namespace

int main(int argc, char** argv) {
  ParityTableConfig config;
  CLI::App app{
      "The accuracy parity table: FP32 (ref backend) against the mixed-precision recipes o1, o2, bf16-o2 and fp8 "
      "(emulator) on the MNIST CNN, the same seeds on every side, in the literature's form (FP32 | mixed | "
      "difference with its 90% interval | the parity gate's verdict), beside Micikevicius et al.'s Table 1. Writes "
      "the report and its figures (per-seed differences with the interval and the margin band; seed 1's loss "
      "curves) and the run directories.\n"
      "Example: parity_table --seeds 6 --steps 80 --jobs 2 --report reports/parity_table.md --runs runs/parity_table\n"
      "(about 7 minutes of 2 idle cores; --seeds 2 --steps 5 --test-size 200 for a try in seconds)",
      "parity_table"};
  ExperimentOptions common{"reports/parity_table.md", "runs/parity_table"};
  add_common_options(app, common);
  std::string recipes = "o1,o2,bf16-o2,fp8";
  app.add_option("--recipes", recipes,
                 "Candidate recipes, comma-separated, each with its settings (o2,fp8:accumulation=hopper,promotion=128; "
                 "fp32 is always the baseline)")
      ->capture_default_str();
  app.add_option("--seeds", config.seeds, "Seeds 1..N on every side (paired)")->capture_default_str();
  app.add_option("--steps", config.steps, "Training steps per run")->capture_default_str();
  app.add_option("--margin", config.margin, "The gate's margin on test accuracy, in percentage points")
      ->capture_default_str();
  app.add_option("--loss-margin", config.loss_margin, "The margin of the tail-mean training loss gate")
      ->capture_default_str();
  app.add_option("--alpha", config.alpha, "The gate's alpha (the interval's level is 1 - 2 alpha)")
      ->capture_default_str();
  app.add_option("--model", config.model, "cnn (the experiment) or mlp")->capture_default_str();
  app.add_option("--data", config.data, "mnist, synthetic or sklearn-digits")->capture_default_str();
  app.add_option("--data-dir", config.data_dir, "The data set's files (default: the loader's)");
  app.add_option("--train-size", config.train_size, "Training examples used at most")->capture_default_str();
  app.add_option("--test-size", config.test_size, "Test examples evaluated at most")->capture_default_str();

  return experiment_main(app, argc, argv, common, [&](const Progress& progress) {
    config.report = common.report;
    config.runs = common.runs;
    config.jobs = common.jobs;
    config.recipes = split_recipes(recipes);
    for (const std::string& r : config.recipes)
      if (r.empty()) throw std::invalid_argument("--recipes '" + recipes + "': an empty item (write o1,o2,...)");
    const ParityTableResult result = run_parity_table(config, progress);
    if (common.json) {
      std::cout << result.json.dump(2) << "\n";
    } else if (!common.quiet) {
      for (const ParityTableRow& row : result.rows)
        std::cout << row.recipe << ": " << mpverify::metrics::gate_verdict_line(row.accuracy) << "\n";
      std::cout << "wrote " << config.report.string() << "\n";
    }
    return 0;
  });
}
