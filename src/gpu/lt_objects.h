// Owns the cuBLASLt objects of one matmul call (handle, descriptors, layouts, preference), for the GPU
// side's cuBLASLt GEMMs (gemm_fp8_gpu.cu, gemm_lt_gpu.cu). CUDA builds only.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include "gpu/check.h"
#include "gpu/device_buffer.h"

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

// lt's matmul (its op, layouts a, b, c with d = c, alpha 1 and beta 0) on the device operands `a` and `b`
// into `c_device`, with the algorithm cuBLASLt's heuristic ranks first among those needing at most 32 MiB of
// workspace; the result copied into `c_host`. Returns the heuristic's result; `who` names the caller in the
// error when no algorithm exists.
inline cublasLtMatmulHeuristicResult_t matmul_with_first_algorithm(LtObjects& lt, const void* a, const void* b,
                                                                   void* c_device, std::span<float> c_host,
                                                                   const std::string& who) {
  MPVERIFY_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&lt.preference));
  const std::size_t workspace_bytes = std::size_t{32} << 20;
  MPVERIFY_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(lt.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &workspace_bytes, sizeof workspace_bytes));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  MPVERIFY_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt.handle, lt.op, lt.a, lt.b, lt.c, lt.c, lt.preference, 1,
                                                       &heuristic, &found));
  if (found == 0) throw std::runtime_error(who + ": cuBLASLt has no algorithm for this device and shape");
  DeviceBuffer workspace(workspace_bytes);
  const float alpha = 1.0f, beta = 0.0f;
  MPVERIFY_CUBLAS_CHECK(cublasLtMatmul(lt.handle, lt.op, &alpha, a, lt.a, b, lt.b, &beta, c_device, lt.c, c_device,
                                       lt.c, &heuristic.algo, workspace.get(), workspace_bytes, 0));
  MPVERIFY_CUDA_CHECK(cudaMemcpy(c_host.data(), c_device, c_host.size_bytes(), cudaMemcpyDeviceToHost));
  MPVERIFY_CUDA_CHECK(cudaDeviceSynchronize());
  return heuristic;
}

}  // namespace mpverify::gpu::detail
