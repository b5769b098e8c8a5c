#include "formats/encoding.h"

#include <bit>
#include <cmath>
#include <limits>

#include "formats/flags.h"

namespace mpverify::formats {

namespace {
std::uint32_t exponent_field(const Format& f, std::uint32_t bits) {
  return (bits >> f.mantissa_bits) & f.exponent_field_max();
}
std::uint32_t fraction(const Format& f, std::uint32_t bits) { return bits & f.mantissa_mask(); }
}  // namespace

bool is_nan(const Format& f, std::uint32_t bits) {
  switch (f.encoding) {
    case Encoding::ieee: return exponent_field(f, bits) == f.exponent_field_max() && fraction(f, bits) != 0;
    case Encoding::fn: return (bits & ~f.sign_mask()) == (f.all_bits_mask() & ~f.sign_mask());
    case Encoding::fnuz: return bits == f.sign_mask();
    case Encoding::finite: return false;  // every pattern is a number
  }
  return false;
}

bool is_signaling_nan(const Format& f, std::uint32_t bits) {
  return f.encoding == Encoding::ieee && is_nan(f, bits) && (bits & (1u << (f.mantissa_bits - 1))) == 0;
}

bool is_infinity(const Format& f, std::uint32_t bits) {
  return f.has_infinity() && (bits & ~f.sign_mask()) == f.positive_infinity_bits();
}

bool is_zero(const Format& f, std::uint32_t bits) {
  if (!f.has_zero) return false;  // e8m0: field 0 is 2^-127
  if (f.encoding == Encoding::fnuz) return bits == 0;
  const std::uint32_t magnitude = bits & ~f.sign_mask();
  return magnitude == 0 || (!f.subnormals && exponent_field(f, bits) == 0);
}

bool is_subnormal(const Format& f, std::uint32_t bits) {
  return f.subnormals && exponent_field(f, bits) == 0 && fraction(f, bits) != 0;
}

bool sign_bit(const Format& f, std::uint32_t bits) { return (bits & f.sign_mask()) != 0; }

double to_double(const Format& f, std::uint32_t bits) {
  const bool negative = sign_bit(f, bits);
  if (is_nan(f, bits)) return negative ? -std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::quiet_NaN();
  if (is_infinity(f, bits)) return negative ? -HUGE_VAL : HUGE_VAL;
  const std::uint32_t e = exponent_field(f, bits);
  const std::uint32_t m = fraction(f, bits);
  std::uint64_t magnitude_bits;
  if (e == 0 && f.has_zero) {
    if (m == 0 || !f.subnormals) return negative ? -0.0 : 0.0;
    // Subnormal: m * 2^(emin - mantissa_bits); exact, the product is a normal double.
    const double v = static_cast<double>(m) * std::ldexp(1.0, f.emin() - f.mantissa_bits);
    return negative ? -v : v;
  }
  // Normal: build the double's fields directly (exponent range is tiny).
  const std::uint64_t double_exponent = static_cast<std::uint64_t>(static_cast<int>(e) - f.bias + 1023);
  magnitude_bits = (double_exponent << 52) | (static_cast<std::uint64_t>(m) << (52 - f.mantissa_bits));
  const double v = std::bit_cast<double>(magnitude_bits);
  return negative ? -v : v;
}

std::uint32_t quiet_nan(const Format& f, std::uint32_t bits) {
  switch (f.encoding) {
    case Encoding::ieee: return bits | (1u << (f.mantissa_bits - 1));
    case Encoding::fn: return bits;  // the only NaN of its sign
    case Encoding::fnuz: return f.sign_mask();
    case Encoding::finite: return bits;  // never a NaN
  }
  return bits;
}

double to_double(const Format& f, std::uint32_t bits, Flags& flags) {
  if (!is_nan(f, bits)) return to_double(f, bits);
  if (is_signaling_nan(f, bits)) flags.raise(Flags::invalid);
  std::uint64_t out = (std::uint64_t{sign_bit(f, bits)} << 63) | (0x7ffull << 52) | (1ull << 51);
  if (f.encoding == Encoding::ieee) out |= static_cast<std::uint64_t>(fraction(f, bits)) << (52 - f.mantissa_bits);
  return std::bit_cast<double>(out);
}

float to_float(const Format& f, std::uint32_t bits, Flags& flags) {
  if (!is_nan(f, bits)) return static_cast<float>(to_double(f, bits));  // exact: every value is a float
  if (is_signaling_nan(f, bits)) flags.raise(Flags::invalid);
  std::uint32_t out = (std::uint32_t{sign_bit(f, bits)} << 31) | (0xffu << 23) | (1u << 22);
  if (f.encoding == Encoding::ieee) out |= fraction(f, bits) << (23 - f.mantissa_bits);
  return std::bit_cast<float>(out);
}

}  // namespace mpverify::formats
