// Internal: the x86 SIMD kernels behind quantize()/encode() (quantize_x86.cpp).
// Each handles fp16 round-to-nearest-even, after-rounding tininess, processes
// a prefix of whole vectors and returns its length; the caller finishes the
// tail with the portable path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "emu/counters.h"

namespace mpverify::emu::detail {

// fp16 thresholds as floats, for the kernels that count from masks.
inline constexpr float kFp16MinNormal = 0x1p-14f;
inline constexpr float kFp16MaxFinite = 65504.0f;
// Tininess after rounding: |x| rounded to 11 bits with an unbounded exponent
// stays below 2^-14 exactly when |x| < 2^-14 - 2^-26 (the midpoint between
// 2^-14 and its 11-bit predecessor 2^-14 - 2^-25; the tie goes to 2^-14, whose
// last bit is even).
inline constexpr float kFp16TinyAfterRounding = 0x1p-14f - 0x1p-26f;

bool cpu_has_avx2_f16c();
bool cpu_has_avx512();

// out_float or out_bits may be null (not both).
std::size_t fp16_rne_avx2(const float* in, std::size_t n, float* out_float, std::uint16_t* out_bits,
                          Counters* counters);
std::size_t fp16_rne_avx512(const float* in, std::size_t n, float* out_float, std::uint16_t* out_bits,
                            Counters* counters);

}  // namespace mpverify::emu::detail
