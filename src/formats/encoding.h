// Reading a format's bit patterns: classification and exact decoding.
// Bit patterns are held in the low width() bits of a uint32_t.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "formats/format.h"

namespace mpverify::formats {

namespace detail {
inline std::uint32_t exponent_field(const Format& f, std::uint32_t bits) {
  return (bits >> f.mantissa_bits) & f.exponent_field_max();
}
inline std::uint32_t fraction_field(const Format& f, std::uint32_t bits) { return bits & f.mantissa_mask(); }
}  // namespace detail

// is_nan, is_infinity, is_zero, is_subnormal, sign_bit and to_double are
// defined at the end of this header: every emulated operation and every
// rounding's counters call them, and out of line the calls cost more than the
// decoding (an fp16 add spent ~45% of its time there).
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

inline bool is_nan(const Format& f, std::uint32_t bits) {
  switch (f.encoding) {
    case Encoding::ieee:
      return detail::exponent_field(f, bits) == f.exponent_field_max() && detail::fraction_field(f, bits) != 0;
    case Encoding::fn: return (bits & ~f.sign_mask()) == (f.all_bits_mask() & ~f.sign_mask());
    case Encoding::fnuz: return bits == f.sign_mask();
    case Encoding::finite: return false;  // every pattern is a number
  }
  return false;
}

inline bool is_infinity(const Format& f, std::uint32_t bits) {
  return f.has_infinity() && (bits & ~f.sign_mask()) == f.positive_infinity_bits();
}

inline bool is_zero(const Format& f, std::uint32_t bits) {
  if (!f.has_zero) return false;  // e8m0: field 0 is 2^-127
  if (f.encoding == Encoding::fnuz) return bits == 0;
  const std::uint32_t magnitude = bits & ~f.sign_mask();
  return magnitude == 0 || (!f.subnormals && detail::exponent_field(f, bits) == 0);
}

inline bool is_subnormal(const Format& f, std::uint32_t bits) {
  return f.subnormals && detail::exponent_field(f, bits) == 0 && detail::fraction_field(f, bits) != 0;
}

inline bool sign_bit(const Format& f, std::uint32_t bits) { return (bits & f.sign_mask()) != 0; }

inline double to_double(const Format& f, std::uint32_t bits) {
  const bool negative = sign_bit(f, bits);
  if (is_nan(f, bits)) return negative ? -std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::quiet_NaN();
  if (is_infinity(f, bits)) return negative ? -HUGE_VAL : HUGE_VAL;
  const std::uint32_t e = detail::exponent_field(f, bits);
  const std::uint32_t m = detail::fraction_field(f, bits);
  if (e == 0 && f.has_zero) {
    if (m == 0 || !f.subnormals) return negative ? -0.0 : 0.0;
    // Subnormal: m * 2^(emin - mantissa_bits); exact, the product is a normal double.
    const double v = static_cast<double>(m) * std::ldexp(1.0, f.emin() - f.mantissa_bits);
    return negative ? -v : v;
  }
  // Normal: build the double's fields directly (exponent range is tiny).
  const std::uint64_t double_exponent = static_cast<std::uint64_t>(static_cast<int>(e) - f.bias + 1023);
  const std::uint64_t magnitude_bits =
      (double_exponent << 52) | (static_cast<std::uint64_t>(m) << (52 - f.mantissa_bits));
  const double v = std::bit_cast<double>(magnitude_bits);
  return negative ? -v : v;
}

}  // namespace mpverify::formats
