// Without CUDA the GPU GEMM only says why it cannot run.
#ifndef MPVERIFY_WITH_CUDA
#include <stdexcept>

#include "gpu/device.h"
#include "gpu/gemm_gpu.h"

namespace mpverify::gpu {

void gemm_gpu(const ops::GemmShape&, std::span<const float>, std::span<const float>, std::span<float>, GemmCompute) {
  throw std::runtime_error(gpu_unavailable_reason());
}

}  // namespace mpverify::gpu
#endif
