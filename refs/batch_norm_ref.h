// Reference batch normalisation over NCHW in training mode, per channel c
// over its M = n*h*w elements (M >= 2):
//   mean = sum x / M,  var = sum (x - mean)^2 / M (biased: normalises),
//   invstd = 1 / sqrt(var + eps),  xhat = (x - mean) * invstd,
//   y = gamma * xhat + beta;
//   running_mean <- (1 - momentum) running_mean + momentum mean,
//   running_var  <- (1 - momentum) running_var + momentum var * M / (M - 1)
//   (the unbiased variance, as PyTorch);
// backward, from the saved mean and invstd:
//   dbeta = sum dy,  dgamma = sum dy xhat,
//   dx = gamma invstd / M * (M dy - dbeta - xhat dgamma).
// In FP64, the float outputs rounded once. Same signature shape as
// emu::batch_norm_emu and gpu::batch_norm_gpu.
#pragma once

#include <span>
#include <vector>

#include "ops/batch_norm_params.h"
#include "ops/channel_shape.h"

namespace mpverify::refs {

struct BatchNormForward64 {
  std::vector<double> y, mean, invstd, running_mean, running_var;
};
struct BatchNormBackward64 {
  std::vector<double> dx, dgamma, dbeta;
};

// The oracle in double (finite-difference checks perturb its inputs).
BatchNormForward64 batch_norm_fp64(const ops::ChannelShape& s, const ops::BatchNormParams& p, std::span<const double> x,
                                   std::span<const double> gamma, std::span<const double> beta,
                                   std::span<const double> running_mean, std::span<const double> running_var);
BatchNormBackward64 batch_norm_backward_fp64(const ops::ChannelShape& s, std::span<const double> x,
                                             std::span<const double> dy, std::span<const double> gamma,
                                             std::span<const double> mean, std::span<const double> invstd);

// Sizes: x, y, dy, dx: s.size(); gamma, beta, mean, invstd, running_*,
// dgamma, dbeta: s.c. running_mean and running_var are updated in place.
// Throws std::invalid_argument naming a wrong size.
void batch_norm_ref(const ops::ChannelShape& s, const ops::BatchNormParams& p, std::span<const float> x,
                    std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                    std::span<float> mean, std::span<float> invstd, std::span<float> running_mean,
                    std::span<float> running_var);
void batch_norm_backward_ref(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> dy,
                             std::span<const float> gamma, std::span<const float> mean,
                             std::span<const float> invstd, std::span<float> dx, std::span<float> dgamma,
                             std::span<float> dbeta);

}  // namespace mpverify::refs
