// ATen's lerp(self, end, weight) (aten/src/ATen/native/Lerp.h), both
// branches, in float and in double: Adam's first-moment update on every side.
#pragma once

namespace mpverify::ops {

float lerp_fp32(float self, float end, float weight);
double lerp_fp64(double self, double end, double weight);

}  // namespace mpverify::ops
