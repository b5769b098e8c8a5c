// The losses as CUDA kernels, same shape as refs::*_ref: host floats in, the
// loss (a float) or the gradient out. Inside, as a framework's fp32 loss
// kernel under autocast: the logits / predictions are rounded to fp16
// (__float2half_rn), targets stay fp32, the math is fp32 with CUDA's accurate
// expf / logf / log1pf (no fast-math), and each gradient element is rounded
// to fp16. Softmax runs one thread block per row; the means are a single
// block's reduction in a fixed order, so reruns are bitwise identical.
// Inputs are checked as the reference checks them (std::invalid_argument).
#pragma once

#include <cstdint>
#include <span>

#include "ops/loss_checks.h"

namespace mpverify::gpu {

// Each throws std::runtime_error with gpu_unavailable_reason() without a device.
float softmax_cross_entropy_gpu(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                std::span<const std::int32_t> labels);
void softmax_cross_entropy_backward_gpu(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                        std::span<const std::int32_t> labels, std::span<float> dlogits);
float mse_gpu(std::span<const float> y, std::span<const float> t);
void mse_backward_gpu(std::span<const float> y, std::span<const float> t, std::span<float> dy);
float bce_with_logits_gpu(std::span<const float> x, std::span<const float> t);
void bce_with_logits_backward_gpu(std::span<const float> x, std::span<const float> t, std::span<float> dx);

}  // namespace mpverify::gpu
