// Keras 3 LossScaleOptimizer, and the older tf-keras dynamic loss scale. Both
// keep the scale in a float32 variable, so *2 and /2 are fp32 operations.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "training/loss_scaler.h"

namespace mpverify::training {

KerasScaler::KerasScaler(const KerasConfig& config) : config_(config), scale_(static_cast<float>(config.init_scale)) {
  if (!(scale_ > 0) || !std::isfinite(scale_))  // the fp32 value: below 2^-149 it is 0
    throw std::invalid_argument("keras: init must be finite and > 0 once rounded to fp32 (its smallest is 2^-149, "
                                "about 1.4e-45)");
  if (config.growth_steps < 1) throw std::invalid_argument("keras: interval must be >= 1");
}

StepResult KerasScaler::step(bool found_inf) {
  const StepResult used{scale_, found_inf, false};
  if (config_.variant == KerasVariant::keras3) {
    if (found_inf) {
      counter_ = 0;
      scale_ = scale_ / 2.0f;  // inf / 2 = inf: a scale that reached inf never comes back
    } else if (counter_ == config_.growth_steps - 1) {
      counter_ = 0;
      scale_ = scale_ * 2.0f;  // no finiteness guard: 2^127 * 2 = inf
    } else {
      counter_ += 1;
    }
    return used;
  }
  // tf-keras: tf.maximum(scale / multiplier, 1), and _assign_if_finite on growth.
  if (found_inf) {
    counter_ = 0;
    scale_ = std::max(scale_ / 2.0f, 1.0f);
  } else if (counter_ + 1 >= config_.growth_steps) {
    const float grown = scale_ * 2.0f;
    if (std::isfinite(grown)) scale_ = grown;
    counter_ = 0;
  } else {
    counter_ += 1;
  }
  return used;
}

}  // namespace mpverify::training
