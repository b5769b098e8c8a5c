// Without CUDA the GPU activations only say why they cannot run.
#ifndef MPVERIFY_WITH_CUDA
#include <stdexcept>

#include "gpu/activation_gpu.h"
#include "gpu/device.h"

namespace mpverify::gpu {

void activation_gpu(const ops::ActivationParams& p, std::span<const float>, std::span<float>) {
  refuse_gelu(p);
  throw std::runtime_error(gpu_unavailable_reason());
}

void activation_backward_gpu(const ops::ActivationParams& p, std::span<const float>, std::span<const float>,
                             std::span<float>) {
  refuse_gelu(p);
  throw std::runtime_error(gpu_unavailable_reason());
}

}  // namespace mpverify::gpu
#endif
