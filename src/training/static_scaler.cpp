// none (s = 1) and static(S): the scale never changes.
#include <cmath>
#include <stdexcept>

#include "training/loss_scaler.h"

namespace mpverify::training {

StaticScaler::StaticScaler(double scale, bool skip_nonfinite) : scale_(scale), skip_(skip_nonfinite) {
  if (!(scale > 0) || !std::isfinite(scale)) throw std::invalid_argument("static: the scale must be finite and > 0");
}

StepResult StaticScaler::step(bool found_inf) { return {scale_, found_inf && skip_, false}; }

}  // namespace mpverify::training
