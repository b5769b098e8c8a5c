// The GPU GEMM through cuBLAS (cublasGemmEx), same shape as refs::gemm_ref and
// emu::gemm_emu: row-major float in and out on the host; inputs converted to
// the compute's input type on the device.
#pragma once

#include <span>
#include <string_view>

#include "ops/gemm_shape.h"

namespace mpverify::gpu {

enum class GemmCompute {
  fp32_pedantic,      // fp32 inputs, CUBLAS_COMPUTE_32F_PEDANTIC: SIMT, no tensor cores
  tf32,               // fp32 inputs, CUBLAS_COMPUTE_32F_FAST_TF32: tensor cores on TF32
  fp16_fp32_accumulate,  // fp16 inputs, CUBLAS_COMPUTE_32F: tensor cores, fp32 accumulation, fp32 out
  fp16_fp16_accumulate,  // fp16 inputs, CUBLAS_COMPUTE_16F: fp16 accumulation, fp16 out
  bf16_fp32_accumulate,  // bf16 inputs, CUBLAS_COMPUTE_32F, fp32 out
};
std::string_view to_string(GemmCompute c);

// Throws std::runtime_error with gpu_unavailable_reason() when no device is
// usable, and on any CUDA/cuBLAS error (with file and line).
void gemm_gpu(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b, std::span<float> c,
              GemmCompute compute);

}  // namespace mpverify::gpu
