// Internal: the SIMD kernels behind gemm_emu (gemm_emu_x86.cpp).
#pragma once

#include "emu/counters.h"

namespace mpverify::emu::detail {

bool cpu_has_avx512_fp16_accumulate();
// acc[j] = fl16(a * b[j] + acc[j]) for a prefix of whole vectors of the row
// (a, b[j], acc[j] must be fp16 values); returns how many it did.
int fp16_accumulate_row_avx512(float a, const float* b, float* acc, int n, Counters* counters);

}  // namespace mpverify::emu::detail
