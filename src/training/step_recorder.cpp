#include "training/step_recorder.h"

#include <array>
#include <cmath>
#include <limits>

#include "record/histogram_json.h"
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

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

void StepRecorder::begin_step(std::size_t step, bool keep_records, bool histograms) {
  step_ = step;
  keep_ = keep_records;
  histograms_ = histograms;
  gradients_ = {};
  activations_ = {};
  blocks_ = {};
  tensor_lines_.clear();
  histogram_lines_.clear();
  block_lines_.clear();
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
                          {"sqnr_db", number_or_null(sqnr)},
                          {"scale_exponents", std::move(exponents)},
                          {"zero_scales", stats.zero_scales}});
}

RateCounts StepRecorder::record(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass pass,
                          std::span<const float> values, const formats::Format& format, double scale) {
  const formats::Format& target = format == nn::Precision::fp32() ? study_ : format;
  const record::TensorStats s = record::tensor_stats(values, target, scale);
  RateCounts counts;
  counts.nonzero = s.nonzero_finite;
  counts.underflow_to_zero = s.counters.underflow_to_zero;
  counts.subnormal = s.counters.subnormal;
  counts.overflow = s.counters.overflow;
  if (role == nn::Role::activation_grad || role == nn::Role::weight_grad) gradients_ += counts;
  if (role == nn::Role::activation) activations_ += counts;
  if (!thresholds_.contains(target.name)) thresholds_[target.name] = record::thresholds_to_json(s.thresholds);
  if (!keep_) return counts;
  tensor_lines_.push_back({{"step", step_},
                           {"layer", layer},
                           {"tensor", tensor},
                           {"role", nn::to_string(role)},
                           {"pass", nn::to_string(pass)},
                           {"format", target.name},
                           {"stored_in", format.name},
                           {"count", s.count},
                           {"zeros_in", s.zeros_in},
                           {"nonzero_finite", s.nonzero_finite},
                           {"underflow_to_zero_rate", s.underflow_to_zero_rate},
                           {"subnormal_rate", s.subnormal_rate},
                           {"overflow_rate", s.overflow_rate},
                           {"max_abs", s.max_abs},
                           {"headroom_log2", number_or_null(s.headroom_log2)},
                           {"norm", s.norm}});
  if (scale != 1.0) tensor_lines_.back()["scale"] = scale;
  if (!histograms_) return counts;
  nlohmann::json h = record::histogram_to_json(s.histogram);
  h["step"] = step_;
  h["layer"] = layer;
  h["tensor"] = tensor;
  h["role"] = nn::to_string(role);
  h["format"] = target.name;
  histogram_lines_.push_back(std::move(h));
  return counts;
}

}  // namespace mpverify::training
