// Without CUDA the GPU losses only say why they cannot run.
#ifndef MPVERIFY_WITH_CUDA
#include <stdexcept>

#include "gpu/device.h"
#include "gpu/loss_gpu.h"

namespace mpverify::gpu {

float softmax_cross_entropy_gpu(const ops::SoftmaxCrossEntropyShape&, std::span<const float>,
                                std::span<const std::int32_t>) {
  throw std::runtime_error(gpu_unavailable_reason());
}

void softmax_cross_entropy_backward_gpu(const ops::SoftmaxCrossEntropyShape&, std::span<const float>,
                                        std::span<const std::int32_t>, std::span<float>) {
  throw std::runtime_error(gpu_unavailable_reason());
}

float mse_gpu(std::span<const float>, std::span<const float>) { throw std::runtime_error(gpu_unavailable_reason()); }

void mse_backward_gpu(std::span<const float>, std::span<const float>, std::span<float>) {
  throw std::runtime_error(gpu_unavailable_reason());
}

float bce_with_logits_gpu(std::span<const float>, std::span<const float>) {
  throw std::runtime_error(gpu_unavailable_reason());
}

void bce_with_logits_backward_gpu(std::span<const float>, std::span<const float>, std::span<float>) {
  throw std::runtime_error(gpu_unavailable_reason());
}

}  // namespace mpverify::gpu
#endif
