// Reference optimizer updates: torch.optim.SGD and torch.optim.Adam as
// PyTorch's single-tensor (foreach=False, fused=False) code writes them, one
// step at a time, updating w and the state in place. Same signature shape as
// emu::sgd_step_emu / gpu::sgd_step_gpu; the hyperparameters, their checks
// and Adam's scalars are in ops/optimizer_params.h, ATen's lerp in ops/lerp.h.
//
// The FP32 version performs PyTorch's tensor operations in PyTorch's order,
// each rounded to float, with the hyperparameters computed in double (as
// Python does) and rounded to float where a kernel takes them:
//
//   SGD   g' = g + fl(wd * w)                       grad.add(param, alpha=wd)
//         v  = g'                   (first step)    buf = clone(grad)
//         v  = fl(mu * v) + fl((1 - d) * g')        buf.mul_(mu).add_(grad, alpha=1-d)
//         g''= g' + fl(mu * v)  (nesterov) else v   grad.add(buf, alpha=mu)
//         w  = w + fl(-lr * g'')                    param.add_(grad, alpha=-lr)
//   Adam  g' = g + fl(wd * w)   (or, adamw: w = fl(w * (1 - lr wd)) first)
//         m  = lerp(m, g', 1 - b1)                  exp_avg.lerp_(grad, 1-b1)
//              = m + fl(a * fl(g' - m))             while |a| < 0.5, else
//              = g' - fl(fl(g' - m) * fl(1 - a))    (ATen's lerp, both branches)
//         v  = fl(b2 * v) + fl(fl((1 - b2) * g') * g')   mul_(b2).addcmul_(g, g, 1-b2)
//         denom = fl(fl(sqrt(v)) / sqrt(1 - b2^t)) + eps
//         w  = w + fl(fl(-(lr / (1 - b1^t)) * m) / denom)  param.addcdiv_(m, denom, -step_size)
//
// Every "+" and "*" above is one float operation. That is PyTorch's CPU
// kernels in their scalar form (ATEN_CPU_CAPABILITY=default). Other builds of
// the same step round differently, by at most an ulp per operation:
//  - the AVX2/AVX-512 CPU kernels compute add(x, y, alpha) as one FMA
//    (vec::fmadd(y, alpha, x)), and so does CUDA, where nvcc contracts
//    `self + alpha * other`; CUDA's lerp, addcmul and addcdiv contract too;
//  - CUDA divides a tensor by a Python scalar as a multiplication by its
//    reciprocal (exp_avg_sq.sqrt() / bias_correction2_sqrt);
//  - foreach and fused implementations (the default on CUDA) have their own
//    order; libtorch's C++ Adam and PyTorch <= 2.0 update m as
//    m.mul_(b1).add_(g, alpha=1-b1) instead of lerp.
// The GPU side here (gpu/optimizer_gpu.cu) reproduces this scalar CPU order
// with non-contractible intrinsics, so that it can be compared bit for bit.
//
// The FP64 version is the same sequence with every operation in double and the
// hyperparameters unrounded: the oracle the FP32 results are measured against.
//
// Non-finite values are not filtered: a NaN or infinite gradient propagates
// into the state and the weights (inf in Adam becomes NaN: inf / inf), as in
// PyTorch, whose GradScaler skips such steps before they reach the optimizer.
#pragma once

#include <cstdint>
#include <span>

#include "ops/optimizer_params.h"

namespace mpverify::refs {

// `step` is 1 for the first step (PyTorch's state['step'] after its
// increment): SGD's momentum buffer starts as the first g', Adam's bias
// corrections use it. w, v (and m) are updated in place; g is this step's
// gradient. Sizes must match (v may be empty when momentum == 0); otherwise
// std::invalid_argument names the span.
void sgd_step_ref(const ops::SgdParams& p, std::int64_t step, std::span<float> w, std::span<float> v,
                  std::span<const float> g);
void sgd_step_fp64(const ops::SgdParams& p, std::int64_t step, std::span<double> w, std::span<double> v,
                   std::span<const double> g);
void adam_step_ref(const ops::AdamParams& p, std::int64_t step, std::span<float> w, std::span<float> m,
                   std::span<float> v, std::span<const float> g);
void adam_step_fp64(const ops::AdamParams& p, std::int64_t step, std::span<double> w, std::span<double> m,
                    std::span<double> v, std::span<const double> g);

}  // namespace mpverify::refs
