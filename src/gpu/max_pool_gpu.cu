#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "gpu/check.h"
#include "gpu/device.h"
#include "gpu/device_buffer.h"
#include "gpu/max_pool_gpu.h"
#include "ops/size_check.h"

namespace mpverify::gpu {

namespace {

using detail::DeviceFloats;

__device__ float to_fp16(float v) { return __half2float(__float2half_rn(v)); }

// ops::PoolShape's sizes, computed on the host (its member functions are host code).
struct Dims {
  int n, c, h, w, r, s, stride, pad, out_h, out_w;
};

Dims dims_of(const ops::PoolShape& p) {
  return {p.n, p.c, p.h, p.w, p.r, p.s, p.stride, p.pad, p.out_h(), p.out_w()};
}

// The flat index into x of the winner of window (oh, ow) of plane nc: the
// first candidate in row-major order that is NaN, or else the first greatest.
__device__ std::size_t winner(const float* x, Dims p, std::size_t nc, int oh, int ow) {
  const std::size_t plane = static_cast<std::size_t>(p.h) * p.w;
  bool found = false;
  std::size_t best = 0;
  float best_value = 0.0f;
  for (int i = 0; i < p.r; ++i)
    for (int j = 0; j < p.s; ++j) {
      const int ih = oh * p.stride - p.pad + i, iw = ow * p.stride - p.pad + j;
      if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
      const std::size_t k = nc * plane + static_cast<std::size_t>(ih) * p.w + iw;
      const float v = to_fp16(x[k]);
      if (!found || (!isnan(best_value) && (isnan(v) || v > best_value))) {
        best = k;
        best_value = v;
      }
      found = true;
    }
  return best;
}

__global__ void forward_kernel(const float* x, float* y, Dims p) {
  const std::size_t o = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t per_plane = static_cast<std::size_t>(p.out_h) * p.out_w;
  if (o >= per_plane * p.n * p.c) return;
  const std::size_t nc = o / per_plane;
  const int oh = static_cast<int>(o % per_plane / p.out_w), ow = static_cast<int>(o % p.out_w);
  y[o] = to_fp16(x[winner(x, p, nc, oh, ow)]);
}

__global__ void backward_kernel(const float* x, const float* dy, float* dx, Dims p) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t plane = static_cast<std::size_t>(p.h) * p.w;
  if (k >= plane * p.n * p.c) return;
  const std::size_t nc = k / plane;
  const int ih = static_cast<int>(k % plane / p.w), iw = static_cast<int>(k % p.w);
  // Windows (oh, ow) that cover (ih, iw): oh*stride - pad <= ih <= oh*stride - pad + r - 1.
  const int lo_h = ih + p.pad - p.r + 1, lo_w = iw + p.pad - p.s + 1;
  const int oh_first = lo_h <= 0 ? 0 : (lo_h + p.stride - 1) / p.stride;
  const int ow_first = lo_w <= 0 ? 0 : (lo_w + p.stride - 1) / p.stride;
  const int oh_last = min((ih + p.pad) / p.stride, p.out_h - 1);
  const int ow_last = min((iw + p.pad) / p.stride, p.out_w - 1);
  const std::size_t per_plane = static_cast<std::size_t>(p.out_h) * p.out_w;
  float sum = 0.0f;
  for (int oh = oh_first; oh <= oh_last; ++oh)
    for (int ow = ow_first; ow <= ow_last; ++ow)
      if (winner(x, p, nc, oh, ow) == k)
        sum = __fadd_rn(sum, to_fp16(dy[nc * per_plane + static_cast<std::size_t>(oh) * p.out_w + ow]));
  dx[k] = to_fp16(sum);
}

void require_device() {
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) throw std::runtime_error(reason);
}

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + 255) / 256); }

}  // namespace

void max_pool_gpu(const ops::PoolShape& p, std::span<const float> x, std::span<float> y) {
  p.check_dims("max_pool_gpu");
  ops::check_size("max_pool_gpu", "x", x.size(), p.x_size());
  ops::check_size("max_pool_gpu", "y", y.size(), p.y_size());
  require_device();
  DeviceFloats d_x(x.size()), d_y(y.size());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(d_x.get(), x.data(), x.size_bytes(), cudaMemcpyHostToDevice));
  forward_kernel<<<blocks_for(y.size()), 256>>>(d_x.get(), d_y.get(), dims_of(p));
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(y.data(), d_y.get(), y.size_bytes(), cudaMemcpyDeviceToHost));
}

void max_pool_backward_gpu(const ops::PoolShape& p, std::span<const float> x, std::span<const float> dy,
                           std::span<float> dx) {
  p.check_dims("max_pool_backward_gpu");
  ops::check_size("max_pool_backward_gpu", "x", x.size(), p.x_size());
  ops::check_size("max_pool_backward_gpu", "dy", dy.size(), p.y_size());
  ops::check_size("max_pool_backward_gpu", "dx", dx.size(), p.x_size());
  require_device();
  DeviceFloats d_x(x.size()), d_dy(dy.size()), d_dx(dx.size());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(d_x.get(), x.data(), x.size_bytes(), cudaMemcpyHostToDevice));
  MPVERIFY_CUDA_CHECK(cudaMemcpy(d_dy.get(), dy.data(), dy.size_bytes(), cudaMemcpyHostToDevice));
  backward_kernel<<<blocks_for(dx.size()), 256>>>(d_x.get(), d_dy.get(), d_dx.get(), dims_of(p));
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(dx.data(), d_dx.get(), dx.size_bytes(), cudaMemcpyDeviceToHost));
}

}  // namespace mpverify::gpu
