// Where the values of a tensor lie on the exponent axis: a histogram of
// floor(log2|x|), optionally at a loss scale S (of x * S), with the target
// format's thresholds to mark against (smallest subnormal, smallest normal,
// largest finite). The GPU side fills the same bins without copying the
// tensor to the host (gpu/tensor_counters_gpu.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "formats/format.h"

namespace mpverify::emu {

struct ExponentHistogram {
  static constexpr int min_exponent = -149;  // float's smallest subnormal, 2^-149
  static constexpr int max_exponent = 127;   // float's top binade
  static constexpr std::size_t exponent_bins = max_exponent - min_exponent + 1;

  // bins[e - min_exponent] counts the values with 2^e <= |v| < 2^(e+1).
  std::array<std::uint64_t, exponent_bins> bins{};
  std::uint64_t zeros = 0;       // +0 and -0
  std::uint64_t nans = 0;
  std::uint64_t infinities = 0;  // +-inf
  // Only a scale reaches these: the exact product x * S can leave float's range.
  std::uint64_t below_range = 0;  // 0 < |x * S| < 2^-149
  std::uint64_t above_range = 0;  // 2^128 <= |x * S| (finite)

  // The bin of exponent e; std::out_of_range outside [min_exponent, max_exponent].
  std::uint64_t& at(int e);
  std::uint64_t at(int e) const;

  // One value (a double, so that an exact scaled product fits).
  void add(double v);
  // Every x * S, computed exactly: a float times a float has at most 48
  // significant bits and an exponent well inside double's range, so the
  // product in double is not rounded.
  void add(std::span<const float> values, float scale = 1.0f);
  // add(values, 1): the exponents read off the float bits.
  void add_unscaled(std::span<const float> values);

  // All values counted: every bin plus zeros, NaNs, infinities, out of range.
  std::uint64_t total() const;

  ExponentHistogram& operator+=(const ExponentHistogram& other);
  friend bool operator==(const ExponentHistogram&, const ExponentHistogram&) = default;
};

// floor(log2|v|) of a finite non-zero v, read from its binary exponent
// (exact; no log2 call). std::invalid_argument for 0, NaN and infinities.
int floor_log2(double v);

// A format's limits on the exponent axis, from its Format fields, for marking
// a histogram: e.g. fp16: smallest subnormal 2^-24, smallest normal 2^-14,
// largest finite 65504 (in the bin of exponent 15).
struct FormatThresholds {
  double min_subnormal = 0;  // == min_normal without subnormals
  double min_normal = 0;
  double max_finite = 0;
  int min_subnormal_exponent = 0;  // floor_log2 of each: the bin it lies in
  int min_normal_exponent = 0;
  int max_finite_exponent = 0;
};
FormatThresholds format_thresholds(const formats::Format& f);

}  // namespace mpverify::emu
