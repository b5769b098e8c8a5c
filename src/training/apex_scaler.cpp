// Apex amp's dynamic LossScaler.update_scale: Python floats (double), factor 2
// both ways, an optional floor and a cap (2^24 by default).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "training/loss_scaler.h"

namespace mpverify::training {

ApexScaler::ApexScaler(const ApexConfig& config)
    : config_(config), scale_(std::min(config.max_scale, config.init_scale)) {
  if (!(config.init_scale > 0) || !std::isfinite(config.init_scale))
    throw std::invalid_argument("apex: init must be finite and > 0");
  if (!(config.max_scale > 0)) throw std::invalid_argument("apex: max must be > 0");
  if (!(config.min_scale >= 0) || !std::isfinite(config.min_scale))
    throw std::invalid_argument("apex: min must be finite and >= 0 (0: no floor)");
  if (config.scale_window < 1) throw std::invalid_argument("apex: interval must be >= 1");
}

StepResult ApexScaler::step(bool found_inf) {
  const StepResult used{scale_, found_inf, false};
  if (found_inf) {
    // `if self._min_loss_scale:` -- a floor of 0 (None) is no floor.
    scale_ = config_.min_scale != 0 ? std::max(config_.min_scale, scale_ / 2.0) : scale_ / 2.0;
    unskipped_ = 0;
  } else {
    unskipped_ += 1;
  }
  if (unskipped_ == config_.scale_window) {
    scale_ = std::min(config_.max_scale, scale_ * 2.0);
    unskipped_ = 0;
  }
  return used;
}

}  // namespace mpverify::training
