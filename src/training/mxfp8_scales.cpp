// MXFP8 block scales: one E8M0 power of two per 32 elements, the least that
// keeps the block's largest magnitude within the element format.
#include <algorithm>
#include <cmath>
#include <limits>

#include "training/loss_scaler.h"

namespace mpverify::training {

double mxfp8_block_scale(float amax, float fp8_max) {
  // TE's float_to_e8m0: NaN -> 0xFF (NaN), inf -> 0xFE (2^127).
  if (std::isnan(amax)) return std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(amax)) return 0x1p127;
  if (amax == 0.0f) return 0x1p-127;
  // k = ceil(log2(amax / fp8_max)) without rounding: the least k with
  // amax <= fp8_max * 2^k (exact in double for every float amax).
  const double a = std::fabs(static_cast<double>(amax));
  int k = std::ilogb(a) - std::ilogb(static_cast<double>(fp8_max)) - 1;
  while (std::ldexp(static_cast<double>(fp8_max), k) < a) ++k;
  return std::ldexp(1.0, std::clamp(k, -127, 127));
}

std::vector<double> mxfp8_block_scales(std::span<const float> values, float fp8_max) {
  std::vector<double> scales;
  for (std::size_t begin = 0; begin < values.size(); begin += kMxBlock) {
    const std::size_t end = std::min(values.size(), begin + kMxBlock);
    // TE reduces with fmaxf from 0: a NaN element does not count, an
    // infinite one makes the amax infinite.
    float amax = 0.0f;
    for (std::size_t i = begin; i < end; ++i) amax = std::fmax(amax, std::fabs(values[i]));
    scales.push_back(mxfp8_block_scale(amax, fp8_max));
  }
  return scales;
}

StepResult Mxfp8Scaler::step(float amax) {
  scale_ = mxfp8_block_scale(amax, fp8_max_);
  return {scale_, false, false};
}

}  // namespace mpverify::training
