#include "analysis/scale_sweep.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "analysis/scaled_rounding.h"

namespace mpverify::analysis {

namespace {

template <class T>
using BitsOf = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

template <class T>
constexpr BitsOf<T> inf_bits = std::bit_cast<BitsOf<T>>(std::numeric_limits<T>::infinity());

// The smallest finite |x| pattern in [1, inf) where `pred` holds, or the
// infinity pattern when it holds nowhere; pred must be monotone (false then true).
template <class T, class Pred>
BitsOf<T> first_true(Pred pred) {
  BitsOf<T> lo = 1, hi = inf_bits<T>;
  while (lo < hi) {
    const BitsOf<T> mid = lo + (hi - lo) / 2;
    if (pred(std::bit_cast<T>(mid))) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

template <class T>
ScaleThresholds<BitsOf<T>> thresholds(const formats::Format& f, T scale) {
  ScaleThresholds<BitsOf<T>> t;
  t.nonzero = first_true<T>([&](T x) { return !scale_and_round(x, scale, f).underflow_to_zero; });
  t.normal = first_true<T>([&](T x) {
    const ScaledOutcome o = scale_and_round(x, scale, f);
    return !o.underflow_to_zero && !o.subnormal;
  });
  t.overflow = first_true<T>([&](T x) { return scale_and_round(x, scale, f).overflow; });
  for (int k = 0; k <= 277; ++k) {
    const T bound = std::ldexp(T{1}, k - 149);  // 2^128 is inf in float: then "v is inf"
    t.edge.push_back(first_true<T>([&](T x) { return std::fabs(x * scale) >= bound; }));
  }
  return t;
}

template <class Bits>
std::vector<Bits> sorted_union(const std::vector<ScaleThresholds<Bits>>& all, Bits inf) {
  std::vector<Bits> v = {1, inf, static_cast<Bits>(inf + 1)};
  for (const auto& t : all) {
    v.push_back(t.nonzero);
    v.push_back(t.normal);
    v.push_back(t.overflow);
    v.insert(v.end(), t.edge.begin(), t.edge.end());
  }
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

template <class T>
void fill(const ThresholdCounter<BitsOf<T>>& counter, const std::vector<BitsOf<T>>& sorted,
          const ScaleThresholds<BitsOf<T>>& t, ScaleStats& s) {
  using Bits = BitsOf<T>;
  const std::vector<std::uint64_t> below_all = counter.below();
  const auto below = [&](Bits b) {
    return below_all[static_cast<std::size_t>(std::lower_bound(sorted.begin(), sorted.end(), b) - sorted.begin())];
  };
  const Bits inf = inf_bits<T>;
  s.count += counter.count();
  s.zeros_in += below(1);
  s.nan_or_inf_in += counter.count() - below(inf);
  s.underflow_to_zero += below(t.nonzero) - below(1);
  s.subnormal += below(t.normal) - below(t.nonzero);
  s.overflow += below(inf) - below(t.overflow);
  s.max_abs = std::max(s.max_abs, static_cast<double>(std::bit_cast<T>(counter.max_below(inf))));
  emu::ExponentHistogram& h = s.histogram;
  h.zeros += below(1);
  h.nans += counter.count() - below(inf + 1);
  h.infinities += below(inf + 1) - below(inf);
  h.below_range += below(t.edge.front()) - below(1);
  for (std::size_t k = 0; k + 1 < t.edge.size(); ++k) h.bins[k] += below(t.edge[k + 1]) - below(t.edge[k]);
  h.above_range += below(inf) - below(t.edge.back());
}

}  // namespace

ScaleThresholds<std::uint32_t> float_thresholds(const formats::Format& f, float scale) { return thresholds(f, scale); }
ScaleThresholds<std::uint64_t> double_thresholds(const formats::Format& f, double scale) { return thresholds(f, scale); }

SweepPlan::SweepPlan(formats::Format f, std::vector<double> scales) : format_(std::move(f)), scales_(std::move(scales)) {
  for (const double s : scales_) {
    check_scale(s);
    f32_.push_back(float_thresholds(format_, static_cast<float>(s)));
    f64_.push_back(double_thresholds(format_, s));
  }
  f32_sorted_ = sorted_union(f32_, inf_bits<float>);
  f64_sorted_ = sorted_union(f64_, inf_bits<double>);
}

ScaleSweep::ScaleSweep(const SweepPlan& plan) : plan_(&plan), f32_(plan.f32_sorted_), f64_(plan.f64_sorted_) {}

void ScaleSweep::add(std::span<const float> x) { f32_.add_raw(reinterpret_cast<const std::byte*>(x.data()), x.size()); }
void ScaleSweep::add(std::span<const double> x) { f64_.add_raw(reinterpret_cast<const std::byte*>(x.data()), x.size()); }
void ScaleSweep::add_f32_bytes(const std::byte* bytes, std::size_t n) { f32_.add_raw(bytes, n); }

std::vector<ScaleStats> ScaleSweep::results() const {
  std::vector<ScaleStats> out;
  for (std::size_t i = 0; i < plan_->scales_.size(); ++i) {
    ScaleStats s;
    s.scale = plan_->scales_[i];
    if (f32_.count() > 0) fill<float>(f32_, plan_->f32_sorted_, plan_->f32_[i], s);
    if (f64_.count() > 0) fill<double>(f64_, plan_->f64_sorted_, plan_->f64_[i], s);
    out.push_back(s);
  }
  return out;
}

}  // namespace mpverify::analysis
