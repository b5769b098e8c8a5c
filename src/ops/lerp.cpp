#include "ops/lerp.h"

#include <cmath>

// The whole project compiles with -ffp-contract=off: each `a * b + c` below is
// two roundings, never one FMA, as ATen's scalar kernel computes it.

namespace mpverify::ops {

// ATen's lerp: self + weight * (end - self) for |weight| < 0.5, else
// end - (end - self) * (1 - weight), with 1 - weight in the same precision.
float lerp_fp32(float self, float end, float weight) {
  return std::fabs(weight) < 0.5f ? self + weight * (end - self) : end - (end - self) * (1.0f - weight);
}

double lerp_fp64(double self, double end, double weight) {
  return std::fabs(weight) < 0.5 ? self + weight * (end - self) : end - (end - self) * (1.0 - weight);
}

}  // namespace mpverify::ops
