// Current (per-tensor, just-in-time) scaling: Transformer Engine's
// compute_scale_from_amax, in fp32, applied to the tensor it was measured on.
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "training/loss_scaler.h"

namespace mpverify::training {

float current_scale(float amax, const CurrentConfig& config) {
  if (amax < config.epsilon) amax = config.epsilon;
  if (std::isinf(amax) || amax == 0.0f) return 1.0f;
  float s = config.fp8_max / amax;  // NaN amax gives NaN here, then 1 below
  if (std::isinf(s)) s = FLT_MAX;
  if (std::isnan(s)) s = 1.0f;
  // Keep sign and exponent: s rounded down to a power of two (s is a
  // positive normal here: the least is 448 / FLT_MAX, about 2^-119).
  if (config.pow2) s = std::bit_cast<float>(std::bit_cast<std::uint32_t>(s) & 0xFF800000u);
  return s;
}

StepResult CurrentScaler::step(float amax) {
  scale_ = current_scale(amax, config_);
  return {scale_, false, false};
}

}  // namespace mpverify::training
