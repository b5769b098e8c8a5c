#include <cmath>

#include "formats/arithmetic.h"
#include "formats/round_pack.h"
#include "formats/specialize.h"

namespace mpverify::formats {

std::uint32_t sqrt(const Format& f, std::uint32_t a, const RoundingContext& rc, Flags& flags) {
  if (is_nan(f, a)) return detail::propagate_nan(f, a, a, flags);
  const double x = to_double(f, a);
  if (x == 0) return zero_bits(f, std::signbit(x));  // sqrt(-0) = -0
  if (x < 0) {
    flags.raise(Flags::invalid);
    return f.default_nan_bits();
  }
  if (std::isinf(x)) return a;
  // s = RN(sqrt(x)); x - s*s is exact through fma and tells the side.
  const double s = std::sqrt(x);
  const double remainder = std::fma(-s, s, x);
  return round_pack(f, false, s, detail::residual_sign(s, remainder), rc, flags);
}

}  // namespace mpverify::formats
