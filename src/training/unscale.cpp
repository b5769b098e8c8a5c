#include "training/unscale.h"

#include <cmath>

namespace mpverify::training {

std::size_t unscale_gradient(std::string_view scaler_name, double scale, std::span<float> grad) {
  std::size_t nonfinite = 0;
  if (scaler_name == "keras") {
    const float s = static_cast<float>(scale);
    for (float& g : grad) {
      g = g / s;
      nonfinite += !std::isfinite(g);
    }
    return nonfinite;
  }
  const float inverse = static_cast<float>(1.0 / scale);
  for (float& g : grad) {
    g = g * inverse;
    nonfinite += !std::isfinite(g);
  }
  return nonfinite;
}

}  // namespace mpverify::training
