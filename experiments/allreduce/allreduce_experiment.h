// "What does reduced-precision all-reduce lose?": the per-rank gradients of a
// real training step (training/shard_gradients.h: one batch of N B examples
// cut into N shards, each rank's gradient of its shard's mean loss, FP32
// reference backend) summed across N ranks (collective/allreduce.h) in each
// format and order, against the exact sum.
//
// For every N of the list: one batch of N B examples (the run with the seed's
// step `step`), its N rows, their exact sum s (collective::ExactSum), and for
// each format (fp32, bf16, fp16 with no scaling; fp8-e4m3 and fp8-e5m2 with
// per-rank scaling) and algorithm (ring, tree) the reduced vector s^ and
//   normwise  = ||s^ - s||_2 / ||s||_2 over the compared elements,
//   median / max relative error |s^_i - s_i| / |s_i| over the compared
//               elements with s_i != 0,
//   swamped, underflow, overflow per addition (the additions' counters
//               divided by the additions), the inputs' underflows per input,
//   not compared (a non-finite result: overflow).
// Also per N: kappa = ||sum_r |x_r| ||_2 / ||s||_2 (the sum's condition, what
// the worst-case bounds gamma_k kappa scale with) and the seconds taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpverify::experiments {

struct AllreduceExperimentConfig {
  std::string model = "cnn";
  std::string data = "synthetic";
  std::vector<std::size_t> ranks = {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  std::size_t shard_batch = 2;
  std::size_t step = 0;
  std::uint64_t seed = 0;
  std::filesystem::path report = "reports/allreduce.md";
};

struct AllreduceCell {
  std::size_t ranks = 0;
  std::string format, algorithm, scaling;
  double normwise = 0, median_rel = 0, max_rel = 0;
  std::uint64_t additions = 0, swamped = 0, underflow = 0, overflow = 0;
  std::uint64_t inputs = 0, input_underflow = 0;
  std::size_t compared = 0, not_compared = 0;
};

struct AllreduceRanksInfo {
  std::size_t ranks = 0, elements = 0;
  double kappa = 0;             // ||sum |x| || / ||s||
  double gradient_seconds = 0;  // the shard gradients
  double reduce_seconds = 0;    // every format and algorithm
};

struct AllreduceExperimentResult {
  std::vector<AllreduceCell> cells;
  std::vector<AllreduceRanksInfo> per_ranks;
  std::vector<std::filesystem::path> files;
  nlohmann::json json;
};

// The formats and their scaling, in the report's order.
struct AllreduceFormatCase {
  std::string format, scaling;
};
std::vector<AllreduceFormatCase> allreduce_format_cases();

// Throws std::invalid_argument for a bad configuration (before anything is written).
void validate(const AllreduceExperimentConfig& config);

AllreduceExperimentResult run_allreduce_experiment(const AllreduceExperimentConfig& config,
                                                   const std::function<void(const std::string&)>& progress);

// The report and its figures (allreduce_report.cpp); returns the files written.
std::vector<std::filesystem::path> write_allreduce_report(const AllreduceExperimentConfig& config,
                                                          const AllreduceExperimentResult& result);

}  // namespace mpverify::experiments
