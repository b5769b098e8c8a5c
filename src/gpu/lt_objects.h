// Owns the cuBLASLt objects of one matmul call (handle, descriptors, layouts, preference), for the GPU
// side's cuBLASLt GEMMs (gemm_fp8_gpu.cu, gemm_lt_gpu.cu). CUDA builds only.
#pragma once

#include <cublasLt.h>

namespace mpverify::gpu::detail {

struct LtObjects {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  LtObjects() = default;
  LtObjects(const LtObjects&) = delete;
  LtObjects& operator=(const LtObjects&) = delete;
  ~LtObjects() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
    if (handle) cublasLtDestroy(handle);
  }
};

}  // namespace mpverify::gpu::detail
