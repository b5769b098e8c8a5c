// Without CUDA the cuBLASLt GEMM only says why it cannot run.
#ifndef MPVERIFY_WITH_CUDA
#include <stdexcept>

#include "gpu/device.h"
#include "gpu/gemm_lt_gpu.h"

namespace mpverify::gpu {

LtAlgorithm gemm_lt_gpu(const ops::GemmShape&, std::span<const float>, std::span<const float>, std::span<float>,
                        GemmCompute) {
  throw std::runtime_error(gpu_unavailable_reason());
}

}  // namespace mpverify::gpu
#endif
