#include "formats/round_pack.h"

#include <algorithm>
#include <bit>

#include "formats/specialize.h"

namespace mpverify::formats {

namespace {

// 2^k as a double, k in [-1022, 1023].
double pow2(int k) { return std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52); }

// The exact magnitude lies at `integer + fraction` units of the result's last
// place, nudged by `residual` (see round_pack.h); fraction is in [0, 1], and is
// 1 only for "just below integer + 1". Decides whether to round up by one unit.
bool rounds_up(const RoundingContext& rc, bool negative, std::uint64_t integer, double fraction, int residual) {
  if (fraction == 0 && residual == 0) return false;  // exact
  switch (rc.mode) {
    case Rounding::nearest_even:
      if (fraction != 0.5) return fraction > 0.5;
      return residual != 0 ? residual > 0 : (integer & 1) != 0;
    case Rounding::nearest_away:
      if (fraction != 0.5) return fraction > 0.5;
      return residual >= 0;
    case Rounding::toward_zero: return false;
    case Rounding::up: return !negative;
    case Rounding::down: return negative;
    case Rounding::odd: return (integer & 1) == 0;
    case Rounding::stochastic: {
      const int bits = std::clamp(rc.random_bits, 1, 32);
      const double scaled = fraction * static_cast<double>(std::uint64_t{1} << bits);  // exact
      std::uint64_t truncated = static_cast<std::uint64_t>(scaled);
      if (residual < 0 && static_cast<double>(truncated) == scaled) truncated -= 1;  // just below
      const std::uint64_t draw = rc.random & ((std::uint64_t{1} << bits) - 1);
      return truncated + draw >= (std::uint64_t{1} << bits);
    }
  }
  return false;
}

struct Units {
  std::uint64_t integer;
  double fraction;
};

// magnitude / 2^quantum split into integer and fraction, with an exact
// value just below an integer expressed as (integer - 1, fraction 1).
Units split(double magnitude, int quantum, int residual) {
  const double scaled = magnitude * pow2(-quantum);  // exact: a power-of-two scaling of a normal double
  Units u{static_cast<std::uint64_t>(scaled), 0.0};
  u.fraction = scaled - static_cast<double>(u.integer);  // exact: scaled < 2^25
  if (u.fraction == 0 && residual < 0) {
    u.integer -= 1;
    u.fraction = 1.0;
  }
  return u;
}

bool rounds_to_infinity(Rounding mode, bool negative) {
  switch (mode) {
    case Rounding::nearest_even:
    case Rounding::nearest_away:
    case Rounding::stochastic: return true;
    case Rounding::up: return !negative;
    case Rounding::down: return negative;
    case Rounding::toward_zero:
    case Rounding::odd: return false;
  }
  return true;
}

}  // namespace

std::uint32_t zero_bits(const Format& f, bool negative) {
  return negative && f.has_negative_zero() ? f.sign_mask() : 0;
}

std::uint32_t zero_result(const Format& f, bool negative, Flags& flags) {
  if (f.has_zero) return zero_bits(f, negative);
  flags.raise(Flags::underflow | Flags::inexact);
  return 0;  // exponent field 0: 2^-bias
}

std::uint32_t round_pack(const Format& f, bool negative, double magnitude, int residual, const RoundingContext& rc,
                         Flags& flags) {
  if (magnitude == 0 && residual == 0) return zero_result(f, negative, flags);
  if (negative && !f.is_signed) {  // no encoding for it: invalid, like sqrt(-1)
    flags.raise(Flags::invalid);
    return f.default_nan_bits();
  }
  if (magnitude < 0x1p-300) {
    // Far below every format's smallest subnormal: all that matters is that
    // it is positive and below every rounding boundary.
    magnitude = 0x1p-300;
    residual = -1;
  } else if (magnitude > 0x1p300) {
    // Far above every format's largest value (and clear of pow2's range when
    // a format has no fraction bits): it overflows in every mode.
    magnitude = 0x1p300;
    residual = 1;
  }
  const int m = f.mantissa_bits;
  const std::uint64_t magnitude_bits = std::bit_cast<std::uint64_t>(magnitude);
  int exponent = static_cast<int>(magnitude_bits >> 52) - 1023;
  const bool power_of_two = (magnitude_bits & ((std::uint64_t{1} << 52) - 1)) == 0;
  if (power_of_two && residual < 0) exponent -= 1;  // the exact value lies in the binade below

  int quantum = std::max(exponent, f.emin()) - m;  // exponent of the result's last place
  const Units units = split(magnitude, quantum, residual);
  std::uint64_t rounded = units.integer + (rounds_up(rc, negative, units.integer, units.fraction, residual) ? 1 : 0);
  const bool inexact = units.fraction != 0 || residual != 0;
  if (rounded >> (m + 1)) {  // carried into the next binade
    rounded >>= 1;
    quantum += 1;
  }

  // Tininess: before rounding, |exact| < 2^emin; after rounding, the value
  // rounded to p bits with an unbounded exponent is < 2^emin, which differs
  // only in the binade just below 2^emin.
  bool tiny = exponent < f.emin();
  if (tiny && rc.tininess == Tininess::after_rounding && exponent == f.emin() - 1) {
    const Units unbounded = split(magnitude, exponent - m, residual);
    const std::uint64_t r = unbounded.integer + (rounds_up(rc, negative, unbounded.integer, unbounded.fraction, residual) ? 1 : 0);
    tiny = r < (std::uint64_t{1} << (m + 1));
  }
  if (inexact) flags.raise(Flags::inexact);
  if (tiny && inexact) flags.raise(Flags::underflow);

  const std::uint32_t sign = negative ? f.sign_mask() : 0;
  if (rounded == 0) return f.has_zero ? zero_bits(f, negative) : 0;  // no zero: 2^emin (flags raised above)
  const std::uint64_t hidden = std::uint64_t{1} << m;
  if (rounded < hidden) {  // subnormal
    if (!f.subnormals) {
      flags.raise(Flags::underflow | Flags::inexact);
      return zero_bits(f, negative);
    }
    return sign | static_cast<std::uint32_t>(rounded);
  }
  const int result_exponent = quantum + m;
  const std::uint32_t fraction = static_cast<std::uint32_t>(rounded - hidden);
  if (result_exponent > f.emax() || (result_exponent == f.emax() && fraction > f.max_fraction_in_top_binade())) {
    flags.raise(Flags::overflow | Flags::inexact);
    const bool to_infinity = rounds_to_infinity(rc.mode, negative);
    switch (f.overflow) {
      case Overflow::ieee: return sign | (to_infinity ? f.positive_infinity_bits() : f.max_finite_bits());
      case Overflow::nan: return to_infinity ? detail::nan_bits(f, negative) : sign | f.max_finite_bits();
      case Overflow::saturate: return sign | f.max_finite_bits();
    }
  }
  const std::uint32_t exponent_field = static_cast<std::uint32_t>(result_exponent + f.bias);
  return sign | (exponent_field << m) | fraction;
}

}  // namespace mpverify::formats
