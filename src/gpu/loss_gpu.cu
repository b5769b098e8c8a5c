#include <cuda_fp16.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "gpu/check.h"
#include "gpu/device.h"
#include "gpu/device_buffer.h"
#include "gpu/loss_gpu.h"

namespace mpverify::gpu {

namespace {

constexpr unsigned kThreads = 256;  // a power of two: the reduction tree halves it

__device__ float to_fp16(float x) { return __half2float(__float2half_rn(x)); }

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Combines every thread's value in a fixed tree over shared memory: the same
// operations in the same order on every run (no atomics), so the results are
// bitwise reproducible.
template <typename Op>
__device__ float block_reduce(float v, float* shared, Op op) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] = op(shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  const float out = shared[0];
  __syncthreads();  // everyone has read it before `shared` is written again
  return out;
}

struct RowSoftmax {
  float max, sum_exp;
};

// One block per row: the max of the row's m logits (rounded to fp16) and the
// fp32 sum of exp(z - max), each thread summing its strided elements in order.
__device__ RowSoftmax row_softmax(const float* z, unsigned m, float* shared) {
  float local = -INFINITY;
  for (unsigned j = threadIdx.x; j < m; j += kThreads) local = fmaxf(local, to_fp16(z[j]));
  const float max = block_reduce(local, shared, Max{});
  float sum = 0.0f;
  for (unsigned j = threadIdx.x; j < m; j += kThreads) sum += expf(to_fp16(z[j]) - max);
  return {max, block_reduce(sum, shared, Add{})};
}

__global__ void cross_entropy_rows(const float* logits, const std::int32_t* labels, unsigned m, float* row_loss) {
  __shared__ float shared[kThreads];
  const float* z = logits + static_cast<std::size_t>(blockIdx.x) * m;
  const RowSoftmax r = row_softmax(z, m, shared);
  // max - z[label] >= 0 first, as the reference does.
  if (threadIdx.x == 0) row_loss[blockIdx.x] = logf(r.sum_exp) + (r.max - to_fp16(z[labels[blockIdx.x]]));
}

__global__ void cross_entropy_backward(const float* logits, const std::int32_t* labels, unsigned m, float batch,
                                       float* dlogits) {
  __shared__ float shared[kThreads];
  const std::size_t offset = static_cast<std::size_t>(blockIdx.x) * m;
  const RowSoftmax r = row_softmax(logits + offset, m, shared);
  const auto label = static_cast<unsigned>(labels[blockIdx.x]);
  for (unsigned j = threadIdx.x; j < m; j += kThreads) {
    const float p = expf(to_fp16(logits[offset + j]) - r.max) / r.sum_exp;
    dlogits[offset + j] = to_fp16((p - (j == label ? 1.0f : 0.0f)) / batch);
  }
}

// What one element contributes to a mean.
struct RowLoss {  // the rows of cross-entropy, already fp32
  __device__ float operator()(float a, float) const { return a; }
};
struct SquaredError {
  __device__ float operator()(float y, float t) const {
    const float d = to_fp16(y) - t;
    return d * d;
  }
};
struct BceTerm {  // max(x, 0) - x t + log1p(exp(-|x|)): never overflows
  __device__ float operator()(float x, float t) const {
    const float xh = to_fp16(x);
    return fmaxf(xh, 0.0f) - xh * t + log1pf(expf(-fabsf(xh)));
  }
};

// A single block: thread k sums elements k, k + 256, ... in order, then the
// fixed tree; the mean is that sum / (float)n.
template <typename Term>
__global__ void mean_kernel(const float* a, const float* t, std::size_t n, Term term, float* out) {
  __shared__ float shared[kThreads];
  float local = 0.0f;
  for (std::size_t i = threadIdx.x; i < n; i += kThreads) local += term(a[i], t ? t[i] : 0.0f);
  const float sum = block_reduce(local, shared, Add{});
  if (threadIdx.x == 0) *out = sum / static_cast<float>(n);
}

__device__ float sigmoid(float x) { return x >= 0.0f ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x)); }

__global__ void mse_backward_kernel(const float* y, const float* t, std::size_t n, float* dy) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) dy[i] = to_fp16(2.0f * (to_fp16(y[i]) - t[i]) / static_cast<float>(n));
}

__global__ void bce_backward_kernel(const float* x, const float* t, std::size_t n, float* dx) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) dx[i] = to_fp16((sigmoid(to_fp16(x[i])) - t[i]) / static_cast<float>(n));
}

// A device copy of a host array.
template <typename T>
struct DeviceArray : detail::DeviceBuffer {
  explicit DeviceArray(std::size_t n) : detail::DeviceBuffer(n * sizeof(T)) {}
  explicit DeviceArray(std::span<const T> host) : detail::DeviceBuffer(host.size_bytes()) {
    MPVERIFY_CUDA_CHECK(cudaMemcpy(get(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
  }
  T* get() const { return as<T>(); }
  void download(std::span<T> host) const {
    MPVERIFY_CUDA_CHECK(cudaMemcpy(host.data(), get(), host.size_bytes(), cudaMemcpyDeviceToHost));
  }
};

void require_device() {
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) throw std::runtime_error(reason);
}

template <typename Term>
float mean_on_device(const float* a, const float* t, std::size_t n, Term term) {
  DeviceArray<float> out(1);
  mean_kernel<<<1, kThreads>>>(a, t, n, term, out.get());
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  float loss = 0;
  out.download(std::span<float>(&loss, 1));
  return loss;
}

unsigned elementwise_blocks(std::size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

float softmax_cross_entropy_gpu(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                std::span<const std::int32_t> labels) {
  s.check(logits.size(), labels);
  require_device();
  const DeviceArray<float> d_logits(logits);
  const DeviceArray<std::int32_t> d_labels(labels);
  DeviceArray<float> rows(labels.size());
  cross_entropy_rows<<<static_cast<unsigned>(s.batch), kThreads>>>(d_logits.get(), d_labels.get(),
                                                                  static_cast<unsigned>(s.classes), rows.get());
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  return mean_on_device(rows.get(), nullptr, labels.size(), RowLoss{});
}

void softmax_cross_entropy_backward_gpu(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                        std::span<const std::int32_t> labels, std::span<float> dlogits) {
  s.check(logits.size(), labels);
  ops::check_same_size("softmax_cross_entropy_backward", "dlogits", dlogits.size(), "logits", logits.size());
  require_device();
  const DeviceArray<float> d_logits(logits);
  const DeviceArray<std::int32_t> d_labels(labels);
  DeviceArray<float> d_out(dlogits.size());
  cross_entropy_backward<<<static_cast<unsigned>(s.batch), kThreads>>>(
      d_logits.get(), d_labels.get(), static_cast<unsigned>(s.classes), static_cast<float>(s.batch), d_out.get());
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  d_out.download(dlogits);
}

float mse_gpu(std::span<const float> y, std::span<const float> t) {
  ops::check_same_size("mse", "y", y.size(), "t", t.size());
  ops::check_not_empty("mse", "y", y.size());
  require_device();
  const DeviceArray<float> d_y(y), d_t(t);
  return mean_on_device(d_y.get(), d_t.get(), y.size(), SquaredError{});
}

void mse_backward_gpu(std::span<const float> y, std::span<const float> t, std::span<float> dy) {
  ops::check_same_size("mse_backward", "y", y.size(), "t", t.size());
  ops::check_same_size("mse_backward", "dy", dy.size(), "y", y.size());
  ops::check_not_empty("mse_backward", "y", y.size());
  require_device();
  const DeviceArray<float> d_y(y), d_t(t);
  DeviceArray<float> d_out(dy.size());
  mse_backward_kernel<<<elementwise_blocks(y.size()), kThreads>>>(d_y.get(), d_t.get(), y.size(), d_out.get());
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  d_out.download(dy);
}

float bce_with_logits_gpu(std::span<const float> x, std::span<const float> t) {
  ops::check_same_size("bce_with_logits", "x", x.size(), "t", t.size());
  ops::check_not_empty("bce_with_logits", "x", x.size());
  ops::check_probability_targets("bce_with_logits", t);
  require_device();
  const DeviceArray<float> d_x(x), d_t(t);
  return mean_on_device(d_x.get(), d_t.get(), x.size(), BceTerm{});
}

void bce_with_logits_backward_gpu(std::span<const float> x, std::span<const float> t, std::span<float> dx) {
  ops::check_same_size("bce_with_logits_backward", "x", x.size(), "t", t.size());
  ops::check_same_size("bce_with_logits_backward", "dx", dx.size(), "x", x.size());
  ops::check_not_empty("bce_with_logits_backward", "x", x.size());
  ops::check_probability_targets("bce_with_logits_backward", t);
  require_device();
  const DeviceArray<float> d_x(x), d_t(t);
  DeviceArray<float> d_out(dx.size());
  bce_backward_kernel<<<elementwise_blocks(x.size()), kThreads>>>(d_x.get(), d_t.get(), x.size(), d_out.get());
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  d_out.download(dx);
}

}  // namespace mpverify::gpu
