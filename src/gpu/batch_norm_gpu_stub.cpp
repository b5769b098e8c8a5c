// Without CUDA the GPU batch normalisation only says why it cannot run.
#ifndef MPVERIFY_WITH_CUDA
#include <stdexcept>

#include "gpu/batch_norm_gpu.h"
#include "gpu/device.h"

namespace mpverify::gpu {

void batch_norm_gpu(const ops::ChannelShape&, const ops::BatchNormParams&, std::span<const float>,
                    std::span<const float>, std::span<const float>, std::span<float>, std::span<float>,
                    std::span<float>, std::span<float>, std::span<float>) {
  throw std::runtime_error(gpu_unavailable_reason());
}

void batch_norm_backward_gpu(const ops::ChannelShape&, std::span<const float>, std::span<const float>,
                             std::span<const float>, std::span<const float>, std::span<const float>,
                             std::span<float>, std::span<float>, std::span<float>) {
  throw std::runtime_error(gpu_unavailable_reason());
}

}  // namespace mpverify::gpu
#endif
