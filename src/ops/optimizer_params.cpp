#include "ops/optimizer_params.h"

#include <cmath>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace mpverify::ops {

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

}  // namespace mpverify::ops
