#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "emu/block_sum.h"
#include "gpu/bias_add_gpu.h"
#include "gpu/block_sum.cuh"
#include "gpu/check.h"
#include "gpu/device.h"
#include "gpu/device_buffer.h"
#include "ops/size_check.h"

namespace mpverify::gpu {

namespace {

constexpr int kLanes = emu::kGpuReductionLanes;

using detail::DeviceFloats;

__device__ float to_fp16(float v) { return __half2float(__float2half_rn(v)); }

__global__ void forward_kernel(const float* x, const float* b, float* y, std::size_t size, std::size_t spatial,
                               int channels) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k >= size) return;
  const int c = static_cast<int>(k / spatial % static_cast<std::size_t>(channels));
  y[k] = __half2float(__hadd(__float2half_rn(x[k]), __float2half_rn(b[c])));
}

// One block per channel; element i of the channel (order n, then h*w).
__global__ void backward_kernel(const float* dy, float* db, std::size_t m, std::size_t spatial, int channels) {
  __shared__ float shared[kLanes];
  const int c = static_cast<int>(blockIdx.x);
  float lane = 0.0f;
  for (std::size_t i = threadIdx.x; i < m; i += kLanes) {
    const std::size_t k = (i / spatial * static_cast<std::size_t>(channels) + c) * spatial + i % spatial;
    lane = __fadd_rn(lane, to_fp16(dy[k]));
  }
  const float total = detail::block_tree_sum<kLanes>(lane, shared);
  if (threadIdx.x == 0) db[c] = to_fp16(total);
}

void require_device() {
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) throw std::runtime_error(reason);
}

}  // namespace

void bias_add_gpu(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> b, std::span<float> y) {
  s.check_dims("bias_add_gpu");
  ops::check_size("bias_add_gpu", "x", x.size(), s.size());
  ops::check_size("bias_add_gpu", "b", b.size(), static_cast<std::size_t>(s.c));
  ops::check_size("bias_add_gpu", "y", y.size(), s.size());
  require_device();
  DeviceFloats d_x(x.size()), d_b(b.size()), d_y(y.size());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(d_x.get(), x.data(), x.size_bytes(), cudaMemcpyHostToDevice));
  MPVERIFY_CUDA_CHECK(cudaMemcpy(d_b.get(), b.data(), b.size_bytes(), cudaMemcpyHostToDevice));
  const unsigned blocks = static_cast<unsigned>((x.size() + 255) / 256);
  forward_kernel<<<blocks, 256>>>(d_x.get(), d_b.get(), d_y.get(), x.size(), s.spatial(), s.c);
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(y.data(), d_y.get(), y.size_bytes(), cudaMemcpyDeviceToHost));
}

void bias_add_backward_gpu(const ops::ChannelShape& s, std::span<const float> dy, std::span<float> db) {
  s.check_dims("bias_add_backward_gpu");
  ops::check_size("bias_add_backward_gpu", "dy", dy.size(), s.size());
  ops::check_size("bias_add_backward_gpu", "db", db.size(), static_cast<std::size_t>(s.c));
  require_device();
  DeviceFloats d_dy(dy.size()), d_db(db.size());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(d_dy.get(), dy.data(), dy.size_bytes(), cudaMemcpyHostToDevice));
  backward_kernel<<<static_cast<unsigned>(s.c), kLanes>>>(d_dy.get(), d_db.get(), s.channel_elements(), s.spatial(),
                                                           s.c);
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(db.data(), d_db.get(), db.size_bytes(), cudaMemcpyDeviceToHost));
}

}  // namespace mpverify::gpu
