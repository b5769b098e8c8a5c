// PyTorch GradScaler: the update of ATen's _amp_update_scale_ (CPU and CUDA
// kernels alike). The scale is an fp32 tensor and the factors are doubles:
// `scale * factor` is computed in double and stored back to fp32.
#include <cmath>
#include <stdexcept>

#include "training/loss_scaler.h"

namespace mpverify::training {

TorchScaler::TorchScaler(const TorchConfig& config)
    : config_(config), scale_(static_cast<float>(config.init_scale)) {
  if (!(scale_ > 0) || !std::isfinite(scale_))  // the fp32 value: below 2^-149 it is 0
    throw std::invalid_argument("torch: init must be finite and > 0 once rounded to fp32 (its smallest is 2^-149, "
                                "about 1.4e-45)");
  // GradScaler's own asserts.
  if (!(config.growth_factor > 1.0)) throw std::invalid_argument("torch: growth must be > 1");
  if (!(config.backoff_factor < 1.0) || !(config.backoff_factor > 0.0))
    throw std::invalid_argument("torch: backoff must be in (0, 1)");
  if (config.growth_interval < 1) throw std::invalid_argument("torch: interval must be >= 1");
}

StepResult TorchScaler::step(bool found_inf) {
  const StepResult used{scale_, found_inf, false};
  if (found_inf) {
    scale_ = static_cast<float>(static_cast<double>(scale_) * config_.backoff_factor);
    tracker_ = 0;
    return used;
  }
  const int successful = tracker_ + 1;
  if (successful == config_.growth_interval) {
    const float grown = static_cast<float>(static_cast<double>(scale_) * config_.growth_factor);
    // "Do not grow the scale past fp32 bounds to inf": refused, but the
    // tracker still restarts.
    if (std::isfinite(grown)) scale_ = grown;
    tracker_ = 0;
  } else {
    tracker_ = successful;
  }
  return used;
}

}  // namespace mpverify::training
