// cuBLAS GEMM on device-resident data, for callers that keep tensors on the
// GPU (the GPU benchmark, device-side counting): no copies, no host
// synchronisation, one cuBLAS handle reused across calls. Same shapes,
// layouts and compute modes as gpu::gemm_gpu (gemm_gpu.h).
#pragma once

#include <cstddef>

#include "gpu/gemm_gpu.h"

struct cublasContext;  // cublasHandle_t is cublasContext*

namespace mpverify::gpu {

class DeviceGemm {
 public:
  // Creates the cuBLAS handle; throws std::runtime_error with
  // gpu_unavailable_reason() when no device is usable.
  DeviceGemm();
  ~DeviceGemm();
  DeviceGemm(const DeviceGemm&) = delete;
  DeviceGemm& operator=(const DeviceGemm&) = delete;

  // C = op(A) op(B), row-major, enqueued on the default stream; returns
  // without waiting. a and b hold input_bytes(compute)-sized elements (float
  // for fp32_pedantic and tf32, fp16 for the fp16 computes, bf16 for
  // bf16_fp32_accumulate); c holds output_bytes(compute)-sized elements (float,
  // fp16 for fp16_fp16_accumulate). Throws on a cuBLAS error.
  void run(const ops::GemmShape& shape, const void* a, const void* b, void* c, GemmCompute compute);

 private:
  cublasContext* handle_ = nullptr;
};

std::size_t input_bytes(GemmCompute compute);
std::size_t output_bytes(GemmCompute compute);

}  // namespace mpverify::gpu
