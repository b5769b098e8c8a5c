// The element types a tensor file may hold, and their exact decoding.
//
// Every type here is a binary floating-point type whose values are all
// exactly floats (f64 excepted: exactly doubles), so decoding never rounds.
// fp8: e4m3 is OCP's E4M3FN (no infinities, S.1111.111 is NaN), e5m2 is
// IEEE-like, as PyTorch's float8_e4m3fn / float8_e5m2 and safetensors'
// F8_E4M3 / F8_E5M2 are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace mpverify::io {

enum class Dtype : std::uint8_t { f16, bf16, f32, f64, f8_e4m3, f8_e5m2 };

std::size_t element_size(Dtype t);
std::string_view to_string(Dtype t);  // "f16", "bf16", "f32", "f64", "f8_e4m3", "f8_e5m2"

// Decodes `out.size()` elements stored little-endian (or big-endian when
// `big_endian`) at `bytes`, which may be unaligned and must hold
// out.size() * element_size(t) bytes. decode_floats rejects f64 (not every
// double is a float; std::invalid_argument); decode_doubles takes every type.
void decode_floats(Dtype t, bool big_endian, const std::byte* bytes, std::span<float> out);
void decode_doubles(Dtype t, bool big_endian, const std::byte* bytes, std::span<double> out);

}  // namespace mpverify::io
