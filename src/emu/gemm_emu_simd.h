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
// lane counters).
TileCover fp32_accumulate_tiles_avx512(const float* A, const float* B, float* acc, int m, int n, int k,
                                       Counters* counters);

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
//  - Not counted (0): zeros_in, inexact, underflow, underflow_to_zero,
//    subnormal: each would cost the tiles a compare or more per step (gemm_emu.h).
inline void count_fp32_step(Counters& n, float a, float b, float c, float result) {
  const double product = static_cast<double>(a) * static_cast<double>(b);  // exact: 24 + 24 bits, |.| < 2^256
  const double exact = product + static_cast<double>(c);
  const bool created = std::isnan(result) && !std::isnan(a) && !std::isnan(b) && !std::isnan(c);
  n.elements += 1;
  n.nonfinite_in += !std::isfinite(exact) && !created;
  n.overflow += std::isfinite(exact) && std::isinf(result);
  n.nan_created += created;
  count_update(n, c, product, result);
}

}  // namespace mpverify::emu::detail
