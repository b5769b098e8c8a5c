#include <cmath>

#include "formats/arithmetic.h"
#include "formats/round_pack.h"
#include "formats/specialize.h"

namespace mpverify::formats {

std::uint32_t div(const Format& f, std::uint32_t a, std::uint32_t b, const RoundingContext& rc, Flags& flags) {
  if (is_nan(f, a) || is_nan(f, b)) return detail::propagate_nan(f, a, b, flags);
  const double x = to_double(f, a);
  const double y = to_double(f, b);
  const bool negative = std::signbit(x) != std::signbit(y);
  if (std::isinf(x)) {
    if (std::isinf(y)) {
      flags.raise(Flags::invalid);
      return f.default_nan_bits();
    }
    return detail::infinity_or_substitute(f, negative);
  }
  if (std::isinf(y)) return zero_bits(f, negative);
  if (y == 0) {
    if (x == 0) {
      flags.raise(Flags::invalid);
      return f.default_nan_bits();
    }
    flags.raise(Flags::infinite);
    return detail::infinity_or_substitute(f, negative);
  }
  if (x == 0) return zero_bits(f, negative);
  // q = RN(x / y); the remainder x - q*y is exactly representable and fma
  // computes it exactly, and its sign says on which side of q the quotient is.
  const double q = x / y;
  const double remainder = std::fma(-q, y, x);
  const double quotient_error = (remainder == 0) ? 0.0 : ((remainder > 0) == (y > 0) ? 1.0 : -1.0);
  return round_pack(f, negative, std::fabs(q), detail::residual_sign(q, quotient_error), rc, flags);
}

}  // namespace mpverify::formats
