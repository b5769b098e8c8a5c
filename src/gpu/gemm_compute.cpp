// Names of the cuBLAS compute modes, with or without CUDA.
#include "gpu/gemm_gpu.h"

namespace mpverify::gpu {

std::string_view to_string(GemmCompute c) {
  switch (c) {
    case GemmCompute::fp32_pedantic: return "fp32-pedantic";
    case GemmCompute::tf32: return "tf32";
    case GemmCompute::fp16_fp32_accumulate: return "fp16-fp32acc";
    case GemmCompute::fp16_fp16_accumulate: return "fp16-fp16acc";
    case GemmCompute::bf16_fp32_accumulate: return "bf16-fp32acc";
  }
  return "?";
}

}  // namespace mpverify::gpu
