#include "analysis/scale_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "analysis/scaled_rounding.h"
#include "record/tensor_stats.h"

namespace mpverify::analysis {

namespace {

template <class T>
void add_one(T x, T scale, const formats::Format& f, ScaleStats& s) {
  const ScaledOutcome o = scale_and_round(x, scale, f);
  s.count += 1;
  s.zeros_in += o.zero_in;
  s.nan_or_inf_in += o.nonfinite_in;
  s.underflow_to_zero += o.underflow_to_zero;
  s.subnormal += o.subnormal;
  s.overflow += o.overflow;
  if (std::isfinite(x)) s.max_abs = std::max(s.max_abs, static_cast<double>(std::fabs(x)));
  emu::ExponentHistogram& h = s.histogram;
  if (o.zero_in) ++h.zeros;
  else if (std::isnan(x)) ++h.nans;
  else if (std::isinf(x)) ++h.infinities;
  else if (o.product == 0) ++h.below_range;
  else if (std::isinf(o.product)) ++h.above_range;
  else h.add(o.product);  // a finite non-zero product: its bin, or below/above the range
}

}  // namespace

double ScaleStats::headroom_log2(const formats::Format& f) const {
  if (max_abs == 0) return std::numeric_limits<double>::infinity();
  // The recorder's headroom of the one value that decides it (exact for
  // power-of-two ratios); max_abs is a float value for float tensors. For an
  // f64 tensor whose largest value is not a float, fall back to log2.
  const float m = static_cast<float>(max_abs);
  if (static_cast<double>(m) == max_abs && std::isfinite(m))
    return record::tensor_stats(std::span<const float>(&m, 1), f, scale).headroom_log2;
  return std::log2(f.max_finite()) - std::log2(scale) - std::log2(max_abs);
}

ScaleStats& ScaleStats::operator+=(const ScaleStats& o) {
  count += o.count;
  zeros_in += o.zeros_in;
  nan_or_inf_in += o.nan_or_inf_in;
  underflow_to_zero += o.underflow_to_zero;
  subnormal += o.subnormal;
  overflow += o.overflow;
  max_abs = std::max(max_abs, o.max_abs);
  histogram += o.histogram;
  return *this;
}

void add_brute_force(std::span<const float> x, const formats::Format& f, ScaleStats& s) {
  check_scale(s.scale);
  const float scale = static_cast<float>(s.scale);
  for (const float xi : x) add_one(xi, scale, f, s);
}

void add_brute_force(std::span<const double> x, const formats::Format& f, ScaleStats& s) {
  check_scale(s.scale);
  for (const double xi : x) add_one(xi, s.scale, f, s);
}

}  // namespace mpverify::analysis
