// Without CUDA the GPU max pooling only says why it cannot run.
#ifndef MPVERIFY_WITH_CUDA
#include <stdexcept>

#include "gpu/device.h"
#include "gpu/max_pool_gpu.h"

namespace mpverify::gpu {

void max_pool_gpu(const ops::PoolShape&, std::span<const float>, std::span<float>) {
  throw std::runtime_error(gpu_unavailable_reason());
}

void max_pool_backward_gpu(const ops::PoolShape&, std::span<const float>, std::span<const float>,
                           std::span<float>) {
  throw std::runtime_error(gpu_unavailable_reason());
}

}  // namespace mpverify::gpu
#endif
