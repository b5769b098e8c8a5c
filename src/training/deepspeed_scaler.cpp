// DeepSpeed's two loss-scale rules, both in Python floats (double) with
// factor 2 and a floor, both growing on the iterations since the last
// overflow rather than on a counter of their own. ZeRO's DynamicLossScaler
// (update_scale) adds hysteresis (delayed_shift) and raises at the minimum;
// FP16_Optimizer._update_scale (fp16 without ZeRO) has neither. Both wait one
// more clean iteration before their first growth, ZeRO's since DeepSpeed
// 0.17.1; before it, ZeRO grew one iteration earlier (growth_before_0_17_1).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "training/loss_scaler.h"

namespace mpverify::training {

DeepSpeedConfig DeepSpeedConfig::config_without_keys() {
  DeepSpeedConfig c;
  c.init_scale = 4294967296.0;  // DynamicLossScaler(init_scale=2**32, delayed_shift=1)
  c.hysteresis = 1;
  return c;
}

DeepSpeedScaler::DeepSpeedScaler(const DeepSpeedConfig& config)
    : config_(config), scale_(config.init_scale), hysteresis_(config.hysteresis) {
  if (!(config.init_scale > 0) || !std::isfinite(config.init_scale))
    throw std::invalid_argument("deepspeed: init must be finite and > 0");
  if (config.scale_window < 1) throw std::invalid_argument("deepspeed: interval must be >= 1");
  if (config.hysteresis < 1) throw std::invalid_argument("deepspeed: hysteresis must be >= 1");
  if (!(config.min_scale >= 0) || !std::isfinite(config.min_scale))
    throw std::invalid_argument("deepspeed: min must be finite and >= 0");
}

StepResult DeepSpeedScaler::step(bool found_inf) {
  if (aborted_) throw std::logic_error("deepspeed: the run aborted at the minimum scale; no further steps");
  return config_.optimizer == DeepSpeedOptimizer::fp16 ? step_fp16(found_inf) : step_zero(found_inf);
}

StepResult DeepSpeedScaler::step_fp16(bool found_inf) {
  const StepResult used{scale_, found_inf, false};
  if (found_inf) {
    scale_ = std::max(scale_ / 2.0, config_.min_scale);
    last_overflow_ = iteration_;
  } else {
    // "Ensure self.scale_window updates since last overflow".
    const std::int64_t stable_interval = iteration_ - last_overflow_ - 1;
    if (stable_interval > 0 && stable_interval % config_.scale_window == 0) scale_ *= 2.0;
  }
  iteration_ += 1;
  return used;
}

StepResult DeepSpeedScaler::step_zero(bool found_inf) {
  StepResult used{scale_, found_inf, false};
  if (found_inf) {
    if (config_.hysteresis == 1 || hysteresis_ == 1) {
      if (scale_ == config_.min_scale && config_.raise_error_at_min_scale) {
        // DeepSpeed raises "Current loss scale already at minimum": the run
        // ends here, before the iteration counter moves.
        aborted_ = true;
        used.aborted = true;
        return used;
      }
      scale_ = std::max(scale_ / 2.0, config_.min_scale);
    } else {
      hysteresis_ -= 1;
    }
    last_overflow_ = iteration_;
  } else {
    if (config_.consecutive_hysteresis) hysteresis_ = config_.hysteresis;
    const std::int64_t stable_interval = iteration_ - last_overflow_ - 1;
    const bool grow = config_.growth_before_0_17_1
                          ? (iteration_ - last_overflow_) % config_.scale_window == 0
                          : stable_interval > 0 && stable_interval % config_.scale_window == 0;
    if (grow) {
      if (!config_.consecutive_hysteresis) hysteresis_ = config_.hysteresis;
      scale_ *= 2.0;
    }
  }
  iteration_ += 1;
  return used;
}

}  // namespace mpverify::training
