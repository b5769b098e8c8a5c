#include "analysis/scaled_rounding.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "emu/counters.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"

namespace mpverify::analysis {

namespace {

// `v`: the float that is rounded to the format; `product`: x * S in the tensor's type.
template <class T>
ScaledOutcome classify(T x, float v, double product, std::uint32_t bits, formats::Flags flags,
                       const formats::Format& f) {
  ScaledOutcome o;
  o.product = product;
  if (x == 0) { o.zero_in = true; return o; }
  if (!std::isfinite(x)) { o.nonfinite_in = true; return o; }
  if (!std::isfinite(v)) {  // the product overflowed in the tensor's type, or on its way to float
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
  return classify(x, v, static_cast<double>(v), bits, flags, f);
}

ScaledOutcome scale_and_round(double x, double scale, const formats::Format& f) {
  const double product = x * scale;
  const float v = static_cast<float>(product);  // PyTorch converts double to half/bfloat16 through float
  formats::Flags flags;
  const std::uint32_t bits = formats::from_float(f, v, formats::RoundingContext{}, flags);
  return classify(x, v, product, bits, flags, f);
}

}  // namespace mpverify::analysis
