// NeMo's GradScaler: PyTorch's GradScaler with hysteresis, as apex's
// update_scale_hysteresis kernel (and NeMo's Python fallback) compute it:
// the scale is an fp32 tensor and the factors are doubles, as in torch.
#include <cmath>
#include <stdexcept>

#include "training/loss_scaler.h"

namespace mpverify::training {

NemoScaler::NemoScaler(const NemoConfig& config)
    : config_(config), scale_(static_cast<float>(config.init_scale)), hysteresis_(config.hysteresis) {
  if (!(scale_ > 0) || !std::isfinite(scale_))  // the fp32 value: below 2^-149 it is 0
    throw std::invalid_argument("nemo: init must be finite and > 0 once rounded to fp32 (its smallest is 2^-149, "
                                "about 1.4e-45)");
  if (!(config.growth_factor > 1.0)) throw std::invalid_argument("nemo: growth must be > 1");
  if (!(config.backoff_factor < 1.0) || !(config.backoff_factor > 0.0))
    throw std::invalid_argument("nemo: backoff must be in (0, 1)");
  if (config.growth_interval < 1) throw std::invalid_argument("nemo: interval must be >= 1");
  if (config.hysteresis < 1) throw std::invalid_argument("nemo: hysteresis must be >= 1");
}

StepResult NemoScaler::step(bool found_inf) {
  // The optimizer step is skipped on every overflow, whatever the hysteresis.
  const StepResult used{scale_, found_inf, false};
  if (found_inf) {
    hysteresis_ -= 1;
    // While hysteresis is left, only the growth count restarts.
    if (hysteresis_ > 0) {
      tracker_ = 0;
      return used;
    }
    scale_ = static_cast<float>(static_cast<double>(scale_) * config_.backoff_factor);
    tracker_ = 0;
    return used;
  }
  const int successful = tracker_ + 1;
  if (successful == config_.growth_interval) {
    const float grown = static_cast<float>(static_cast<double>(scale_) * config_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;
    tracker_ = 0;
  } else {
    tracker_ = successful;
  }
  hysteresis_ = config_.hysteresis;
  return used;
}

}  // namespace mpverify::training
