#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "emu/block_sum.h"
#include "gpu/batch_norm_gpu.h"
#include "gpu/block_sum.cuh"
#include "gpu/check.h"
#include "gpu/device.h"
#include "gpu/device_buffer.h"
#include "ops/size_check.h"

namespace mpverify::gpu {

namespace {

constexpr int kLanes = emu::kGpuReductionLanes;

using detail::DeviceFloats;

// ops::ChannelShape's sizes, computed on the host (its member functions are host code).
struct Dims {
  std::size_t m, spatial;
  int channels;
};

__device__ std::size_t at(Dims d, int c, std::size_t i) {
  return (i / d.spatial * static_cast<std::size_t>(d.channels) + static_cast<std::size_t>(c)) * d.spatial +
         i % d.spatial;
}

__device__ float to_fp16(float v) { return __half2float(__float2half_rn(v)); }

__global__ void forward_kernel(const float* x, const float* gamma, const float* beta, float* y, float* mean_out,
                               float* invstd_out, float* running_mean, float* running_var, Dims d, float eps,
                               double momentum, double keep) {
  __shared__ float shared[kLanes];
  const int c = static_cast<int>(blockIdx.x);
  const float m = static_cast<float>(d.m);  // exact: m <= 2^24

  float lane = 0.0f;
  for (std::size_t i = threadIdx.x; i < d.m; i += kLanes) lane = __fadd_rn(lane, to_fp16(x[at(d, c, i)]));
  const float mean = __fdiv_rn(detail::block_tree_sum<kLanes>(lane, shared), m);

  lane = 0.0f;
  for (std::size_t i = threadIdx.x; i < d.m; i += kLanes) {
    const float dev = __fsub_rn(to_fp16(x[at(d, c, i)]), mean);
    lane = __fmaf_rn(dev, dev, lane);
  }
  const float sq = detail::block_tree_sum<kLanes>(lane, shared);
  const float var = __fdiv_rn(sq, m);
  const float invstd = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));

  const float g = gamma[c], b = beta[c];
  for (std::size_t i = threadIdx.x; i < d.m; i += kLanes) {
    const std::size_t k = at(d, c, i);
    const float xhat = __fmul_rn(__fsub_rn(to_fp16(x[k]), mean), invstd);
    y[k] = to_fp16(__fmaf_rn(g, xhat, b));
  }
  if (threadIdx.x == 0) {
    mean_out[c] = mean;
    invstd_out[c] = invstd;
    const double unbiased = __ddiv_rn(static_cast<double>(sq), static_cast<double>(d.m) - 1.0);
    running_mean[c] = __double2float_rn(
        __dadd_rn(__dmul_rn(keep, static_cast<double>(running_mean[c])), __dmul_rn(momentum, static_cast<double>(mean))));
    running_var[c] = __double2float_rn(
        __dadd_rn(__dmul_rn(keep, static_cast<double>(running_var[c])), __dmul_rn(momentum, unbiased)));
  }
}

__global__ void backward_kernel(const float* x, const float* dy, const float* gamma, const float* mean,
                                const float* invstd, float* dx, float* dgamma_out, float* dbeta_out, Dims d) {
  __shared__ float shared[kLanes];
  const int c = static_cast<int>(blockIdx.x);
  const float m = static_cast<float>(d.m);
  const float mu = mean[c], inv = invstd[c];

  float lane_beta = 0.0f, lane_gamma = 0.0f;
  for (std::size_t i = threadIdx.x; i < d.m; i += kLanes) {
    const std::size_t k = at(d, c, i);
    const float g = to_fp16(dy[k]);
    const float xhat = __fmul_rn(__fsub_rn(to_fp16(x[k]), mu), inv);
    lane_beta = __fadd_rn(lane_beta, g);
    lane_gamma = __fmaf_rn(g, xhat, lane_gamma);
  }
  const float dbeta = detail::block_tree_sum<kLanes>(lane_beta, shared);
  const float dgamma = detail::block_tree_sum<kLanes>(lane_gamma, shared);

  const float scale = __fdiv_rn(__fmul_rn(gamma[c], inv), m);
  for (std::size_t i = threadIdx.x; i < d.m; i += kLanes) {
    const std::size_t k = at(d, c, i);
    const float g = to_fp16(dy[k]);
    const float xhat = __fmul_rn(__fsub_rn(to_fp16(x[k]), mu), inv);
    const float bracket = __fsub_rn(__fsub_rn(__fmul_rn(m, g), dbeta), __fmul_rn(xhat, dgamma));
    dx[k] = to_fp16(__fmul_rn(scale, bracket));
  }
  if (threadIdx.x == 0) {
    dgamma_out[c] = dgamma;
    dbeta_out[c] = dbeta;
  }
}

void require_device() {
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) throw std::runtime_error(reason);
}

void upload(DeviceFloats& to, std::span<const float> from) {
  MPVERIFY_CUDA_CHECK(cudaMemcpy(to.get(), from.data(), from.size_bytes(), cudaMemcpyHostToDevice));
}

void download(std::span<float> to, const DeviceFloats& from) {
  MPVERIFY_CUDA_CHECK(cudaMemcpy(to.data(), from.get(), to.size_bytes(), cudaMemcpyDeviceToHost));
}

}  // namespace

void batch_norm_gpu(const ops::ChannelShape& s, const ops::BatchNormParams& p, std::span<const float> x,
                    std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                    std::span<float> mean, std::span<float> invstd, std::span<float> running_mean,
                    std::span<float> running_var) {
  const char* op = "batch_norm_gpu";
  ops::check_batch_norm_shape(s, op);
  const auto c = static_cast<std::size_t>(s.c);
  ops::check_size(op, "x", x.size(), s.size());
  ops::check_size(op, "y", y.size(), s.size());
  ops::check_size(op, "gamma", gamma.size(), c);
  ops::check_size(op, "beta", beta.size(), c);
  ops::check_size(op, "mean", mean.size(), c);
  ops::check_size(op, "invstd", invstd.size(), c);
  ops::check_size(op, "running_mean", running_mean.size(), c);
  ops::check_size(op, "running_var", running_var.size(), c);
  require_device();
  DeviceFloats d_x(x.size()), d_gamma(c), d_beta(c), d_y(y.size()), d_mean(c), d_invstd(c), d_rm(c), d_rv(c);
  upload(d_x, x);
  upload(d_gamma, gamma);
  upload(d_beta, beta);
  upload(d_rm, running_mean);
  upload(d_rv, running_var);
  const Dims d{s.channel_elements(), s.spatial(), s.c};
  forward_kernel<<<static_cast<unsigned>(s.c), kLanes>>>(d_x.get(), d_gamma.get(), d_beta.get(), d_y.get(),
                                                          d_mean.get(), d_invstd.get(), d_rm.get(), d_rv.get(), d,
                                                          static_cast<float>(p.eps), p.momentum, 1.0 - p.momentum);
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  download(y, d_y);
  download(mean, d_mean);
  download(invstd, d_invstd);
  download(running_mean, d_rm);
  download(running_var, d_rv);
}

void batch_norm_backward_gpu(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> dy,
                             std::span<const float> gamma, std::span<const float> mean,
                             std::span<const float> invstd, std::span<float> dx, std::span<float> dgamma,
                             std::span<float> dbeta) {
  const char* op = "batch_norm_backward_gpu";
  ops::check_batch_norm_shape(s, op);
  const auto c = static_cast<std::size_t>(s.c);
  ops::check_size(op, "x", x.size(), s.size());
  ops::check_size(op, "dy", dy.size(), s.size());
  ops::check_size(op, "dx", dx.size(), s.size());
  ops::check_size(op, "gamma", gamma.size(), c);
  ops::check_size(op, "mean", mean.size(), c);
  ops::check_size(op, "invstd", invstd.size(), c);
  ops::check_size(op, "dgamma", dgamma.size(), c);
  ops::check_size(op, "dbeta", dbeta.size(), c);
  require_device();
  DeviceFloats d_x(x.size()), d_dy(dy.size()), d_gamma(c), d_mean(c), d_invstd(c), d_dx(dx.size()), d_dgamma(c),
      d_dbeta(c);
  upload(d_x, x);
  upload(d_dy, dy);
  upload(d_gamma, gamma);
  upload(d_mean, mean);
  upload(d_invstd, invstd);
  const Dims d{s.channel_elements(), s.spatial(), s.c};
  backward_kernel<<<static_cast<unsigned>(s.c), kLanes>>>(d_x.get(), d_dy.get(), d_gamma.get(), d_mean.get(),
                                                           d_invstd.get(), d_dx.get(), d_dgamma.get(),
                                                           d_dbeta.get(), d);
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  download(dx, d_dx);
  download(dgamma, d_dgamma);
  download(dbeta, d_dbeta);
}

}  // namespace mpverify::gpu
