// Activations as CUDA kernels, same shape as refs::activation_ref: host float
// in and out; inside, the input is rounded to fp16, f (or f' * dy) computed in
// fp32 with CUDA's accurate math (tanhf, expf; no fast-math), and the result
// rounded to fp16 (__float2half_rn), as framework fp16 kernels do.
#pragma once

#include <span>
#include <stdexcept>

#include "ops/activation_params.h"

namespace mpverify::gpu {

// Throws std::runtime_error with gpu_unavailable_reason() without a device,
// and std::invalid_argument for gelu, which has no kernel yet (refuse_gelu).
void activation_gpu(const ops::ActivationParams& p, std::span<const float> x, std::span<float> y);
void activation_backward_gpu(const ops::ActivationParams& p, std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx);

// Throws std::invalid_argument for gelu: the kernels are relu, leaky-relu,
// tanh and sigmoid. Called first by both of the above, with or without CUDA.
inline void refuse_gelu(const ops::ActivationParams& p) {
  if (p.kind == ops::Activation::gelu)
    throw std::invalid_argument("gpu activation kernels: no gelu kernel yet (relu, leaky-relu, tanh, sigmoid only)");
}

}  // namespace mpverify::gpu
