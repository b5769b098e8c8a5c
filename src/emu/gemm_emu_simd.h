// Internal: the AVX-512 accumulation kernels behind gemm_emu (gemm_emu_x86.cpp).
#pragma once

#include <cmath>

#include "emu/counters.h"

namespace mpverify::emu::detail {

// (cpu_has_avx512() is declared in quantize_simd.h.)

// What a tile kernel covered: rows [0, rows) x columns [0, columns) of C;
// the caller accumulates the rest (the last rows, the last columns) with the
// portable loop, which gives the same results element by element.
struct TileCover {
  int rows, columns;
};

// acc = A (m x k) * B (k x n), row-major, accumulated per element in k order
// with acc <- fl16(a*b + acc); A and B must hold fp16 values; acc starts at 0.
TileCover fp16_accumulate_tiles_avx512(const float* A, const float* B, float* acc, int m, int n, int k,
                                       Counters* counters);
// The same with acc <- fl32(a*b + acc) (an fp32 FMA per step), counted per
// step as count_fp32_step does when counters is set (then k < 2^28: 32-bit
// lane counters), with count_inexact as its argument of that name.
TileCover fp32_accumulate_tiles_avx512(const float* A, const float* B, float* acc, int m, int n, int k,
                                       Counters* counters, bool count_inexact = false);

// Whether an fp32 accumulation step, result = fl32(a*b + c) (one FMA), was
// inexact as count_rounding (counters.cpp) counts it: its flags' inexact,
// which IEEE 754 raises when the exact value a*b + c is finite and the result
// differs from it, overflow included (a finite value rounded to inf), and not
// for an invalid operation (inf * 0, inf - inf: NaN) or an exact inf.
// With a, b and c finite: p = a*b is exact in double (24 + 24 bits, and
// 2^-298 <= |p| < 2^256 when non-zero: normal in double), and TwoSum (Knuth)
// splits p + c exactly into s = fl64(p + c) and e = (p + c) - s, for any
// finite doubles without overflow (|p + c| < 2^257), underflow included
// (a double sum that underflows is exact). If p + c is a float, it is a
// double: e = 0 and s = p + c = result. Conversely e = 0 and s = result make
// p + c = result. So the step is exact iff e == 0 and s == result (an inf
// result, an overflow, is no finite s: inexact). Needs -ffp-contract=off (the
// project's flags): no fused TwoSum.
inline bool fp32_step_inexact(float a, float b, float c, float result) {
  if (!std::isfinite(a) || !std::isfinite(b) || !std::isfinite(c)) return false;  // exact inf, or NaN: not inexact
  const double p = static_cast<double>(a) * static_cast<double>(b), w = static_cast<double>(c);
  const double s = p + w;
  const double p_part = s - w;
  const double e = (p - p_part) + (w - (s - p_part));  // TwoSum: p + w = s + e exactly
  return !(e == 0 && s == static_cast<double>(result));
}

// The one definition of how an fp32 accumulation step, result = fl32(a*b + c)
// (one FMA), is counted at "gemm.accumulate": the portable loop calls it, the
// AVX-512 tiles mirror it on masks (gemm_emu_x86.cpp; a test compares).
//  - elements, nonfinite_in, overflow: count_rounding's (counters.cpp) for the
//    exact value a*b + c. (product + c in double is that value or its nearest
//    double: the same finiteness; the product is exact.)
//  - nan_created: a NaN result from non-NaN a, b and c (inf * 0, inf - inf),
//    as add_in_format_generic (accumulate.cpp) counts inf - inf: the step made
//    the NaN, so it is not also a non-finite exact value coming in.
//    (count_rounding's "NaN from a non-NaN exact value" never happens here.)
//  - addends_nonzero and swamped: count_update (counters.h) with w = c and
//    u = a*b, exact: u != 0 exactly when a != 0 and b != 0.
//  - inexact, only when count_inexact (GemmPolicy::count_step_inexact):
//    fp32_step_inexact above. The tiles take it as RD(a*b + c) != RU(a*b + c)
//    (two more FMAs with directed rounding): the same event, since the
//    directed roundings of a finite value agree iff it is a float (an
//    overflowing one rounds down to the largest float, up to inf), and a NaN
//    compares unequal to nothing under an ordered compare. Off, it stays 0.
//  - Not counted (0): zeros_in, underflow, underflow_to_zero, subnormal: each
//    would cost the tiles a compare or more per step (gemm_emu.h).
inline void count_fp32_step(Counters& n, float a, float b, float c, float result, bool count_inexact = false) {
  const double product = static_cast<double>(a) * static_cast<double>(b);  // exact: 24 + 24 bits, |.| < 2^256
  const double exact = product + static_cast<double>(c);
  const bool created = std::isnan(result) && !std::isnan(a) && !std::isnan(b) && !std::isnan(c);
  n.elements += 1;
  n.nonfinite_in += !std::isfinite(exact) && !created;
  n.overflow += std::isfinite(exact) && std::isinf(result);
  n.nan_created += created;
  if (count_inexact) n.inexact += fp32_step_inexact(a, b, c, result);
  count_update(n, c, product, result);
}

}  // namespace mpverify::emu::detail
