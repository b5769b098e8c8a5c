// DeepSpeed's DynamicLossScaler.update_scale: Python floats (double), factor
// 2, hysteresis (delayed_shift), a floor, and growth on the modulo of the
// iterations since the last overflow rather than on a counter of its own.
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
    if ((iteration_ - last_overflow_) % config_.scale_window == 0) {
      if (!config_.consecutive_hysteresis) hysteresis_ = config_.hysteresis;
      scale_ *= 2.0;
    }
  }
  iteration_ += 1;
  return used;
}

}  // namespace mpverify::training
