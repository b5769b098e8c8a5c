#include "refs/optimizer_ref.h"

#include <cmath>
#include <stdexcept>
#include <string>

// The whole project compiles with -ffp-contract=off: each `a * b + c` below is
// two float roundings, never one FMA, which is what the FP32 reference means.

namespace mpverify::refs {

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

bool finite(std::initializer_list<double> xs) {
  for (double x : xs)
    if (!std::isfinite(x)) return false;
  return true;
}

void require_size(const char* op, const char* span, std::size_t got, std::size_t n) {
  if (got != n)
    throw std::invalid_argument(std::string(op) + ": " + span + " has " + std::to_string(got) +
                                " elements, w has " + std::to_string(n));
}

}  // namespace

void SgdParams::check() const {
  require(finite({lr, momentum, dampening, weight_decay}), "sgd: hyperparameters must be finite");
  require(lr >= 0, "sgd: invalid learning rate " + std::to_string(lr));
  require(momentum >= 0, "sgd: invalid momentum " + std::to_string(momentum));
  require(weight_decay >= 0, "sgd: invalid weight_decay " + std::to_string(weight_decay));
  require(!nesterov || (momentum > 0 && dampening == 0), "sgd: nesterov momentum requires a momentum and zero dampening");
}

void AdamParams::check() const {
  require(finite({lr, beta1, beta2, eps, weight_decay}), "adam: hyperparameters must be finite");
  require(lr >= 0, "adam: invalid learning rate " + std::to_string(lr));
  require(eps >= 0, "adam: invalid epsilon " + std::to_string(eps));
  require(beta1 >= 0 && beta1 < 1, "adam: invalid beta1 " + std::to_string(beta1));
  require(beta2 >= 0 && beta2 < 1, "adam: invalid beta2 " + std::to_string(beta2));
  require(weight_decay >= 0, "adam: invalid weight_decay " + std::to_string(weight_decay));
}

void check_sgd_sizes(const SgdParams& p, std::int64_t step, std::size_t w, std::size_t v, std::size_t g) {
  p.check();
  require(step >= 1, "sgd: step counts from 1, got " + std::to_string(step));
  require_size("sgd", "g", g, w);
  if (p.momentum != 0 || v != 0) require_size("sgd", "v", v, w);
}

void check_adam_sizes(const AdamParams& p, std::int64_t step, std::size_t w, std::size_t m, std::size_t v, std::size_t g) {
  p.check();
  require(step >= 1, "adam: step counts from 1, got " + std::to_string(step));
  require_size("adam", "g", g, w);
  require_size("adam", "m", m, w);
  require_size("adam", "v", v, w);
}

AdamScalars adam_scalars(const AdamParams& p, std::int64_t t) {
  // As torch/optim/adam.py (_single_tensor_adam) computes them in Python:
  // bias_correction1 = 1 - beta1 ** step, step_size = lr / bias_correction1,
  // bias_correction2_sqrt = sqrt(1 - beta2 ** step). glibc's pow and sqrt are
  // correctly rounded, as CPython's float ** float uses the same pow.
  const double step = static_cast<double>(t);
  AdamScalars s{};
  s.lerp_weight = 1 - p.beta1;
  s.one_minus_beta2 = 1 - p.beta2;
  s.bias_correction2_sqrt = std::sqrt(1 - std::pow(p.beta2, step));
  s.neg_step_size = -(p.lr / (1 - std::pow(p.beta1, step)));
  s.decay_factor = 1 - p.lr * p.weight_decay;
  return s;
}

// ATen's lerp: self + weight * (end - self) for |weight| < 0.5, else
// end - (end - self) * (1 - weight), with 1 - weight in the same precision.
float lerp_fp32(float self, float end, float weight) {
  return std::fabs(weight) < 0.5f ? self + weight * (end - self) : end - (end - self) * (1.0f - weight);
}

double lerp_fp64(double self, double end, double weight) {
  return std::fabs(weight) < 0.5 ? self + weight * (end - self) : end - (end - self) * (1.0 - weight);
}

namespace {

// One SGD step in precision T: the float version takes float-rounded
// hyperparameters (as the kernels take a Python float), the double version
// takes them unrounded.
template <typename T>
void sgd_step(const SgdParams& p, std::int64_t step, std::span<T> w, std::span<T> v, std::span<const T> g) {
  check_sgd_sizes(p, step, w.size(), v.size(), g.size());
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
  if constexpr (std::is_same_v<T, float>) return lerp_fp32(self, end, weight);
  else return lerp_fp64(self, end, weight);
}

template <typename T>
void adam_step(const AdamParams& p, std::int64_t step, std::span<T> w, std::span<T> m, std::span<T> v,
               std::span<const T> g) {
  check_adam_sizes(p, step, w.size(), m.size(), v.size(), g.size());
  const AdamScalars s = adam_scalars(p, step);
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

void sgd_step_ref(const SgdParams& p, std::int64_t step, std::span<float> w, std::span<float> v,
                  std::span<const float> g) {
  sgd_step<float>(p, step, w, v, g);
}

void sgd_step_fp64(const SgdParams& p, std::int64_t step, std::span<double> w, std::span<double> v,
                   std::span<const double> g) {
  sgd_step<double>(p, step, w, v, g);
}

void adam_step_ref(const AdamParams& p, std::int64_t step, std::span<float> w, std::span<float> m,
                   std::span<float> v, std::span<const float> g) {
  adam_step<float>(p, step, w, m, v, g);
}

void adam_step_fp64(const AdamParams& p, std::int64_t step, std::span<double> w, std::span<double> m,
                    std::span<double> v, std::span<const double> g) {
  adam_step<double>(p, step, w, m, v, g);
}

}  // namespace mpverify::refs
