// Implementation-defined choices, kept in one place as SoftFloat keeps them
// in its specialize.h. These follow x86 (SoftFloat's 8086-SSE variant).
#pragma once

#include <cstdint>

#include "formats/encoding.h"
#include "formats/flags.h"
#include "formats/format.h"

namespace mpverify::formats::detail {

// The NaN of format f with the given sign (quiet, empty payload; fnuz has one
// NaN, an unsigned format's has no sign, and a `finite` format has none: its
// default_nan_bits() stands in, and whoever produced the NaN raises invalid).
inline std::uint32_t nan_bits(const Format& f, bool negative) {
  switch (f.encoding) {
    case Encoding::ieee:
      return (negative ? f.sign_mask() : 0) | f.positive_infinity_bits() | (1u << (f.mantissa_bits - 1));
    case Encoding::fn: return (negative ? f.sign_mask() : 0) | (f.all_bits_mask() & ~f.sign_mask());
    case Encoding::fnuz: return f.sign_mask();
    case Encoding::finite: return f.default_nan_bits();
  }
  return 0;
}

// x86: the first NaN operand wins, quieted; any signalling NaN raises invalid.
inline std::uint32_t propagate_nan(const Format& f, std::uint32_t a, std::uint32_t b, Flags& flags) {
  if (is_signaling_nan(f, a) || is_signaling_nan(f, b)) flags.raise(Flags::invalid);
  return is_nan(f, a) ? quiet_nan(f, a) : quiet_nan(f, b);
}

// What an operation that must produce +-infinity returns in f (x/0, inf
// operands): infinity where the format has one, else the overflow policy.
inline std::uint32_t infinity_or_substitute(const Format& f, bool negative) {
  const std::uint32_t sign = negative ? f.sign_mask() : 0;
  if (f.has_infinity()) return sign | f.positive_infinity_bits();
  return f.overflow == Overflow::saturate ? sign | f.max_finite_bits() : f.default_nan_bits();
}

// +1 if the exact value (approx + error) has a larger magnitude than approx,
// -1 if smaller, 0 if approx is exact.
inline int residual_sign(double approx, double error) {
  if (error == 0) return 0;
  return (error > 0) == (approx > 0) ? 1 : -1;
}

}  // namespace mpverify::formats::detail
