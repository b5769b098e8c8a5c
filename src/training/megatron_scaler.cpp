// Megatron-LM's DynamicGradScaler: the scale, the floor and both factors are
// torch.float tensors, so every update is an fp32 operation. Hysteresis is
// restored only when the scale grows.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "training/loss_scaler.h"

namespace mpverify::training {

MegatronScaler::MegatronScaler(const MegatronConfig& config)
    : config_(config),
      scale_(static_cast<float>(config.init_scale)),
      min_(static_cast<float>(config.min_scale)),
      growth_(static_cast<float>(config.growth_factor)),
      backoff_(static_cast<float>(config.backoff_factor)),
      hysteresis_(config.hysteresis) {
  // Megatron's own asserts.
  if (!(scale_ > 0) || !std::isfinite(scale_))  // the fp32 value: below 2^-149 it is 0
    throw std::invalid_argument("megatron: init must be finite and > 0 once rounded to fp32 (its smallest is 2^-149, "
                                "about 1.4e-45)");
  if (!(config.min_scale > 0) || !(config.min_scale <= config.init_scale))
    throw std::invalid_argument("megatron: min must be > 0 and <= init");
  if (!(config.growth_factor > 1.0)) throw std::invalid_argument("megatron: growth must be > 1");
  if (!(config.backoff_factor < 1.0) || !(config.backoff_factor > 0.0))
    throw std::invalid_argument("megatron: backoff must be in (0, 1)");
  if (config.growth_interval < 1) throw std::invalid_argument("megatron: interval must be >= 1");
  if (config.hysteresis < 1) throw std::invalid_argument("megatron: hysteresis must be >= 1");
}

StepResult MegatronScaler::step(bool found_inf) {
  const StepResult used{scale_, found_inf, false};
  if (found_inf) {
    tracker_ = 0;
    hysteresis_ -= 1;
    if (hysteresis_ <= 0) scale_ = std::max(scale_ * backoff_, min_);
  } else {
    tracker_ += 1;
    if (tracker_ == config_.growth_interval) {
      tracker_ = 0;
      hysteresis_ = config_.hysteresis;
      scale_ = scale_ * growth_;
    }
  }
  return used;
}

}  // namespace mpverify::training
