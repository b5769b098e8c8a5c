#include "nn/operand_scaling.h"

#include <cmath>

namespace mpverify::nn {

ScaledOperand::ScaledOperand(const Context& ctx, std::string_view site, std::span<const float> x) : original_(x) {
  const auto& scale_of = ctx.precision().operand_scale;
  if (!scale_of) return;
  float amax = 0.0f;
  for (float v : x) amax = std::fmax(amax, std::fabs(v));  // fmax drops NaN, as TE's amax reduction
  const float s = scale_of(site, amax);
  if (s == 1.0f) return;
  scaled_.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) scaled_[i] = x[i] * s;
  inverse_ = 1.0f / s;
}

void unscale_result(const ScaledOperand& a, const ScaledOperand& b, std::span<float> c) {
  const float inverse = a.inverse() * b.inverse();
  if (inverse == 1.0f) return;
  for (float& v : c) v *= inverse;
}

}  // namespace mpverify::nn
