// Emulated layer normalisation over the last dimension (semantics in
// refs/layer_norm_ref.h), modelling a kernel with one warp per row whose
// statistics live in the statistics format S (fp32, as PyTorch's LayerNorm
// computes for fp16 and bf16 inputs):
//
// forward, per row of F features, from x rounded to the input format:
//   mean = fl_S(sum / F), sum = the block sum (emu/block_sum.h, `lanes`) in S
//   d = fl_S(x - mean); var = fl_S(sq / F), sq = the block sum of d*d in S
//           (two passes: no cancellation when |mean| >> std)
//   rstd = fl_S(1 / fl_S(sqrt(fl_S(var + fl_S(eps)))))
//   xhat = fl_S(d * rstd); y = fl_out(gamma * xhat + beta), the exact value
//           rounded once (gamma, beta in the parameter format P)
// backward, from x, dy (input format), gamma (P), the saved mean, rstd (S):
//   xhat = fl_S(fl_S(x - mean) * rstd), recomputed as the forward did;
//   g = fl_S(dy * gamma); a = block sum of g, b = block sum of g*xhat (in S);
//   dx = fl_out(rstd / F (F g - a - xhat b)) evaluated in double from those
//        values (good to a few 2^-53 of the terms), rounded once;
//   dgamma_j, dbeta_j: block sums over the rows of dy*xhat and dy (in S, a
//        second kernel reducing columns), then rounded to P.
//
// Every S operation is one correct rounding of its exact result: d*d, g*xhat,
// dy*xhat and gamma*xhat are exact in double (S and P have at most 24
// significant bits), and sqrt, the reciprocal and the divisions by F go
// through double first, innocuous for the reasons emu/batch_norm_emu.h gives.
#pragma once

#include <span>

#include "emu/counters.h"
#include "emu/row_reduction.h"
#include "formats/format.h"
#include "ops/layer_norm_params.h"

namespace mpverify::emu {

struct LayerNormPolicy {
  formats::Format input = formats::parse_format("fp16");       // x, dy
  formats::Format output = formats::parse_format("fp16");      // y, dx
  formats::Format statistics = formats::parse_format("fp32");  // sums, mean, var, rstd, xhat, g (S)
  formats::Format parameters = formats::parse_format("fp32");  // gamma, beta, dgamma, dbeta (P)
  int lanes = kRowReductionLanes;
};

// Outputs: y (output format), mean and rstd per row (S values). Sites:
// "layer_norm.x", "layer_norm.gamma", "layer_norm.beta" (input rounding);
// "layer_norm.mean" (the sum's additions and the division),
// "layer_norm.centered" (x - mean), "layer_norm.var" (the squared
// deviations' additions and the division), "layer_norm.rstd" (var + eps,
// sqrt, reciprocal), "layer_norm.xhat", "layer_norm.y".
void layer_norm_emu(const ops::LayerNormShape& s, const ops::LayerNormParams& p, std::span<const float> x,
                    std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                    std::span<float> mean, std::span<float> rstd, const LayerNormPolicy& policy = {},
                    CounterSet* counters = nullptr);

// Sites: "layer_norm_backward.x", "layer_norm_backward.dy",
// "layer_norm_backward.gamma", "layer_norm_backward.saved" (mean and rstd
// rounded to S: exact when they come from the forward),
// "layer_norm_backward.centered", "layer_norm_backward.xhat",
// "layer_norm_backward.dy_gamma" (g), "layer_norm_backward.row_sums" (a and
// b), "layer_norm_backward.dx", "layer_norm_backward.dgamma" and
// "layer_norm_backward.dbeta" (the column sums' additions, then the rounding to P).
void layer_norm_backward_emu(const ops::LayerNormShape& s, std::span<const float> x, std::span<const float> dy,
                             std::span<const float> gamma, std::span<const float> mean, std::span<const float> rstd,
                             std::span<float> dx, std::span<float> dgamma, std::span<float> dbeta,
                             const LayerNormPolicy& policy = {}, CounterSet* counters = nullptr);

}  // namespace mpverify::emu
