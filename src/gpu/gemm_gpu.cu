#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "gpu/check.h"
#include "gpu/device.h"
#include "gpu/device_buffer.h"
#include "gpu/gemm_gpu.h"

namespace mpverify::gpu {

namespace {

using detail::DeviceBuffer;

class CublasHandle {
 public:
  CublasHandle() { MPVERIFY_CUBLAS_CHECK(cublasCreate(&h_)); }
  ~CublasHandle() { cublasDestroy(h_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

// One handle per thread, for the thread's life: creating one per call costs
// more than a small GEMM (the library's initialisation), and one handle must
// not serve two threads at once. No call sets state on it (math mode,
// stream, workspace): each GEMM names its compute type.
const CublasHandle& thread_cublas() {
  thread_local const CublasHandle handle;
  return handle;
}

__global__ void to_half(const float* in, __half* out, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(in[i]);
}
__global__ void to_bf16(const float* in, __nv_bfloat16* out, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(in[i]);
}
__global__ void half_to_float(const __half* in, float* out, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __half2float(in[i]);
}

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + 255) / 256); }

// Uploads host floats and converts them to the input type on the device.
void upload(std::span<const float> host, cudaDataType type, void* device_typed, DeviceBuffer& staging) {
  MPVERIFY_CUDA_CHECK(cudaMemcpy(staging.get(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
  const auto* f = static_cast<const float*>(staging.get());
  if (type == CUDA_R_32F) {
    MPVERIFY_CUDA_CHECK(cudaMemcpy(device_typed, f, host.size_bytes(), cudaMemcpyDeviceToDevice));
  } else if (type == CUDA_R_16F) {
    to_half<<<blocks_for(host.size()), 256>>>(f, static_cast<__half*>(device_typed), host.size());
  } else {
    to_bf16<<<blocks_for(host.size()), 256>>>(f, static_cast<__nv_bfloat16*>(device_typed), host.size());
  }
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void gemm_gpu(const ops::GemmShape& s, std::span<const float> a, std::span<const float> b, std::span<float> c,
              GemmCompute compute) {
  s.check(a.size(), b.size(), c.size());
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) throw std::runtime_error(reason);

  cudaDataType input_type = CUDA_R_32F, output_type = CUDA_R_32F;
  cublasComputeType_t compute_type = CUBLAS_COMPUTE_32F;
  switch (compute) {
    case GemmCompute::fp32_pedantic: compute_type = CUBLAS_COMPUTE_32F_PEDANTIC; break;
    case GemmCompute::tf32: compute_type = CUBLAS_COMPUTE_32F_FAST_TF32; break;
    case GemmCompute::fp16_fp32_accumulate: input_type = CUDA_R_16F; break;
    case GemmCompute::fp16_fp16_accumulate:
      input_type = output_type = CUDA_R_16F;
      compute_type = CUBLAS_COMPUTE_16F;
      break;
    case GemmCompute::bf16_fp32_accumulate: input_type = CUDA_R_16BF; break;
  }
  const std::size_t in_bytes = input_type == CUDA_R_32F ? 4 : 2, out_bytes = output_type == CUDA_R_32F ? 4 : 2;
  DeviceBuffer staging(std::max({a.size_bytes(), b.size_bytes(), c.size_bytes()}));
  DeviceBuffer da(a.size() * in_bytes), db(b.size() * in_bytes), dc(c.size() * out_bytes);
  upload(a, input_type, da.get(), staging);
  upload(b, input_type, db.get(), staging);

  // cuBLAS is column-major: the row-major C = op(A) op(B) is the
  // column-major C^T = op(B)^T op(A)^T, so B goes first, and a row-major
  // matrix read column-major is its transpose.
  const CublasHandle& handle = thread_cublas();
  const cublasOperation_t op_b = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = s.transpose_b ? s.k : s.n, lda = s.transpose_a ? s.m : s.k;
  const float alpha32 = 1.0f, beta32 = 0.0f;
  const __half alpha16 = __float2half(1.0f), beta16 = __float2half(0.0f);
  const bool half_scalars = compute_type == CUBLAS_COMPUTE_16F;
  MPVERIFY_CUBLAS_CHECK(cublasGemmEx(handle.get(), op_b, op_a, s.n, s.m, s.k,
                                     half_scalars ? static_cast<const void*>(&alpha16) : &alpha32, db.get(), input_type,
                                     ldb, da.get(), input_type, lda,
                                     half_scalars ? static_cast<const void*>(&beta16) : &beta32, dc.get(), output_type,
                                     s.n, compute_type, CUBLAS_GEMM_DEFAULT));
  if (output_type == CUDA_R_32F) {
    MPVERIFY_CUDA_CHECK(cudaMemcpy(c.data(), dc.get(), c.size_bytes(), cudaMemcpyDeviceToHost));
  } else {
    half_to_float<<<blocks_for(c.size()), 256>>>(static_cast<const __half*>(dc.get()),
                                                  static_cast<float*>(staging.get()), c.size());
    MPVERIFY_CUDA_CHECK(cudaGetLastError());
    MPVERIFY_CUDA_CHECK(cudaMemcpy(c.data(), staging.get(), c.size_bytes(), cudaMemcpyDeviceToHost));
  }
  MPVERIFY_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace mpverify::gpu
