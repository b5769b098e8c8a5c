// The statistics of one tensor (or a sum of tensors) at one loss scale, in
// the categories of scaled_rounding.h, and the brute-force way to get them:
// every element through scale_and_round. The fast way (scale_sweep.h) must
// give identical numbers; tests hold the two together.
#pragma once

#include <cstdint>
#include <span>

#include "emu/exponent_histogram.h"
#include "formats/format.h"

namespace mpverify::analysis {

struct ScaleStats {
  double scale = 1;
  std::uint64_t count = 0;
  std::uint64_t zeros_in = 0;
  std::uint64_t nan_or_inf_in = 0;
  std::uint64_t underflow_to_zero = 0;
  std::uint64_t subnormal = 0;
  std::uint64_t overflow = 0;
  double max_abs = 0;  // largest finite |x| (of x, not of the product)
  // The exponent histogram of the products v = fl(x * S) in the tensor's type:
  // zeros, nans and infinities are those of x; below_range counts non-zero
  // finite x whose |v| < 2^-149 (v == 0 for float products); above_range those
  // whose |v| >= 2^128 (v == inf for float products).
  emu::ExponentHistogram histogram;

  std::uint64_t nonzero_finite() const { return count - zeros_in - nan_or_inf_in; }
  double rate(std::uint64_t part) const {
    const std::uint64_t n = nonzero_finite();
    return n == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(n);
  }
  // log2(max_finite / (S * max_abs)); +inf when max_abs is 0. Negative: the
  // largest value is beyond the format's largest finite value.
  double headroom_log2(const formats::Format& f) const;

  ScaleStats& operator+=(const ScaleStats& other);  // same scale; counts add, max_abs is the max
  friend bool operator==(const ScaleStats&, const ScaleStats&) = default;
};

// Adds every element of x (float products) or of a double tensor (double products).
void add_brute_force(std::span<const float> x, const formats::Format& f, ScaleStats& s);
void add_brute_force(std::span<const double> x, const formats::Format& f, ScaleStats& s);

}  // namespace mpverify::analysis
