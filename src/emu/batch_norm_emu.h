// Emulated batch normalisation, training mode (semantics in
// refs/batch_norm_ref.h), modelling a CUDA kernel with one block per channel
// (gpu::batch_norm_gpu) whose statistics live in the statistics format S
// (fp32 by default):
//
// forward, per channel, from x rounded to the input format:
//   pass 1  sum = running sums of x in S in the block order of
//           emu/block_sum.h; mean = fl_S(sum / M)
//   pass 2  d = fl_S(x - mean); sq = running sums of d*d in S (each step
//           one rounding of sum + d*d: an fma); var = fl_S(sq / M)
//           Two passes: one-pass E[x^2] - mean^2 cancels catastrophically
//           when |mean| >> std, the two-pass sum of squared deviations does not.
//   invstd = fl_S(1 / fl_S(sqrt(fl_S(var + fl_S(eps)))))
//   pass 3  xhat = fl_S(d * invstd); y = fl_out(gamma * xhat + beta), the
//           exact value rounded once (gamma, beta in the parameter format)
//   running_mean = fl_P((1 - momentum) running_mean + momentum mean),
//   running_var  = fl_P((1 - momentum) running_var + momentum sq / (M - 1)),
//           each evaluated in double in that order, then rounded once.
// backward, from x, dy (input format), gamma (P), saved mean, invstd (S):
//   xhat = fl_S(fl_S(x - mean) * invstd), recomputed as the kernel does;
//   dbeta = running sums of dy, dgamma = running sums of dy*xhat (block order,
//   in S; each then rounded to P for output);
//   dx = fl_out(gamma invstd / M * (M dy - dbeta - xhat dgamma)) from those
//   values, in double (good to 2^-50 relative to the terms), rounded once.
//
// Every S operation is one correct rounding of its exact result (S has at
// most 24 significant bits). sqrt and the reciprocal go through double first,
// innocuous since 53 >= 2 p_S + 2 (Figueroa, 1995). The divisions by M (an
// integer <= 2^24, not always an S value) too: a p-bit sum over M is either an
// S rounding boundary or at least 2^-(p+1) / M >= 2^-49 away from one,
// relatively, while the double quotient is within 2^-53 of it.
#pragma once

#include <span>

#include "emu/block_sum.h"
#include "emu/counters.h"
#include "formats/format.h"
#include "ops/batch_norm_params.h"

namespace mpverify::emu {

struct BatchNormPolicy {
  formats::Format input = formats::parse_format("fp16");       // x, dy
  formats::Format output = formats::parse_format("fp16");      // y, dx
  formats::Format statistics = formats::parse_format("fp32");  // sums, mean, var, invstd, xhat (S)
  formats::Format parameters = formats::parse_format("fp32");  // gamma, beta, running stats, dgamma, dbeta (P)
  int lanes = kGpuReductionLanes;
};

// Outputs: y (output format), mean and invstd (S values), running_mean and
// running_var updated in place (P values). Sites: "batch_norm.x",
// "batch_norm.gamma", "batch_norm.beta" (input rounding); "batch_norm.mean"
// (the sum's additions and the division), "batch_norm.centered" (x - mean),
// "batch_norm.var" (the squared deviations' additions and the division),
// "batch_norm.invstd" (var + eps, sqrt, reciprocal), "batch_norm.xhat",
// "batch_norm.y", "batch_norm.running_mean", "batch_norm.running_var".
void batch_norm_emu(const ops::ChannelShape& s, const ops::BatchNormParams& p, std::span<const float> x,
                    std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                    std::span<float> mean, std::span<float> invstd, std::span<float> running_mean,
                    std::span<float> running_var, const BatchNormPolicy& policy = {},
                    CounterSet* counters = nullptr);

// Sites: "batch_norm_backward.x", "batch_norm_backward.dy",
// "batch_norm_backward.gamma", "batch_norm_backward.saved" (mean and invstd
// rounded to S: exact when they come from the forward),
// "batch_norm_backward.centered", "batch_norm_backward.xhat",
// "batch_norm_backward.dbeta" and "batch_norm_backward.dgamma" (the sums'
// additions, then the rounding to P), "batch_norm_backward.dx".
void batch_norm_backward_emu(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> dy,
                             std::span<const float> gamma, std::span<const float> mean,
                             std::span<const float> invstd, std::span<float> dx, std::span<float> dgamma,
                             std::span<float> dbeta, const BatchNormPolicy& policy = {},
                             CounterSet* counters = nullptr);

}  // namespace mpverify::emu
