#include "refs/optimizer_ref.h"

#include <cmath>
#include <type_traits>

#include "ops/lerp.h"

// The whole project compiles with -ffp-contract=off: each `a * b + c` below is
// two float roundings, never one FMA, which is what the FP32 reference means.

namespace mpverify::refs {

namespace {

// One SGD step in precision T: the float version takes float-rounded
// hyperparameters (as the kernels take a Python float), the double version
// takes them unrounded.
template <typename T>
void sgd_step(const ops::SgdParams& p, std::int64_t step, std::span<T> w, std::span<T> v, std::span<const T> g) {
  ops::check_sgd_sizes(p, step, w.size(), v.size(), g.size());
  const T wd = static_cast<T>(p.weight_decay), mu = static_cast<T>(p.momentum),
          keep = static_cast<T>(1 - p.dampening), neg_lr = static_cast<T>(-p.lr);
  for (std::size_t i = 0; i < w.size(); ++i) {
    T grad = g[i];
    if (p.weight_decay != 0) grad = grad + wd * w[i];
    if (p.momentum != 0) {
      const T buf = step == 1 ? grad : mu * v[i] + keep * grad;
      v[i] = buf;
      grad = p.nesterov ? grad + mu * buf : buf;
    }
    w[i] = w[i] + neg_lr * grad;
  }
}

template <typename T>
T lerp(T self, T end, T weight) {
  if constexpr (std::is_same_v<T, float>) return ops::lerp_fp32(self, end, weight);
  else return ops::lerp_fp64(self, end, weight);
}

template <typename T>
void adam_step(const ops::AdamParams& p, std::int64_t step, std::span<T> w, std::span<T> m, std::span<T> v,
               std::span<const T> g) {
  ops::check_adam_sizes(p, step, w.size(), m.size(), v.size(), g.size());
  const ops::AdamScalars s = ops::adam_scalars(p, step);
  const T wd = static_cast<T>(p.weight_decay), decay = static_cast<T>(s.decay_factor),
          a = static_cast<T>(s.lerp_weight), beta2 = static_cast<T>(p.beta2), c2 = static_cast<T>(s.one_minus_beta2),
          bc2 = static_cast<T>(s.bias_correction2_sqrt), eps = static_cast<T>(p.eps),
          neg_step = static_cast<T>(s.neg_step_size);
  const bool decay_w = p.weight_decay != 0 && p.adamw, decay_g = p.weight_decay != 0 && !p.adamw;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (decay_w) w[i] = w[i] * decay;
    T grad = g[i];
    if (decay_g) grad = grad + wd * w[i];
    m[i] = lerp(m[i], grad, a);
    v[i] = beta2 * v[i] + (c2 * grad) * grad;
    const T denom = std::sqrt(v[i]) / bc2 + eps;
    w[i] = w[i] + (neg_step * m[i]) / denom;
  }
}

}  // namespace

void sgd_step_ref(const ops::SgdParams& p, std::int64_t step, std::span<float> w, std::span<float> v,
                  std::span<const float> g) {
  sgd_step<float>(p, step, w, v, g);
}

void sgd_step_fp64(const ops::SgdParams& p, std::int64_t step, std::span<double> w, std::span<double> v,
                   std::span<const double> g) {
  sgd_step<double>(p, step, w, v, g);
}

void adam_step_ref(const ops::AdamParams& p, std::int64_t step, std::span<float> w, std::span<float> m,
                   std::span<float> v, std::span<const float> g) {
  adam_step<float>(p, step, w, m, v, g);
}

void adam_step_fp64(const ops::AdamParams& p, std::int64_t step, std::span<double> w, std::span<double> m,
                    std::span<double> v, std::span<const double> g) {
  adam_step<double>(p, step, w, m, v, g);
}

}  // namespace mpverify::refs
