// Reading a format's bit patterns: classification and exact decoding.
// Bit patterns are held in the low width() bits of a uint32_t.
#pragma once

#include <cstdint>

#include "formats/format.h"

namespace mpverify::formats {

bool is_nan(const Format& f, std::uint32_t bits);
// Only IEEE-encoded formats have signalling NaNs: fraction MSB clear.
bool is_signaling_nan(const Format& f, std::uint32_t bits);
bool is_infinity(const Format& f, std::uint32_t bits);
bool is_zero(const Format& f, std::uint32_t bits);
// A non-zero value with the smallest exponent field (never true without subnormals).
bool is_subnormal(const Format& f, std::uint32_t bits);
bool sign_bit(const Format& f, std::uint32_t bits);

// The exact value (NaN and infinities included) as a double. With subnormals
// off, subnormal encodings read as signed zero.
double to_double(const Format& f, std::uint32_t bits);
// Like to_double, but NaNs keep their payload the way x86 converts them
// (F16C's vcvtph2ps): sign kept, quiet bit set, fraction shifted to the top.
// `flags` gets `invalid` for a signalling NaN.
struct Flags;
float to_float(const Format& f, std::uint32_t bits, Flags& flags);
double to_double(const Format& f, std::uint32_t bits, Flags& flags);

// The quiet NaN that propagating `bits` (a NaN of `f`) produces: x86 rules,
// sign and payload kept, quiet bit set.
std::uint32_t quiet_nan(const Format& f, std::uint32_t bits);

}  // namespace mpverify::formats
