// Internal: the x86 SIMD kernels behind quantize()/encode() (quantize_x86.cpp).
// Each handles fp16 round-to-nearest-even, after-rounding tininess, processes
// a prefix of whole vectors and returns its length; the caller finishes the
// tail with the portable path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "emu/counters.h"

namespace mpverify::emu::detail {

bool cpu_has_avx2_f16c();
bool cpu_has_avx512();

// out_float or out_bits may be null (not both).
std::size_t fp16_rne_avx2(const float* in, std::size_t n, float* out_float, std::uint16_t* out_bits,
                          Counters* counters);
std::size_t fp16_rne_avx512(const float* in, std::size_t n, float* out_float, std::uint16_t* out_bits,
                            Counters* counters);

}  // namespace mpverify::emu::detail
