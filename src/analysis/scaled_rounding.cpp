#include "analysis/scaled_rounding.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "emu/counters.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"

namespace mpverify::analysis {

namespace {

template <class T>
ScaledOutcome classify(T x, T v, std::uint32_t bits, formats::Flags flags, const formats::Format& f) {
  ScaledOutcome o;
  o.product = static_cast<double>(v);
  if (x == 0) { o.zero_in = true; return o; }
  if (!std::isfinite(x)) { o.nonfinite_in = true; return o; }
  if (!std::isfinite(v)) {  // the product overflowed in the tensor's own type
    o.overflow = true;
    return o;
  }
  emu::Counters c;
  emu::count_rounding(c, f, static_cast<double>(v), bits, flags);
  o.underflow_to_zero = v == 0 || c.underflow_to_zero != 0;
  o.subnormal = c.subnormal != 0;
  o.overflow = c.overflow != 0 || formats::is_nan(f, bits) || formats::is_infinity(f, bits);
  return o;
}

}  // namespace

void check_scale(double scale) {
  if (!(std::isfinite(scale) && scale > 0 && static_cast<double>(static_cast<float>(scale)) == scale))
    throw std::invalid_argument("scale " + std::to_string(scale) +
                                " is not a finite positive float32 value (PyTorch multiplies in float32)");
}

ScaledOutcome scale_and_round(float x, float scale, const formats::Format& f) {
  const float v = x * scale;
  formats::Flags flags;
  const std::uint32_t bits = formats::from_float(f, v, formats::RoundingContext{}, flags);
  return classify(x, v, bits, flags, f);
}

ScaledOutcome scale_and_round(double x, double scale, const formats::Format& f) {
  const double v = x * scale;
  formats::Flags flags;
  const std::uint32_t bits = formats::from_double(f, v, formats::RoundingContext{}, flags);
  return classify(x, v, bits, flags, f);
}

}  // namespace mpverify::analysis
