// fairseq's (and metaseq's) DynamicLossScaler: Python floats (double),
// factor 2 both ways, growth on the iterations since the last overflow, a
// tolerance (the share of overflowing iterations since the last rescale that
// is let pass), an optional threshold below which the scale does not fall,
// and a minimum at which training stops (FloatingPointError).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "training/loss_scaler.h"

namespace mpverify::training {

FairseqScaler::FairseqScaler(const FairseqConfig& config) : config_(config), scale_(config.init_scale) {
  if (!(config.init_scale > 0) || !std::isfinite(config.init_scale))
    throw std::invalid_argument("fairseq: init must be finite and > 0");
  if (config.scale_window < 1) throw std::invalid_argument("fairseq: interval must be >= 1");
  if (!(config.tolerance >= 0) || !std::isfinite(config.tolerance))
    throw std::invalid_argument("fairseq: tolerance must be finite and >= 0 (a share of iterations, e.g. 0.25)");
  if (!(config.threshold >= 0) || !std::isfinite(config.threshold))
    throw std::invalid_argument("fairseq: threshold must be finite and >= 0 (0: none)");
  if (!(config.min_scale >= 0) || !std::isfinite(config.min_scale))
    throw std::invalid_argument("fairseq: min must be finite and >= 0");
}

StepResult FairseqScaler::step(bool found_inf) {
  if (aborted_) throw std::logic_error("fairseq: the run stopped at the minimum scale; no further steps");
  StepResult used{scale_, found_inf, false};
  if (!found_inf) {
    // update(), called only after an applied step.
    if ((iteration_ - last_overflow_) % config_.scale_window == 0) {
      scale_ *= 2.0;
      last_rescale_ = iteration_;
    }
    iteration_ += 1;
    return used;
  }
  // check_overflow() on a non-finite gradient norm.
  const double previous = scale_;
  const std::int64_t since_rescale = iteration_ - last_rescale_;
  last_overflow_ = iteration_;
  overflows_since_rescale_ += 1;
  const double share = overflows_since_rescale_ / static_cast<double>(since_rescale);
  if (share >= config_.tolerance) {
    scale_ /= 2.0;
    if (config_.threshold > 0) scale_ = std::max(scale_, config_.threshold);
    last_rescale_ = iteration_;
    overflows_since_rescale_ = 0;
  }
  if (scale_ <= config_.min_scale) {
    // FloatingPointError("Minimum loss scale reached"): the scale is put back
    // and the trainer stops; the iteration counter does not move.
    scale_ = previous;
    aborted_ = true;
    used.aborted = true;
    return used;
  }
  iteration_ += 1;  // then OverflowError: the trainer skips the step
  return used;
}

}  // namespace mpverify::training
