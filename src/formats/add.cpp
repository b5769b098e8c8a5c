#include <cmath>

#include "formats/arithmetic.h"
#include "formats/round_pack.h"
#include "formats/specialize.h"
#include "formats/two_sum.h"

namespace mpverify::formats {

std::uint32_t add(const Format& f, std::uint32_t a, std::uint32_t b, const RoundingContext& rc, Flags& flags) {
  if (is_nan(f, a) || is_nan(f, b)) return detail::propagate_nan(f, a, b, flags);
  return sum_to_format(f, to_double(f, a), to_double(f, b), rc, flags);
}

std::uint32_t sum_to_format(const Format& f, double x, double y, const RoundingContext& rc, Flags& flags) {
  if (std::isnan(x) || std::isnan(y)) return from_double(f, std::isnan(x) ? x : y, rc, flags);  // first NaN, quieted
  if (std::isinf(x) || std::isinf(y)) {
    if (std::isinf(x) && std::isinf(y) && std::signbit(x) != std::signbit(y)) {
      flags.raise(Flags::invalid);  // inf - inf
      return f.default_nan_bits();
    }
    return from_double(f, std::isinf(x) ? x : y, rc, flags);  // inf + finite is that infinity, exactly
  }
  // x + y needs up to ~280 bits; the double sum plus its exact TwoSum error
  // carries all that rounding to <= 24 bits needs (round_pack.h).
  const double sum = x + y;
  if (sum == 0) {
    // Exact zero: a sum of like-signed zeros keeps the sign; otherwise +0,
    // or -0 when rounding down (IEEE 754 6.3).
    const bool negative = (x == 0 && y == 0 && std::signbit(x) == std::signbit(y)) ? std::signbit(x)
                                                                                      : rc.mode == Rounding::down;
    return zero_result(f, negative, flags);
  }
  const double error = two_sum_error(x, y, sum);
  return round_pack(f, std::signbit(sum), std::fabs(sum), detail::residual_sign(sum, error), rc, flags);
}

std::uint32_t sub(const Format& f, std::uint32_t a, std::uint32_t b, const RoundingContext& rc, Flags& flags) {
  // NaNs propagate unchanged (not negated), as SoftFloat's f16_sub does.
  if (is_nan(f, a) || is_nan(f, b)) return detail::propagate_nan(f, a, b, flags);
  // -b as a double, not as bits: an unsigned format has no encoding for it.
  return sum_to_format(f, to_double(f, a), -to_double(f, b), rc, flags);
}

}  // namespace mpverify::formats
