// What rounding a tensor to a low-precision format at a loss scale does to
// it: the recorder statistics of one tensor.
//
// The values examined are v = x * scale, rounded to nearest-even to the target
// format. The scale must be a finite positive float value (a loss scale is),
// so that x * scale is computed EXACTLY in double: a float times a float has
// at most 48 significant bits and an exponent inside double's range. That
// exact v may lie outside float's range (e.g. 2^120 * 2^16 for bf16), which is
// why v is rounded from the double, not from a float product.
//
// Three paths count the roundings, with identical results (tests compare them):
//  - fused: at scale 1, one pass over the float bits gives the counters, the histogram, the maximum and the
//    norm together (record/tensor_stats_fused.h: the counts as thresholds on |x|'s bits, found from and
//    checked against the quantize path per format; an AVX-512 kernel where the CPU has it);
//  - quantize: when every v is exactly a float (always the case for a
//    power-of-two scale that keeps the tensor inside float's normal range),
//    the float products go through emu::quantize with counters (SIMD for fp16);
//  - scalar: otherwise every v goes through formats::from_double and
//    emu::count_rounding, element by element.
// `automatic` picks fused at scale 1 for a format it can classify (signed, with a zero and subnormals),
// else quantize when it is exact for the whole tensor, else scalar. The quantize and scalar paths are the
// definition the fused one is held to.
#pragma once

#include <cstdint>
#include <span>

#include "emu/counters.h"
#include "emu/exponent_histogram.h"
#include "formats/format.h"

namespace mpverify::record {

enum class StatsPath { automatic, fused, quantize, scalar };

struct TensorStats {
  std::uint64_t count = 0;         // elements
  std::uint64_t zeros_in = 0;      // exact zeros in x (+0 and -0)
  std::uint64_t nonfinite_in = 0;  // NaN or infinity in x
  std::uint64_t nonzero_finite = 0;  // count - zeros_in - nonfinite_in: the denominator of the rates
  // Rates over the non-zero finite inputs (0 when there are none): the
  // fraction whose rounded v is +-0, is a non-zero subnormal, overflowed
  // (IEEE overflow flag: to infinity, NaN or saturated, per the format).
  double underflow_to_zero_rate = 0;
  double subnormal_rate = 0;
  double overflow_rate = 0;
  // Largest |x| over the finite x (0 when there is none); of x, not of v.
  double max_abs = 0;
  // sqrt(sum of x^2) over the finite x, of x, not of v: the squares are exact in double and summed in
  // eight interleaved partial sums (element i into sum i mod 8, the tail past the last whole eight into
  // sum 0, then ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))): that order is part of the result.
  double norm = 0;
  // log2(max_finite / (scale * max_abs)), from the binary exponents and
  // significands of max_finite and the exact scale * max_abs: an exact integer
  // when that ratio is a power of two, else within an ulp or two of the true
  // value. +inf when max_abs is 0 (nothing can overflow). Negative: the
  // largest value is above max_finite (it overflows, or saturates).
  double headroom_log2 = 0;
  emu::Counters counters;           // the raw counts of rounding every v
  emu::ExponentHistogram histogram;  // of the exact v
  emu::FormatThresholds thresholds;  // the target format's, to mark on it
};

// Throws std::invalid_argument when scale is not a finite positive float value,
// when `path` is quantize but some x * scale is not exactly a float, and when `path` is fused at another
// scale than 1 or for a format the fused pass cannot classify.
TensorStats tensor_stats(std::span<const float> x, const formats::Format& target, double scale = 1.0,
                         StatsPath path = StatsPath::automatic);

// The statistics of a tensor counted elsewhere (the Python package's torch path, on the tensor's own device):
// `counted` holds counters.elements, .zeros_in, .nonfinite_in, .underflow_to_zero, .subnormal, .overflow,
// the histogram, max_abs and norm; the rest (count, nonzero_finite, the rates, the headroom, the thresholds)
// is derived as tensor_stats derives it. Throws std::invalid_argument on counts that cannot be one tensor's
// (zeros and non-finite values beyond the elements, a rate's numerator beyond the non-zero finite values)
// and on a scale tensor_stats refuses.
TensorStats finish_tensor_stats(TensorStats counted, const formats::Format& target, double scale);

}  // namespace mpverify::record
