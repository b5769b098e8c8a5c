#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "gpu/activation_gpu.h"
#include "gpu/check.h"
#include "gpu/device.h"
#include "gpu/device_buffer.h"

namespace mpverify::gpu {

namespace {

__device__ float forward(ops::Activation kind, float slope, float x) {
  switch (kind) {
    case ops::Activation::relu: return !(x <= 0.0f) ? x : 0.0f;  // NaN stays NaN, as torch.relu
    case ops::Activation::leaky_relu: return x > 0.0f ? x : slope * x;
    case ops::Activation::tanh: return tanhf(x);
    case ops::Activation::sigmoid: return x >= 0.0f ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
    case ops::Activation::gelu: break;  // no kernel: refuse_gelu stops it on the host
  }
  return 0.0f;
}

__device__ float derivative(ops::Activation kind, float slope, float x) {
  switch (kind) {
    case ops::Activation::relu: return x > 0.0f ? 1.0f : 0.0f;
    case ops::Activation::leaky_relu: return x > 0.0f ? 1.0f : slope;
    // The forms of ops::activation_derivative_fp64, in which nothing
    // cancels (1 - tanhf(x)^2 in float is hundreds of fp16 ulps off at x = 8).
    case ops::Activation::tanh: {
      const float e = expf(-2.0f * fabsf(x));
      return 4.0f * e / ((1.0f + e) * (1.0f + e));
    }
    case ops::Activation::sigmoid: {
      const float e = expf(-fabsf(x));
      return e / ((1.0f + e) * (1.0f + e));
    }
    case ops::Activation::gelu: break;  // no kernel: refuse_gelu stops it on the host
  }
  return 0.0f;
}

__global__ void forward_kernel(ops::Activation kind, float slope, const float* x, float* y, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float xh = __half2float(__float2half_rn(x[i]));
  y[i] = __half2float(__float2half_rn(forward(kind, slope, xh)));
}

__global__ void backward_kernel(ops::Activation kind, float slope, const float* x, const float* dy, float* dx,
                                std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float xh = __half2float(__float2half_rn(x[i]));
  const float dyh = __half2float(__float2half_rn(dy[i]));
  dx[i] = __half2float(__float2half_rn(derivative(kind, slope, xh) * dyh));
}

using detail::DeviceFloats;

void require_device(std::size_t a, std::size_t b) {
  if (a != b) throw std::invalid_argument("activation_gpu: sizes differ (" + std::to_string(a) + " vs " + std::to_string(b) + ")");
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) throw std::runtime_error(reason);
}

}  // namespace

void activation_gpu(const ops::ActivationParams& p, std::span<const float> x, std::span<float> y) {
  refuse_gelu(p);
  require_device(x.size(), y.size());
  DeviceFloats dx(x.size()), dy(y.size());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), x.size_bytes(), cudaMemcpyHostToDevice));
  const unsigned blocks = static_cast<unsigned>((x.size() + 255) / 256);
  if (blocks > 0) forward_kernel<<<blocks, 256>>>(p.kind, static_cast<float>(p.negative_slope), dx.get(), dy.get(), x.size());
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(y.data(), dy.get(), y.size_bytes(), cudaMemcpyDeviceToHost));
}

void activation_backward_gpu(const ops::ActivationParams& p, std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx) {
  refuse_gelu(p);
  require_device(x.size(), dy.size());
  require_device(x.size(), dx.size());
  DeviceFloats d_x(x.size()), d_dy(dy.size()), d_dx(dx.size());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(d_x.get(), x.data(), x.size_bytes(), cudaMemcpyHostToDevice));
  MPVERIFY_CUDA_CHECK(cudaMemcpy(d_dy.get(), dy.data(), dy.size_bytes(), cudaMemcpyHostToDevice));
  const unsigned blocks = static_cast<unsigned>((x.size() + 255) / 256);
  if (blocks > 0)
    backward_kernel<<<blocks, 256>>>(p.kind, static_cast<float>(p.negative_slope), d_x.get(), d_dy.get(), d_dx.get(),
                                     x.size());
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(dx.data(), d_dx.get(), dx.size_bytes(), cudaMemcpyDeviceToHost));
}

}  // namespace mpverify::gpu
