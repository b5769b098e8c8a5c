// Experiment 4: the accuracy parity table. FP32 against each
// mixed-precision recipe (o1, o2, bf16-o2, fp8) on the MNIST CNN over several
// paired seeds, in the form of the literature's tables (Micikevicius et al.,
// "Mixed Precision Training", Table 1; NVIDIA's published AMP results):
//   recipe | FP32 mean ± sd | mixed mean ± sd | difference with its interval | verdict | seeds
// where the difference is the paired mean of (mixed − FP32) test accuracy in
// points and the verdict the parity gate's (metrics::evaluate_gate: paired
// TOST, margin and alpha stated).
//
// What runs: the baseline `fp32` on the `ref` backend (Eigen FP32) and every
// candidate recipe on the `emu` backend (the bit-exact software emulator),
// seeds 1..N on every side (the same initial weights and batches for a
// pair), recorders off (the per-step loss is logged either way; the
// recorders only observe). Loss scaling: the fp16 recipes (o1, o2,
// fp16-pure) with the `torch` GradScaler, as PyTorch AMP runs them; the
// bf16 recipes without a loss scaler (bf16 has fp32's exponent range, and
// PyTorch's bf16 autocast uses none); fp8 with its default per-tensor
// current scaling of every GEMM operand and no loss scaler.
//
// Output: the run directories under `runs` (<side>/seed-<s>/ and each side's
// ensemble.json, so `mpverify gate` reproduces every verdict), the report and
// its figures next to it (<stem>-differences.svg: the per-seed differences,
// the interval and the margin band per recipe; <stem>-loss.svg: seed 1's
// training loss per recipe). The report holds no time, host or absolute path:
// the same configuration gives the same bytes, whatever `jobs` is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/parity_gate.h"

namespace mpverify::experiments {

struct ParityTableConfig {
  std::filesystem::path runs = "runs/parity_table";
  std::filesystem::path report = "reports/parity_table.md";
  std::vector<std::string> recipes{"o1", "o2", "bf16-o2", "fp8"};  // the candidates (training::recipe_names, not fp32)
  std::size_t seeds = 6;  // seeds 1..seeds on every side
  std::size_t steps = 80;
  std::string model = "cnn";  // cnn (the experiment) or mlp (cheaper, for tests)
  std::string data = "mnist";
  std::filesystem::path data_dir;  // empty: the loader's default
  std::size_t train_size = 8000, test_size = 2000;
  std::size_t jobs = 2;
  double margin = 1.0;        // accuracy, percentage points
  double loss_margin = 0.02;  // mean training loss over the last 10% of the steps
  double alpha = 0.05;
};

struct ParityTableRun {
  std::string side;  // "fp32-ref", "o2-emu", ...
  std::uint64_t seed = 0;
  double wall_seconds = 0;
  nlohmann::json summary;  // the run's summary.json
};

struct ParityTableRow {
  std::string recipe, side, scaler;
  metrics::GateResult accuracy, loss;
};

struct ParityTableResult {
  std::vector<ParityTableRow> rows;  // one per candidate recipe, in the configuration's order
  std::vector<ParityTableRun> runs;
  std::string report_text;  // the Markdown written
  nlohmann::ordered_json json;
  std::vector<std::filesystem::path> files;  // written, besides the run directories
};

// The loss scaler a candidate recipe runs with (see above).
std::string parity_table_scaler(const std::string& recipe);

// Checks the configuration (and that the data loads) without writing
// anything; std::invalid_argument (or data::DataFileError) naming the setting.
void validate_parity_table(const ParityTableConfig& config);

// validate, train every run (`jobs` at a time), gate each recipe against
// fp32, write the figures and the report. `progress` gets one line per phase
// and per finished run.
ParityTableResult run_parity_table(const ParityTableConfig& config,
                                   const std::function<void(const std::string&)>& progress = {});

// The half-width of the paired (1 − 2 alpha) interval for n pairs whose
// differences have standard deviation sd: t(1 − alpha, n − 1) · sd / sqrt(n).
double paired_half_width(double sd, std::size_t n, double alpha);
// The smallest n in [2, limit] whose paired_half_width(sd, n, alpha) is at most
// `half_width`; 0 when none is.
std::size_t pairs_for_half_width(double sd, double half_width, double alpha, std::size_t limit = 100000);

}  // namespace mpverify::experiments
