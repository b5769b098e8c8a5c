// Transformer Engine's DelayedScaling update (amax_and_scale_update): the
// step quantizes with the scale computed from earlier steps, then its amax
// joins the history and the scale is recomputed in fp32. The history is a
// ring of the last `history` amaxes; TE's roll keeps the same window.
#include <cfloat>
#include <cmath>
#include <stdexcept>

#include "training/loss_scaler.h"

namespace mpverify::training {

namespace {

// Checked before the history is allocated.
std::size_t checked_history(int history) {
  if (history < 1 || history > kMaxDelayedHistory)
    throw std::invalid_argument("delayed: history must be in 1.." + std::to_string(kMaxDelayedHistory));
  return static_cast<std::size_t>(history);
}

}  // namespace

DelayedScaler::DelayedScaler(const DelayedConfig& config)
    : config_(config),
      // TE: fp8_dtype_max(dtype) * std::pow(2.f, -margin), all in float.
      scaled_max_(config.fp8_max * std::pow(2.0f, -config.margin)),
      history_(checked_history(config.history), 0.0f) {
  if (!std::isfinite(config.margin)) throw std::invalid_argument("delayed: margin must be finite");
}

StepResult DelayedScaler::step(float amax) {
  const StepResult used{scale_, false, false};
  // kernel_bulk rolls the history and recomputes the scale only `if
  // (last_amax != 0.0f)`: a step whose amax is 0 (a tensor of zeros, or one
  // not used this step) leaves both as they were.
  if (config_.kernel == DelayedKernel::bulk && amax == 0.0f) return used;
  history_[next_] = amax;
  next_ = (next_ + 1) % history_.size();
  float a = amax;
  if (config_.algo == AmaxAlgo::max) {
    // The kernel's reduction starts from 0 and uses fmaxf, which drops NaN.
    a = 0.0f;
    for (float h : history_) a = std::fmax(a, h);
  }
  float s = std::isfinite(a) && a > 0 ? scaled_max_ / a : scale_;
  // A tiny amax makes s overflow fp32; TE keeps the largest float instead.
  if (std::isinf(s)) s = FLT_MAX;
  scale_ = s;
  return used;
}

}  // namespace mpverify::training
