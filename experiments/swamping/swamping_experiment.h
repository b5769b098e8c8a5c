// Experiment 2, swamping: training with fp16-pure (the weights
// and the momentum buffer stored in fp16, no master copy) against o2 (fp32
// master weights) and the fp32 baseline, across learning rates; the
// lost-update rate over time next to the accuracy gap; the exact rate
// (fl16(w + u) == w) against the 2048-ratio rule on the same updates; and why
// o2's lost-update rate WITH its fp32 master weights climbs in the default
// study (the CNN at lr 0.05).
//
// What runs (every side on seeds 1..N, paired):
//  - the sweep: for each learning rate, `model` on `data`, SGD with momentum,
//    batch 64: fp32 on the ref backend, o2 and fp16-pure on the emulator (both
//    with the torch loss scaler, so the master copy is the only difference
//    besides fp16-pure's fp16 momentum buffer and norm parameters);
//  - the diagnosis: the default study's CNN configuration (lr 0.05, momentum
//    0.9, seed 1, `diagnosis_steps` steps), fp32 (ref) and o2 (emu).
// Every run carries an UpdateCensus (update_census.h) in the format its
// optimizer writes (fp16 for fp16-pure, fp32 otherwise), written next to the
// run as census.json. The gate (metrics::evaluate_gate, paired) gives each
// candidate's accuracy gap to fp32 with its interval.
//
// Output: the runs under `runs` (runs/lr-<lr>/<side>/seed-<s>/ with an
// ensemble.json per side, runs/diagnosis/<side>/seed-1/), the report and its
// figures next to it (<stem>-lost-per-step.svg, -accuracy-gap.svg,
// -lost-vs-lr.svg, -ratio-rule.svg, -master-diagnosis.svg). The report holds
// no time, host or absolute path: the same configuration gives the same bytes
// whatever `jobs`.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpverify::experiments {

struct SwampingConfig {
  std::filesystem::path report = "reports/swamping.md";
  std::filesystem::path runs = "runs/swamping";
  std::string model = "mlp";  // mlp or cnn
  std::string data = "mnist";
  std::filesystem::path data_dir;  // empty: the loader's default
  std::size_t train_size = 8000, test_size = 2000;
  std::vector<double> learning_rates{0.0001, 0.0003, 0.001, 0.003, 0.01, 0.1};
  std::size_t seeds = 3;  // seeds 1..seeds on every side
  std::size_t steps = 300;
  double momentum = 0.9;
  std::size_t diagnosis_steps = 150;  // the study's CNN runs (0: not run)
  std::size_t jobs = 2;
  double margin = 1.0;  // accuracy, percentage points (the study's)
  double alpha = 0.05;
};

struct SwampingResult {
  nlohmann::ordered_json json;  // --json: per learning rate, the rule comparison, the diagnosis, files
  std::vector<std::filesystem::path> files;  // written, besides the run directories
};

// Checks the configuration (and that the data loads) without writing
// anything; std::invalid_argument (or data::DataFileError) naming the setting
// and how to fix it.
void validate_swamping(const SwampingConfig& config);

// validate_swamping, then the runs, the gates, the figures and the report.
SwampingResult run_swamping(const SwampingConfig& config, const std::function<void(const std::string&)>& progress);

// "0.001" -> 0.001 ...; "0.001,0.01": the list. std::invalid_argument naming
// the item that is not a positive finite number, or a repeated one.
std::vector<double> parse_learning_rates(const std::string& text);

// The directory name of a learning rate: "lr-0.001" (printf %g).
std::string learning_rate_directory(double lr);

}  // namespace mpverify::experiments
