#include "training/step_recorder.h"

#include <array>
#include <cmath>
#include <limits>

#include "record/histogram_json.h"
#include "record/json_line.h"
#include "record/json_number.h"
#include "record/tensor_stats.h"

namespace mpverify::training {

RateCounts& RateCounts::operator+=(const RateCounts& o) {
  nonzero += o.nonzero;
  underflow_to_zero += o.underflow_to_zero;
  subnormal += o.subnormal;
  overflow += o.overflow;
  return *this;
}

namespace {

// tensors.jsonl's line, keys in sorted order (record/json_line.h).
std::string tensor_line(std::size_t step, std::string_view layer, std::string_view tensor, nn::Role role,
                        nn::Pass pass, const formats::Format& target, const formats::Format& stored,
                        const record::TensorStats& s, double scale) {
  record::JsonLine line;
  line.add("count", std::uint64_t{s.count})
      .add("format", target.name)
      .add("headroom_log2", s.headroom_log2)  // null when not finite
      .add("layer", layer)
      .add("max_abs", static_cast<double>(s.max_abs))
      .add("nonzero_finite", std::uint64_t{s.nonzero_finite})
      .add("norm", s.norm)
      .add("overflow_rate", s.overflow_rate)
      .add("pass", nn::to_string(pass))
      .add("role", nn::to_string(role));
  if (scale != 1.0) line.add("scale", scale);
  return line.add("step", std::uint64_t{step})
      .add("stored_in", stored.name)
      .add("subnormal_rate", s.subnormal_rate)
      .add("tensor", tensor)
      .add("underflow_to_zero_rate", s.underflow_to_zero_rate)
      .add("zeros_in", std::uint64_t{s.zeros_in})
      .take();
}

// histograms.jsonl's line: record::histogram_to_json's fields and the tensor's, keys in sorted order.
std::string histogram_line(std::size_t step, std::string_view layer, std::string_view tensor, nn::Role role,
                           const formats::Format& target, const emu::ExponentHistogram& h) {
  const record::OccupiedBins bins = record::occupied_bins(h);
  record::JsonLine line;
  line.add("above_range", std::uint64_t{h.above_range})
      .add("below_range", std::uint64_t{h.below_range})
      .add("counts", bins.counts);
  if (bins.counts.empty()) line.add_null("first_exponent");
  else line.add("first_exponent", bins.first_exponent);
  return line.add("format", target.name)
      .add("infinities", std::uint64_t{h.infinities})
      .add("layer", layer)
      .add("nans", std::uint64_t{h.nans})
      .add("role", nn::to_string(role))
      .add("step", std::uint64_t{step})
      .add("tensor", tensor)
      .add("zeros", std::uint64_t{h.zeros})
      .take();
}

}  // namespace

void StepRecorder::begin_step(std::size_t step, bool keep_records, bool histograms) {
  step_ = step;
  keep_ = keep_records;
  histograms_ = histograms;
  gradients_ = {};
  activations_ = {};
  by_format_.clear();
  blocks_ = {};
  tensor_lines_.clear();
  histogram_lines_.clear();
  block_lines_.clear();
}

nlohmann::json StepRecorder::by_format_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, c] : by_format_)
    out[name] = {{"underflow_rate", c.gradients.underflow_rate()},
                 {"subnormal_rate", c.gradients.subnormal_rate()},
                 {"overflow_rate", c.gradients.overflow_rate()},
                 {"activation_underflow_rate", c.activations.underflow_rate()},
                 {"activation_overflow_rate", c.activations.overflow_rate()},
                 {"nonzero", c.gradients.nonzero},
                 {"activation_nonzero", c.activations.nonzero}};
  return out;
}

void StepRecorder::on_store(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass pass,
                            std::span<const float> exact, std::span<const float>, const formats::Format& format) {
  record(layer, tensor, role, pass, exact, format);
}

void StepRecorder::on_block_quantized(std::string_view layer, std::string_view operand, nn::Pass pass,
                                      const emu::BlockScheme& scheme, const emu::BlockCounters& counters,
                                      const emu::BlockStats& stats) {
  blocks_.elements += counters.elements;
  blocks_.saturated += counters.saturated;
  blocks_.nonzero += stats.nonzero_in;
  blocks_.underflow_to_zero += counters.underflow_to_zero;
  blocks_.stats += stats;
  const double sqnr = stats.sqnr_db();
  if (sqnr < blocks_.worst_sqnr_db) blocks_.worst_sqnr_db = sqnr;
  if (!keep_) return;
  nlohmann::json exponents = nlohmann::json::object();
  for (const auto& [exponent, blocks] : stats.scale_exponents) exponents[std::to_string(exponent)] = blocks;
  auto rate = [](std::uint64_t n, std::uint64_t d) { return d ? static_cast<double>(n) / static_cast<double>(d) : 0.0; };
  block_lines_.push_back({{"step", step_},
                          {"layer", layer},
                          {"operand", operand},
                          {"pass", nn::to_string(pass)},
                          {"scheme", scheme.name},
                          {"elements", counters.elements},
                          {"blocks", counters.blocks},
                          {"saturated", counters.saturated},
                          {"saturation_rate", rate(counters.saturated, counters.elements)},
                          {"nonzero_in", stats.nonzero_in},
                          {"underflow_to_zero", counters.underflow_to_zero},
                          {"underflow_rate", rate(counters.underflow_to_zero, stats.nonzero_in)},
                          {"subnormal", counters.subnormal},
                          {"scales_clamped", counters.scales_clamped},
                          {"nonfinite_in", counters.nonfinite_in},
                          {"sqnr_db", record::number_or_null(sqnr)},
                          {"scale_exponents", std::move(exponents)},
                          {"zero_scales", stats.zero_scales}});
}

const formats::Format& StepRecorder::target_format(const formats::Format& format) const {
  return format == nn::Precision::fp32() ? study_ : format;
}

RateCounts StepRecorder::record(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass pass,
                          std::span<const float> values, const formats::Format& format, double scale) {
  return record_stats(layer, tensor, role, pass, record::tensor_stats(values, target_format(format), scale), format,
                      scale);
}

RateCounts StepRecorder::record_stats(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass pass,
                                      const record::TensorStats& s, const formats::Format& format, double scale) {
  const formats::Format& target = target_format(format);
  RateCounts counts;
  counts.nonzero = s.nonzero_finite;
  counts.underflow_to_zero = s.counters.underflow_to_zero;
  counts.subnormal = s.counters.subnormal;
  counts.overflow = s.counters.overflow;
  if (role == nn::Role::activation_grad || role == nn::Role::weight_grad) {
    gradients_ += counts;
    by_format_[target.name].gradients += counts;
  }
  if (role == nn::Role::activation) {
    activations_ += counts;
    by_format_[target.name].activations += counts;
  }
  if (!thresholds_.contains(target.name)) thresholds_[target.name] = record::thresholds_to_json(s.thresholds);
  if (!keep_) return counts;
  tensor_lines_.push_back(tensor_line(step_, layer, tensor, role, pass, target, format, s, scale));
  if (histograms_) histogram_lines_.push_back(histogram_line(step_, layer, tensor, role, target, s.histogram));
  return counts;
}

}  // namespace mpverify::training
