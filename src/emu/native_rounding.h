// Rounding to IEEE binary32 and binary16 with the hardware's own double and
// float arithmetic, for the common case only: a finite exact value whose
// result is an exact zero or a normal number of the format. The generic
// emulator (formats/arithmetic.h) rounds any format in software, one field
// at a time; the reductions and output roundings of every training step go
// through binary32 and binary16 millions of times, and this is where the
// emulated step spends its time. Outside the common case the functions
// return false and the caller takes the generic path, so results and counts
// never depend on which path ran (native_rounding_test holds the two paths
// together on crafted boundaries and random values).
//
// Why the hardware is exact here: round-to-odd to q bits followed by
// round-to-nearest-even to p bits equals one RNE rounding to p bits when
// q >= p + 2 (Boldo and Melquiond, "Emulation of FMA and correctly rounded
// sums: proved algorithms using rounding to odd", IEEE TC 2008), and RO
// composes (RO_p(RO_q(x)) = RO_p(x) for q > p). So the exact a + b is
// rounded to odd in double (53 bits) from its RNE sum and TwoSum's error
// term; the double -> float conversion then rounds it once to binary32
// (53 >= 24 + 2); for binary16 the value is first rounded to odd in float
// (24 >= 11 + 2) and then to nearest-even at bit 13 on the bits.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "emu/counters.h"
#include "formats/format.h"
#include "formats/two_sum.h"

namespace mpverify::emu {

// Which native path a format can take: IEEE binary32 or binary16 exactly
// (exponent and fraction widths, bias, subnormals, IEEE encoding and
// overflow; the name is not looked at), or none.
enum class NativeFormat : std::uint8_t { none, binary32, binary16 };
inline NativeFormat native_format(const formats::Format& f) {
  if (!f.subnormals || f.encoding != formats::Encoding::ieee || f.overflow != formats::Overflow::ieee)
    return NativeFormat::none;
  if (f.exponent_bits == 8 && f.mantissa_bits == 23 && f.bias == 127) return NativeFormat::binary32;
  if (f.exponent_bits == 5 && f.mantissa_bits == 10 && f.bias == 15) return NativeFormat::binary16;
  return NativeFormat::none;
}

struct NativeResult {
  double value = 0;      // the rounded value (a float of the format)
  bool inexact = false;  // value != the exact value
};

namespace detail {

// x with its magnitude one unit in the last place nearer zero and its last
// bit set: the round-to-odd value when x is the RNE rounding of a value of
// smaller magnitude; with only the last bit set when x was rounded toward
// zero. (Bit patterns order as magnitudes within a sign.)
inline double odd_below(double x, bool rounded_away_from_zero) {
  auto bits = std::bit_cast<std::uint64_t>(x);
  if (rounded_away_from_zero) bits -= 1;
  return std::bit_cast<double>(bits | 1);
}

inline float odd_below(float x, bool rounded_away_from_zero) {
  auto bits = std::bit_cast<std::uint32_t>(x);
  if (rounded_away_from_zero) bits -= 1;
  return std::bit_cast<float>(bits | 1u);
}

// RNE of x (given rounded to odd in double: ro, inexact when ro != x) to the format.
inline bool round_odd_double(NativeFormat format, double ro, bool inexact, NativeResult& out) {
  if (ro == 0) {  // only an exact zero reaches here as zero
    out = {ro, inexact};
    return true;
  }
  const float f = static_cast<float>(ro);  // binary32: one correct rounding of x
  const double fd = static_cast<double>(f);
  const auto magnitude = std::bit_cast<std::uint32_t>(f) & 0x7fffffffu;
  // strictly above the smallest normal and finite (rules out tininess and overflow)
  if (magnitude <= 0x00800000u || magnitude >= 0x7f800000u) return false;
  if (format == NativeFormat::binary32) {
    out = {fd, inexact || fd != ro};
    return true;
  }
  // binary16: x rounded to odd in float first, then RNE at bit 13.
  const bool float_inexact = inexact || fd != ro;
  const float odd = fd != ro ? odd_below(f, std::fabs(fd) > std::fabs(ro)) : f;
  const std::uint32_t u = std::bit_cast<std::uint32_t>(odd) & 0x7fffffffu;
  if (u <= 0x38800000u) return false;  // |x| <= 2^-14: subnormal or tininess territory
  const std::uint32_t rounded = (u + 0x0fffu + ((u >> 13) & 1u)) & ~0x1fffu;
  if (rounded > 0x477fe000u) return false;  // above 65504: overflow
  const float h = std::bit_cast<float>(rounded | (std::bit_cast<std::uint32_t>(odd) & 0x80000000u));
  out = {static_cast<double>(h), float_inexact || rounded != u};
  return true;
}

}  // namespace detail

// RNE of `exact` to the format. False (out untouched) unless the format is
// native, `exact` is finite, and the result is an exact zero or a normal
// number strictly above the smallest normal (so no tininess question, no
// overflow, no subnormal).
inline bool round_natively(NativeFormat format, double exact, NativeResult& out) {
  if (format == NativeFormat::none || !std::isfinite(exact)) return false;
  return detail::round_odd_double(format, exact, false, out);
}

// RNE of the exact a + b (as formats::sum_to_format), with the same domain.
inline bool sum_natively(NativeFormat format, double a, double b, NativeResult& out) {
  if (format == NativeFormat::none) return false;
  const double r = a + b;
  if (!std::isfinite(r) || !std::isfinite(a) || !std::isfinite(b)) return false;
  const double e = formats::two_sum_error(a, b, r);  // r + e == a + b exactly (finite a, b, r)
  // Inexact: r != 0, since a non-zero exact sum of doubles is at least the
  // smallest subnormal. (A select rather than a branch: exact and inexact
  // sums alternate unpredictably.)
  const bool inexact = e != 0;
  const double ro = inexact ? detail::odd_below(r, (r > 0) != (e > 0)) : r;
  return detail::round_odd_double(format, ro, inexact, out);
}

// count_rounding() for a rounding in that domain: no flag but inexact, no
// zero made from a non-zero, no subnormal, no NaN.
inline void count_native_rounding(Counters& c, double exact, bool inexact) {
  c.elements += 1;
  c.zeros_in += exact == 0;
  c.inexact += inexact;
}

}  // namespace mpverify::emu
