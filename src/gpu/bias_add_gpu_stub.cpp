// Without CUDA the GPU bias add only says why it cannot run.
#ifndef MPVERIFY_WITH_CUDA
#include <stdexcept>

#include "gpu/bias_add_gpu.h"
#include "gpu/device.h"

namespace mpverify::gpu {

void bias_add_gpu(const ops::ChannelShape&, std::span<const float>, std::span<const float>, std::span<float>) {
  throw std::runtime_error(gpu_unavailable_reason());
}

void bias_add_backward_gpu(const ops::ChannelShape&, std::span<const float>, std::span<float>) {
  throw std::runtime_error(gpu_unavailable_reason());
}

}  // namespace mpverify::gpu
#endif
