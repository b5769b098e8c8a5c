#include <cmath>

#include "formats/arithmetic.h"
#include "formats/round_pack.h"
#include "formats/specialize.h"

namespace mpverify::formats {

std::uint32_t mul(const Format& f, std::uint32_t a, std::uint32_t b, const RoundingContext& rc, Flags& flags) {
  if (is_nan(f, a) || is_nan(f, b)) return detail::propagate_nan(f, a, b, flags);
  const double x = to_double(f, a);
  const double y = to_double(f, b);
  const bool negative = std::signbit(x) != std::signbit(y);
  if (std::isinf(x) || std::isinf(y)) {
    if (x == 0 || y == 0) {
      flags.raise(Flags::invalid);
      return f.default_nan_bits();
    }
    return detail::infinity_or_substitute(f, negative);
  }
  // Exact: two significands of <= 24 bits make <= 48 bits, and the exponent
  // range of every Format is far inside double's.
  const double product = x * y;
  return round_pack(f, negative, std::fabs(product), 0, rc, flags);
}

}  // namespace mpverify::formats
