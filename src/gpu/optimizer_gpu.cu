#include <cuda_fp16.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu/check.h"
#include "gpu/device.h"
#include "gpu/device_buffer.h"
#include "gpu/optimizer_gpu.h"

namespace mpverify::gpu {

namespace {

// The hyperparameters as float, rounded on the host exactly as the reference
// rounds them (static_cast<float> of the double Python would compute).
struct SgdConstants {
  float wd, mu, keep, neg_lr;
  bool decay, momentum, nesterov, first;
};

struct AdamConstants {
  float wd, decay, a, beta2, c2, bc2, eps, neg_step;
  bool decay_weights, decay_gradient;
};

__device__ float load(float x) { return x; }
__device__ float load(__half x) { return __half2float(x); }
__device__ void store(float& dst, float x) { dst = x; }
__device__ void store(__half& dst, float x) { dst = __float2half_rn(x); }
// x as the weight storage holds it.
__device__ float stored(const float*, float x) { return x; }
__device__ float stored(const __half*, float x) { return __half2float(__float2half_rn(x)); }

__device__ float gradient(const float* g, std::size_t i, bool fp16) {
  return fp16 ? __half2float(__float2half_rn(g[i])) : g[i];
}

// ATen's lerp (aten/src/ATen/native/Lerp.h), both branches, uncontracted.
__device__ float lerp_rn(float self, float end, float weight) {
  const float d = __fsub_rn(end, self);
  return fabsf(weight) < 0.5f ? __fadd_rn(self, __fmul_rn(weight, d))
                              : __fsub_rn(end, __fmul_rn(d, __fsub_rn(1.0f, weight)));
}

// u (the update, or nullptr): the value added to w, for the caller's
// lost-update statistics.
template <typename W>
__global__ void sgd_kernel(SgdConstants c, W* w, float* v, const float* g, bool grad_fp16, float* u,
                           std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float wi = load(w[i]);
  float grad = gradient(g, i, grad_fp16);
  if (c.decay) grad = __fadd_rn(grad, __fmul_rn(c.wd, wi));
  if (c.momentum) {
    const float buf = c.first ? grad : __fadd_rn(__fmul_rn(c.mu, v[i]), __fmul_rn(c.keep, grad));
    v[i] = buf;
    grad = c.nesterov ? __fadd_rn(grad, __fmul_rn(c.mu, buf)) : buf;
  }
  const float update = __fmul_rn(c.neg_lr, grad);
  if (u != nullptr) u[i] = update;
  store(w[i], __fadd_rn(wi, update));
}

template <typename W>
__global__ void adam_kernel(AdamConstants c, W* w, float* m, float* v, const float* g, bool grad_fp16, float* u,
                            std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float wi = load(w[i]);
  if (c.decay_weights) wi = stored(w, __fmul_rn(wi, c.decay));  // param.mul_(1 - lr * wd), stored
  float grad = gradient(g, i, grad_fp16);
  if (c.decay_gradient) grad = __fadd_rn(grad, __fmul_rn(c.wd, wi));
  const float mi = lerp_rn(m[i], grad, c.a);
  const float vi = __fadd_rn(__fmul_rn(c.beta2, v[i]), __fmul_rn(__fmul_rn(c.c2, grad), grad));
  m[i] = mi;
  v[i] = vi;
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.bc2), c.eps);
  const float update = __fdiv_rn(__fmul_rn(c.neg_step, mi), denom);
  if (u != nullptr) u[i] = update;
  store(w[i], __fadd_rn(wi, update));
}

template <typename T>
struct DeviceArray : detail::DeviceBuffer {
  explicit DeviceArray(std::size_t n) : detail::DeviceBuffer(n * sizeof(T)) {}
  T* get() const { return as<T>(); }
};

void upload(DeviceArray<float>& d, std::span<const float> h) {
  MPVERIFY_CUDA_CHECK(cudaMemcpy(d.get(), h.data(), h.size_bytes(), cudaMemcpyHostToDevice));
}
void download(std::span<float> h, const DeviceArray<float>& d) {
  MPVERIFY_CUDA_CHECK(cudaMemcpy(h.data(), d.get(), h.size_bytes(), cudaMemcpyDeviceToHost));
}

float to_float(float x) { return x; }
float to_float(__half x) { return __half2float(x); }
template <typename W>
W from_float(float x) {
  if constexpr (std::is_same_v<W, __half>) return __float2half_rn(x);
  else return x;
}

// Copies w to the device in storage W, runs launch(device pointer, blocks),
// and copies the updated weights back as floats.
template <typename W, typename Launch>
void with_weights(std::span<float> w, Launch launch) {
  std::vector<W> host(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) host[i] = from_float<W>(w[i]);
  DeviceArray<W> d(w.size());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(d.get(), host.data(), w.size() * sizeof(W), cudaMemcpyHostToDevice));
  const unsigned blocks = static_cast<unsigned>((w.size() + 255) / 256);
  if (blocks > 0) launch(d.get(), blocks);
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(host.data(), d.get(), w.size() * sizeof(W), cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = to_float(host[i]);
}

void require_device() {
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) throw std::runtime_error(reason);
}

}  // namespace

void sgd_step_gpu(const ops::SgdParams& p, std::int64_t step, std::span<float> w, std::span<float> v,
                  std::span<const float> g, const OptimizerStorage& storage, std::span<float> update) {
  ops::check_sgd_sizes(p, step, w.size(), v.size(), g.size());
  check_update_size(update, w.size());
  require_device();
  const std::size_t n = w.size();
  const SgdConstants c{static_cast<float>(p.weight_decay), static_cast<float>(p.momentum),
                       static_cast<float>(1 - p.dampening), static_cast<float>(-p.lr), p.weight_decay != 0,
                       p.momentum != 0, p.nesterov, step == 1};
  DeviceArray<float> d_g(n), d_v(c.momentum ? n : 0), d_u(update.size());
  upload(d_g, g);
  if (c.momentum) upload(d_v, v);
  const bool grad_fp16 = storage.grad == OptimizerStorageFormat::fp16;
  float* u = update.empty() ? nullptr : d_u.get();
  auto launch = [&](auto* d_w, unsigned blocks) {
    sgd_kernel<<<blocks, 256>>>(c, d_w, d_v.get(), d_g.get(), grad_fp16, u, n);
  };
  if (storage.weights == OptimizerStorageFormat::fp16) with_weights<__half>(w, launch);
  else with_weights<float>(w, launch);
  if (c.momentum) download(v, d_v);
  if (!update.empty()) download(update, d_u);
}

void adam_step_gpu(const ops::AdamParams& p, std::int64_t step, std::span<float> w, std::span<float> m,
                   std::span<float> v, std::span<const float> g, const OptimizerStorage& storage,
                   std::span<float> update) {
  ops::check_adam_sizes(p, step, w.size(), m.size(), v.size(), g.size());
  check_update_size(update, w.size());
  require_device();
  const std::size_t n = w.size();
  const ops::AdamScalars s = ops::adam_scalars(p, step);
  const AdamConstants c{static_cast<float>(p.weight_decay),
                        static_cast<float>(s.decay_factor),
                        static_cast<float>(s.lerp_weight),
                        static_cast<float>(p.beta2),
                        static_cast<float>(s.one_minus_beta2),
                        static_cast<float>(s.bias_correction2_sqrt),
                        static_cast<float>(p.eps),
                        static_cast<float>(s.neg_step_size),
                        p.adamw && p.weight_decay != 0,
                        !p.adamw && p.weight_decay != 0};
  DeviceArray<float> d_g(n), d_m(n), d_v(n), d_u(update.size());
  upload(d_g, g);
  upload(d_m, m);
  upload(d_v, v);
  const bool grad_fp16 = storage.grad == OptimizerStorageFormat::fp16;
  float* u = update.empty() ? nullptr : d_u.get();
  auto launch = [&](auto* d_w, unsigned blocks) {
    adam_kernel<<<blocks, 256>>>(c, d_w, d_m.get(), d_v.get(), d_g.get(), grad_fp16, u, n);
  };
  if (storage.weights == OptimizerStorageFormat::fp16) with_weights<__half>(w, launch);
  else with_weights<float>(w, launch);
  download(m, d_m);
  download(v, d_v);
  if (!update.empty()) download(update, d_u);
}

}  // namespace mpverify::gpu
