#include "training/step_recorder.h"

#include <cmath>

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

double l2_norm(std::span<const float> x) {
  double sum = 0;
  for (float v : x)
    if (std::isfinite(v)) sum += static_cast<double>(v) * static_cast<double>(v);
  return std::sqrt(sum);
}

// The sparse-free compact encoding: the bins from the lowest to the highest non-empty one.
nlohmann::json histogram_json(const emu::ExponentHistogram& h) {
  int first = emu::ExponentHistogram::max_exponent + 1, last = emu::ExponentHistogram::min_exponent - 1;
  for (int e = emu::ExponentHistogram::min_exponent; e <= emu::ExponentHistogram::max_exponent; ++e) {
    if (h.at(e) == 0) continue;
    first = std::min(first, e);
    last = std::max(last, e);
  }
  nlohmann::json counts = nlohmann::json::array();
  for (int e = first; e <= last; ++e) counts.push_back(h.at(e));
  return {{"zeros", h.zeros},
          {"nans", h.nans},
          {"infinities", h.infinities},
          {"below_range", h.below_range},
          {"above_range", h.above_range},
          {"first_exponent", first <= last ? nlohmann::json(first) : nlohmann::json(nullptr)},
          {"counts", counts}};
}

nlohmann::json thresholds_json(const emu::FormatThresholds& t) {
  return {{"min_subnormal", t.min_subnormal},
          {"min_normal", t.min_normal},
          {"max_finite", t.max_finite},
          {"min_subnormal_exponent", t.min_subnormal_exponent},
          {"min_normal_exponent", t.min_normal_exponent},
          {"max_finite_exponent", t.max_finite_exponent}};
}

}  // namespace

void StepRecorder::begin_step(std::size_t step, bool keep_records, bool histograms) {
  step_ = step;
  keep_ = keep_records;
  histograms_ = histograms;
  gradients_ = {};
  activations_ = {};
  tensor_lines_.clear();
  histogram_lines_.clear();
}

void StepRecorder::on_store(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass pass,
                            std::span<const float> exact, std::span<const float>, const formats::Format& format) {
  record(layer, tensor, role, pass, exact, format);
}

void StepRecorder::record(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass pass,
                          std::span<const float> values, const formats::Format& format) {
  const formats::Format& target = format == nn::Precision::fp32() ? study_ : format;
  const record::TensorStats s = record::tensor_stats(values, target);
  RateCounts counts;
  counts.nonzero = s.nonzero_finite;
  counts.underflow_to_zero = s.counters.underflow_to_zero;
  counts.subnormal = s.counters.subnormal;
  counts.overflow = s.counters.overflow;
  if (role == nn::Role::activation_grad || role == nn::Role::weight_grad) gradients_ += counts;
  if (role == nn::Role::activation) activations_ += counts;
  if (!thresholds_.contains(target.name)) thresholds_[target.name] = thresholds_json(s.thresholds);
  if (!keep_) return;
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
                           {"norm", l2_norm(values)}});
  if (!histograms_) return;
  nlohmann::json h = histogram_json(s.histogram);
  h["step"] = step_;
  h["layer"] = layer;
  h["tensor"] = tensor;
  h["role"] = nn::to_string(role);
  h["format"] = target.name;
  histogram_lines_.push_back(std::move(h));
}

}  // namespace mpverify::training
