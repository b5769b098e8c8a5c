#include <cmath>

#include "formats/arithmetic.h"
#include "formats/round_pack.h"
#include "formats/specialize.h"
#include "formats/two_sum.h"

namespace mpverify::formats {

std::uint32_t fma(const Format& f, std::uint32_t a, std::uint32_t b, std::uint32_t c, const RoundingContext& rc,
                  Flags& flags) {
  // Special cases in SoftFloat's order (s_mulAddF16.c): a NaN among a, b
  // wins over c; 0 * inf is invalid even when c is a quiet NaN.
  if (is_nan(f, a) || is_nan(f, b)) {
    const std::uint32_t z = detail::propagate_nan(f, a, b, flags);
    if (is_signaling_nan(f, c)) flags.raise(Flags::invalid);
    return z;
  }
  const double x = to_double(f, a);
  const double y = to_double(f, b);
  const bool product_negative = std::signbit(x) != std::signbit(y);
  if (std::isinf(x) || std::isinf(y)) {
    if (x == 0 || y == 0) {
      flags.raise(Flags::invalid);
      if (is_signaling_nan(f, c)) flags.raise(Flags::invalid);
      return f.default_nan_bits();
    }
    if (is_nan(f, c)) return detail::propagate_nan(f, c, c, flags);
    const double z = to_double(f, c);
    if (std::isinf(z) && std::signbit(z) != product_negative) {
      flags.raise(Flags::invalid);
      return f.default_nan_bits();
    }
    return detail::infinity_or_substitute(f, product_negative);
  }
  if (is_nan(f, c)) return detail::propagate_nan(f, c, c, flags);
  const double z = to_double(f, c);
  if (std::isinf(z)) return c;
  const double product = x * y;  // exact, see mul.cpp
  const double sum = product + z;
  if (sum == 0) {
    const bool negative = (product == 0 && z == 0 && std::signbit(product) == std::signbit(z))
                              ? std::signbit(z)
                              : rc.mode == Rounding::down;
    return zero_result(f, negative, flags);
  }
  const double error = two_sum_error(product, z, sum);
  return round_pack(f, std::signbit(sum), std::fabs(sum), detail::residual_sign(sum, error), rc, flags);
}

}  // namespace mpverify::formats
