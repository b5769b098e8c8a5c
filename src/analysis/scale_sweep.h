// Every statistic of scale_stats.h, at several scales, in one pass over a
// tensor, equal to the brute-force counts (tests hold them together on
// boundary values and random tensors).
//
// A SweepPlan finds, for each scale, the bit patterns of |x| where each
// category begins (underflow to zero ends, subnormal ends, overflow begins,
// and each exponent bin of the products begins) by bisection over the bit
// patterns with scale_and_round itself, so the fast path uses the definition
// rather than a re-derivation of it; a ScaleSweep then only counts how many
// |x| lie below each (threshold_counter.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "analysis/scale_stats.h"
#include "analysis/threshold_counter.h"
#include "formats/format.h"

namespace mpverify::analysis {

// Where the categories of one scale begin, as |x| bit patterns of type Bits:
// every |x| < nonzero is rounded to zero (or is zero), and so on.
template <class Bits>
struct ScaleThresholds {
  Bits nonzero = 0;   // smallest |x| whose rounded product is not zero
  Bits normal = 0;    // smallest |x| whose rounded product is neither zero nor subnormal
  Bits overflow = 0;  // smallest |x| that overflows (the infinity pattern when none does)
  // edge[k]: smallest |x| with |fl(x * S)| >= 2^(k - 149), k = 0..277 (2^128 last).
  std::vector<Bits> edge;
};

ScaleThresholds<std::uint32_t> float_thresholds(const formats::Format& f, float scale);
ScaleThresholds<std::uint64_t> double_thresholds(const formats::Format& f, double scale);

class SweepPlan {
 public:
  // Throws std::invalid_argument for a scale that check_scale rejects.
  SweepPlan(formats::Format f, std::vector<double> scales);
  const formats::Format& format() const { return format_; }
  const std::vector<double>& scales() const { return scales_; }

 private:
  friend class ScaleSweep;
  formats::Format format_;
  std::vector<double> scales_;
  std::vector<ScaleThresholds<std::uint32_t>> f32_;
  std::vector<ScaleThresholds<std::uint64_t>> f64_;
  std::vector<std::uint32_t> f32_sorted_;  // every threshold of every scale, plus 1, inf, inf + 1
  std::vector<std::uint64_t> f64_sorted_;
};

class ScaleSweep {
 public:
  explicit ScaleSweep(const SweepPlan& plan);
  void add(std::span<const float> x);
  void add(std::span<const double> x);
  // n float32 values stored little-endian at `bytes` (any alignment).
  void add_f32_bytes(const std::byte* bytes, std::size_t n);
  // One ScaleStats per scale of the plan, in its order.
  std::vector<ScaleStats> results() const;

 private:
  const SweepPlan* plan_;
  ThresholdCounter<std::uint32_t> f32_;
  ThresholdCounter<std::uint64_t> f64_;
};

}  // namespace mpverify::analysis
