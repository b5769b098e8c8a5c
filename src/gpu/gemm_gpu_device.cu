#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "gpu/check.h"
#include "gpu/device.h"
#include "gpu/gemm_gpu_device.h"

namespace mpverify::gpu {

namespace {

struct ComputeTypes {
  cudaDataType input = CUDA_R_32F;
  cudaDataType output = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};

// The same choices as gemm_gpu (gemm_gpu.cu).
ComputeTypes types_of(GemmCompute c) {
  ComputeTypes t;
  switch (c) {
    case GemmCompute::fp32_pedantic: t.compute = CUBLAS_COMPUTE_32F_PEDANTIC; break;
    case GemmCompute::tf32: t.compute = CUBLAS_COMPUTE_32F_FAST_TF32; break;
    case GemmCompute::fp16_fp32_accumulate: t.input = CUDA_R_16F; break;
    case GemmCompute::fp16_fp16_accumulate:
      t.input = t.output = CUDA_R_16F;
      t.compute = CUBLAS_COMPUTE_16F;
      break;
    case GemmCompute::bf16_fp32_accumulate: t.input = CUDA_R_16BF; break;
  }
  return t;
}

}  // namespace

std::size_t input_bytes(GemmCompute c) { return types_of(c).input == CUDA_R_32F ? 4 : 2; }
std::size_t output_bytes(GemmCompute c) { return types_of(c).output == CUDA_R_32F ? 4 : 2; }

DeviceGemm::DeviceGemm() {
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) throw std::runtime_error(reason);
  MPVERIFY_CUBLAS_CHECK(cublasCreate(&handle_));
}

DeviceGemm::~DeviceGemm() { cublasDestroy(handle_); }

void DeviceGemm::run(const ops::GemmShape& s, const void* a, const void* b, void* c, GemmCompute compute) {
  const ComputeTypes t = types_of(compute);
  // cuBLAS is column-major: the row-major C = op(A) op(B) is the column-major
  // C^T = op(B)^T op(A)^T, so B goes first (as in gemm_gpu).
  const cublasOperation_t op_b = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = s.transpose_b ? s.k : s.n, lda = s.transpose_a ? s.m : s.k;
  const float alpha32 = 1.0f, beta32 = 0.0f;
  const __half alpha16 = __float2half(1.0f), beta16 = __float2half(0.0f);
  const bool half_scalars = t.compute == CUBLAS_COMPUTE_16F;
  MPVERIFY_CUBLAS_CHECK(cublasGemmEx(handle_, op_b, op_a, s.n, s.m, s.k,
                                     half_scalars ? static_cast<const void*>(&alpha16) : &alpha32, b, t.input, ldb, a,
                                     t.input, lda, half_scalars ? static_cast<const void*>(&beta16) : &beta32, c,
                                     t.output, s.n, t.compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace mpverify::gpu
