#include <bit>
#include <cmath>

#include "formats/arithmetic.h"
#include "formats/round_pack.h"
#include "formats/specialize.h"

namespace mpverify::formats {

std::uint32_t from_double(const Format& f, double x, const RoundingContext& rc, Flags& flags) {
  const bool negative = std::signbit(x);
  if (std::isnan(x)) {
    const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
    if ((bits & (std::uint64_t{1} << 51)) == 0) flags.raise(Flags::invalid);  // signalling
    if (!f.has_nan()) flags.raise(Flags::invalid);  // nowhere to put it: the stand-in is a number
    if (f.encoding != Encoding::ieee) return detail::nan_bits(f, negative);
    // As x86 converts NaNs: keep the top fraction bits, set the quiet bit.
    const auto payload = static_cast<std::uint32_t>((bits >> (52 - f.mantissa_bits)) & f.mantissa_mask());
    return detail::nan_bits(f, negative) | payload;
  }
  if (negative && !f.is_signed && x != 0) {  // -0 goes on to round_pack and becomes +0
    flags.raise(Flags::invalid);
    return f.default_nan_bits();
  }
  if (std::isinf(x)) {
    if (f.has_infinity()) return (negative ? f.sign_mask() : 0) | f.positive_infinity_bits();
    if (f.overflow == Overflow::saturate) {
      flags.raise(Flags::overflow | Flags::inexact);
      return (negative ? f.sign_mask() : 0) | f.max_finite_bits();
    }
    flags.raise(Flags::invalid);
    return detail::nan_bits(f, negative);
  }
  return round_pack(f, negative, std::fabs(x), 0, rc, flags);
}

}  // namespace mpverify::formats
