// Without CUDA the GPU convolutions only say why they cannot run.
#ifndef MPVERIFY_WITH_CUDA
#include <stdexcept>

#include "gpu/conv2d_gpu.h"
#include "gpu/device.h"

namespace mpverify::gpu {

void conv2d_forward_gpu(const ops::Conv2dShape&, std::span<const float>, std::span<const float>, std::span<float>,
                        ConvCompute) {
  throw std::runtime_error(gpu_unavailable_reason());
}

void conv2d_backward_data_gpu(const ops::Conv2dShape&, std::span<const float>, std::span<const float>, std::span<float>,
                              ConvCompute) {
  throw std::runtime_error(gpu_unavailable_reason());
}

void conv2d_backward_filter_gpu(const ops::Conv2dShape&, std::span<const float>, std::span<const float>,
                                std::span<float>, ConvCompute) {
  throw std::runtime_error(gpu_unavailable_reason());
}

}  // namespace mpverify::gpu
#endif
