// Reference layer normalisation over the last dimension (ops/layer_norm_params.h),
// per row of F = features elements:
//   mean = sum x / F,  var = sum (x - mean)^2 / F (biased, as PyTorch),
//   rstd = 1 / sqrt(var + eps),  xhat = (x - mean) rstd,
//   y_j = gamma_j xhat_j + beta_j;
// backward, from the saved mean and rstd, with g_j = dy_j gamma_j:
//   dx_j = rstd / F (F g_j - sum g - xhat_j sum g xhat),
//   dgamma_j = sum over rows of dy_j xhat_j,  dbeta_j = sum over rows of dy_j.
// In FP64, the float outputs rounded once. Same signature shape as
// emu::layer_norm_emu.
#pragma once

#include <span>
#include <vector>

#include "ops/layer_norm_params.h"

namespace mpverify::refs {

struct LayerNormForward64 {
  std::vector<double> y, mean, rstd;  // mean, rstd: one per row
};
struct LayerNormBackward64 {
  std::vector<double> dx, dgamma, dbeta;
};

// The oracle in double (finite-difference checks perturb its inputs).
LayerNormForward64 layer_norm_fp64(const ops::LayerNormShape& s, const ops::LayerNormParams& p,
                                   std::span<const double> x, std::span<const double> gamma,
                                   std::span<const double> beta);
LayerNormBackward64 layer_norm_backward_fp64(const ops::LayerNormShape& s, std::span<const double> x,
                                             std::span<const double> dy, std::span<const double> gamma,
                                             std::span<const double> mean, std::span<const double> rstd);

// Sizes: x, y, dy, dx: s.size(); gamma, beta, dgamma, dbeta: s.features;
// mean, rstd: s.rows. Throws std::invalid_argument naming a wrong size.
void layer_norm_ref(const ops::LayerNormShape& s, const ops::LayerNormParams& p, std::span<const float> x,
                    std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                    std::span<float> mean, std::span<float> rstd);
void layer_norm_backward_ref(const ops::LayerNormShape& s, std::span<const float> x, std::span<const float> dy,
                             std::span<const float> gamma, std::span<const float> mean, std::span<const float> rstd,
                             std::span<float> dx, std::span<float> dgamma, std::span<float> dbeta);

}  // namespace mpverify::refs
