// A priori bounds on the emulated batch norm's error (emu/batch_norm_emu.h),
// the tolerances of `mpverify ops --op batch-norm[-backward]` and of the
// tests: normwise, ||subject - reference||_2 / ||reference||_2, per output.
//
// Against the FP64 reference on the same inputs (x, dy values of the input
// format; gamma, beta of the parameter format; saved statistics of the
// statistics format S), assuming no S result underflows:
//  - a block sum of M terms in S errs by at most gamma_D(u_S) sum |term|,
//    D = block_sum_depth(M, lanes);
//  - mean: eps_mu = gamma_D A + u_S (|mu| + gamma_D A), A = sum |x| / M;
//  - var: var_emu = (var + (mean_emu - mu)^2)(1 + eta), |eta| <=
//    (1 + u_S)^3 (1 + gamma_D) - 1 (the rounding of d squared, the sum of
//    non-negative terms, the division); with eps: var_emu + eps_S =
//    (var + eps)(1 + rho), rho <= (var eta + eps_mu^2 (1 + eta) + eps u_S) / (var + eps);
//  - invstd: three more roundings: beta = (1 + u_S) / ((1 - u_S) sqrt((1 - rho)(1 - u_S))) - 1;
//  - y, dgamma, dbeta, dx: propagated per element, then one rounding to the
//    output (or parameter) format: u_out |value| + half its smallest subnormal.
// The reference's own error (one fp32 rounding, FP64 evaluation within
// gamma_{M+5}(2^-53) of the magnitudes involved) is added, and the norm of
// the reference is taken at its smallest: ||exact|| - ||reference error||.
#pragma once

#include <span>

#include "emu/batch_norm_emu.h"

namespace mpverify::emu {

struct BatchNormForwardBounds {
  double y = 0, mean = 0, invstd = 0;
};
struct BatchNormBackwardBounds {
  double dx = 0, dgamma = 0, dbeta = 0;
};

// Infinity where no a priori bound exists (gamma_D undefined: D u_S >= 1, or rho >= 1).
// Throws std::invalid_argument when an input is not a value of its format.
BatchNormForwardBounds batch_norm_forward_bounds(const ops::ChannelShape& s, const ops::BatchNormParams& p,
                                                 std::span<const float> x, std::span<const float> gamma,
                                                 std::span<const float> beta, const BatchNormPolicy& policy);
BatchNormBackwardBounds batch_norm_backward_bounds(const ops::ChannelShape& s, std::span<const float> x,
                                                   std::span<const float> dy, std::span<const float> gamma,
                                                   std::span<const float> mean, std::span<const float> invstd,
                                                   const BatchNormPolicy& policy);

// The GPU's dx against the emulator's (the default policy, the GPU's). Both
// start from the same xhat, dbeta and dgamma (bit-identical by construction);
// the GPU evaluates dx in fp32 with 6 roundings on any term's path
// (gamma_6(2^-24) |scale| T_i, T_i = M|dy| + |dbeta| + |xhat dgamma|), the
// emulator in double (gamma_5(2^-53) |scale| T_i); then each rounds to fp16
// once: |a - b| <= delta + u (|v_a| + |v_b|) + twice half the smallest subnormal.
// emu_dx, emu_dgamma, emu_dbeta: the emulator's outputs (the reference side).
double batch_norm_gpu_dx_bound(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> dy,
                               std::span<const float> gamma, std::span<const float> mean,
                               std::span<const float> invstd, std::span<const float> emu_dx,
                               std::span<const float> emu_dgamma, std::span<const float> emu_dbeta);

}  // namespace mpverify::emu
