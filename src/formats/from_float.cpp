#include <bit>
#include <cmath>

#include "formats/arithmetic.h"
#include "formats/specialize.h"

namespace mpverify::formats {

std::uint32_t from_float(const Format& f, float x, const RoundingContext& rc, Flags& flags) {
  if (std::isnan(x)) {
    // Handled here, not via double: widening would quiet a signalling NaN.
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
    const bool negative = (bits >> 31) != 0;
    if ((bits & (1u << 22)) == 0) flags.raise(Flags::invalid);
    if (!f.has_nan()) flags.raise(Flags::invalid);  // nowhere to put it: the stand-in is a number
    if (f.encoding != Encoding::ieee) return detail::nan_bits(f, negative);
    const std::uint32_t payload = (bits >> (23 - f.mantissa_bits)) & f.mantissa_mask();
    return detail::nan_bits(f, negative) | payload;
  }
  return from_double(f, static_cast<double>(x), rc, flags);  // widening is exact
}

}  // namespace mpverify::formats
