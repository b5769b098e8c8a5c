// The recorders of one training run: every tensor a
// layer stores (nn::Context::store), and the weights and updates the
// trainer hands in, measured against the format it lives in:
//  - its log2-exponent histogram (with the zero bin; the format's thresholds
//    go in the summary);
//  - the fraction of its non-zero finite FP32 values (as the op produced
//    them, before the store rounds them) that become zero, and that become
//    subnormal, in the target format; the overflow rate; the headroom
//    log2(max_finite / max|x|).
// Gradients in the backward pass are the scaled ones (the loss scale
// multiplied the loss gradient), so these are the rates "at the current
// scale".
//
// The target format is the tensor's storage format, except where that is
// fp32 (the fp32 recipe, master weights): there the study format (fp16 by
// default) is used instead, so an FP32 run reports what fp16 WOULD lose at
// its scale; the per-tensor record names the format it was measured against.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "emu/block_stats.h"
#include "formats/format.h"
#include "nn/context.h"
#include "record/tensor_stats.h"

namespace mpverify::training {

struct RateCounts {
  std::uint64_t nonzero = 0;            // non-zero finite values examined
  std::uint64_t underflow_to_zero = 0;  // ... that became +-0
  std::uint64_t subnormal = 0;          // ... that became non-zero subnormals
  std::uint64_t overflow = 0;           // ... that overflowed (IEEE overflow flag)
  double underflow_rate() const { return rate(underflow_to_zero); }
  double subnormal_rate() const { return rate(subnormal); }
  double overflow_rate() const { return rate(overflow); }
  double rate(std::uint64_t n) const { return nonzero ? static_cast<double>(n) / static_cast<double>(nonzero) : 0.0; }
  RateCounts& operator+=(const RateCounts& o);
};

// The block quantizations of a step (block-scaled recipes): summed over every operand of every GEMM.
struct BlockRates {
  std::uint64_t elements = 0, saturated = 0, nonzero = 0, underflow_to_zero = 0;
  emu::BlockStats stats;               // signal and noise summed: the step's SQNR
  double worst_sqnr_db = std::numeric_limits<double>::infinity();  // the lowest of one operand's
  bool any() const { return elements > 0; }
};

class StepRecorder final : public nn::StoreObserver {
 public:
  explicit StepRecorder(formats::Format study_format) : study_(std::move(study_format)) {}

  // Starts a step; `keep_records`: keep per-tensor lines (and histograms) for it.
  void begin_step(std::size_t step, bool keep_records, bool histograms);

  void on_store(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass pass,
                std::span<const float> exact, std::span<const float> stored,
                const formats::Format& format) override;
  // A block-scaled GEMM's operand (blocks.jsonl): its saturation and underflow rates, SQNR against the
  // fp32 values, and the histogram of its blocks' scale exponents.
  void on_block_quantized(std::string_view layer, std::string_view operand, nn::Pass pass,
                          const emu::BlockScheme& scheme, const emu::BlockCounters& counters,
                          const emu::BlockStats& stats) override;
  // A tensor the trainer holds (weights, updates): measured as if stored in `format`. `scale`: the
  // values are measured as values * scale (exact; record::tensor_stats), for a caller that holds
  // unscaled gradients and asks what they are at the loss scale; the line then says the scale.
  // Returns the tensor's own counts (what it added to gradients() or activations()).
  RateCounts record(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass pass,
              std::span<const float> values, const formats::Format& format, double scale = 1.0);
  // The same for statistics counted elsewhere (record::finish_tensor_stats; the Python package counts a
  // tensor on its own device): `stats` measured against target_format(format).
  RateCounts record_stats(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass pass,
                          const record::TensorStats& stats, const formats::Format& format, double scale = 1.0);
  // What a tensor stored in `format` is measured against: the study format for fp32, else its own.
  const formats::Format& target_format(const formats::Format& format) const;

  // Sums over the step's tensors: gradients (activation and weight) and activations.
  const RateCounts& gradients() const { return gradients_; }
  const RateCounts& activations() const { return activations_; }
  // The same sums per format measured against (a bf16 autocast run measures bf16 tensors against bf16 and
  // fp32 ones against the study format, and the sums above pool them).
  struct FormatCounts {
    RateCounts gradients, activations;
  };
  const std::map<std::string, FormatCounts>& by_format() const { return by_format_; }
  // by_format() as the steps.jsonl key "by_format": {FORMAT: {underflow_rate, subnormal_rate, overflow_rate,
  // activation_underflow_rate, activation_overflow_rate, nonzero, activation_nonzero}}.
  nlohmann::json by_format_json() const;
  const BlockRates& blocks() const { return blocks_; }

  // The step's per-tensor records (tensors.jsonl lines) and histograms (histograms.jsonl lines), moved
  // out as JSON text, one object each (what nlohmann's dump() writes for the same object).
  std::vector<std::string> take_tensor_lines() { return std::move(tensor_lines_); }
  std::vector<std::string> take_histogram_lines() { return std::move(histogram_lines_); }
  std::vector<nlohmann::json> take_block_lines() { return std::move(block_lines_); }

  // The formats measured against so far, with their thresholds (for the summary).
  const nlohmann::json& thresholds() const { return thresholds_; }

 private:
  formats::Format study_;
  std::size_t step_ = 0;
  bool keep_ = false, histograms_ = false;
  RateCounts gradients_, activations_;
  std::map<std::string, FormatCounts> by_format_;
  BlockRates blocks_;
  std::vector<std::string> tensor_lines_, histogram_lines_;
  std::vector<nlohmann::json> block_lines_;
  nlohmann::json thresholds_ = nlohmann::json::object();
};

}  // namespace mpverify::training
