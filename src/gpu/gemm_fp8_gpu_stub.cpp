// Without CUDA the FP8 GEMM checks its arguments and says why it cannot run.
#ifndef MPVERIFY_WITH_CUDA
#include <stdexcept>

#include "gpu/device.h"
#include "gpu/gemm_fp8_gpu.h"

namespace mpverify::gpu {

void gemm_fp8_gpu(const ops::GemmShape& shape, std::span<const float>, const formats::Format& a_format,
                  std::span<const float>, const formats::Format& b_format, std::span<float>, bool) {
  check_fp8_gemm(shape, a_format, b_format);
  throw std::runtime_error(gpu_unavailable_reason());
}

}  // namespace mpverify::gpu
#endif
