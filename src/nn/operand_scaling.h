// Per-tensor scaling of a matrix op's operands (the fp8 recipe, as
// Transformer Engine does it): the operand x is multiplied by a scale s in
// fp32 (x_s = fl32(x * s)) so that its largest magnitude lands near the fp8
// format's largest value, the op rounds x_s to fp8 and accumulates in fp32,
// and its fp32 result is multiplied by fl32(1/s_a * 1/s_b) (cuBLAS's alpha
// from the two scale_inv). Without Precision::operand_scale nothing is
// copied and the inverse is 1.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "nn/context.h"

namespace mpverify::nn {

class ScaledOperand {
 public:
  // `site` names the operand for the scaling strategy ("fc1.x", "fc1.w", "fc1.dy").
  ScaledOperand(const Context& ctx, std::string_view site, std::span<const float> x);
  std::span<const float> values() const { return scaled_.empty() ? original_ : std::span<const float>(scaled_); }
  float inverse() const { return inverse_; }  // fl32(1 / s); 1 when unscaled

 private:
  std::span<const float> original_;
  std::vector<float> scaled_;
  float inverse_ = 1.0f;
};

// c *= fl32(a.inverse() * b.inverse()), in fp32; nothing when both are 1.
void unscale_result(const ScaledOperand& a, const ScaledOperand& b, std::span<float> c);

}  // namespace mpverify::nn
