#include "training/scaled_range.h"

#include <cmath>

#include "formats/arithmetic.h"

namespace mpverify::training {

namespace {

// What the rounding of a finite positive product says: beyond the format
// (round_pack raises the overflow flag whatever the format's overflow policy:
// infinity, NaN or saturation), or a zero.
ScaledFit classify(const formats::Format& format, std::uint32_t bits, const formats::Flags& flags, double value) {
  ScaledFit fit;
  fit.overflow = flags.has(formats::Flags::overflow);
  fit.zero = !fit.overflow && value > 0 && format.has_zero && (bits & ~format.sign_mask()) == 0;
  return fit;
}

}  // namespace

ScaledFit scaled_fit(const formats::Format& format, double value, double scale, ScaledProduct product) {
  if (!std::isfinite(value) || !std::isfinite(scale)) return {true, false};
  const formats::RoundingContext rc{};
  formats::Flags flags;
  if (product == ScaledProduct::fp32) {
    const float p = static_cast<float>(value) * static_cast<float>(scale);
    if (!std::isfinite(p)) return {true, false};
    return classify(format, formats::from_float(format, p, rc, flags), flags, value);
  }
  // The exact product as p + e (TwoProduct), rounded once by sum_to_format.
  const double p = value * scale;
  if (!std::isfinite(p)) return {true, false};
  const double e = std::fma(value, scale, -p);
  return classify(format, formats::sum_to_format(format, p, e, rc, flags), flags, value);
}

}  // namespace mpverify::training
