// Internal: the AVX-512 accumulation kernels behind gemm_emu (gemm_emu_x86.cpp).
#pragma once

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
// The same with acc <- fl32(a*b + acc) (an fp32 FMA per step).
TileCover fp32_accumulate_tiles_avx512(const float* A, const float* B, float* acc, int m, int n, int k);

}  // namespace mpverify::emu::detail
