#include "emu/optimizer_emu.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/philox.h"
#include "ops/lerp.h"

// The fp32 arithmetic here is the reference's (refs/optimizer_ref.cpp):
// plain float operations, never contracted (-ffp-contract=off everywhere), so
// with fp32 formats the two agree bit for bit. Only the storage differs.

namespace mpverify::emu {

namespace {

// adamw's w * c, rounded once from the exact product (a float times a float is
// exact in double) into the weight format.
void decay_weights(std::span<float> w, float c, const OptimizerPolicy& policy, Counters* counters) {
  const formats::Format& f = policy.weights;
  const bool stochastic = policy.update_rounding == formats::Rounding::stochastic;
  formats::RoundingContext rc{policy.update_rounding};
  Counters local;
  for (std::size_t i = 0; i < w.size(); ++i) {
    float& wi = w[i];
    const double exact = static_cast<double>(wi) * static_cast<double>(c);
    formats::Flags flags;
    if (stochastic) rc.random = formats::stochastic_draw(policy.decay_key.seed, policy.decay_key.stream, i);
    const std::uint32_t bits = formats::from_double(f, exact, rc, flags);
    const float result = formats::to_float(f, bits, flags);
    if (counters) {
      count_rounding(local, f, exact, bits, flags);
      // The decay as an update u = w*c - w: exact - wi in double is non-zero exactly when
      // exact != wi (a difference of distinct doubles never rounds to zero) and finite when exact is.
      count_update(local, wi, exact - static_cast<double>(wi), result);
    }
    wi = result;
  }
  if (counters) *counters += local;
}

// The rounding of the step's write into the weights (OptimizerPolicy::update_rounding).
QuantizeSpec update_spec(const OptimizerPolicy& policy) {
  if (policy.update_rounding == formats::Rounding::nearest_even) return QuantizeSpec{policy.weights};
  if (policy.update_rounding == formats::Rounding::stochastic)
    return stochastic_spec(policy.weights, policy.update_key);
  std::string message = "optimizer step: update_rounding ";
  message += formats::to_string(policy.update_rounding);
  message += " is not offered (rne or stochastic)";
  throw std::invalid_argument(message);
}

void check_update_size(std::span<float> update, std::size_t n) {
  if (!update.empty() && update.size() != n) {
    std::string message = "optimizer step: `update` must be empty or as long as w (";
    message += std::to_string(n);
    message += "), got ";
    message += std::to_string(update.size());
    throw std::invalid_argument(message);
  }
}

}  // namespace

void sgd_step_emu(const ops::SgdParams& p, std::int64_t step, std::span<float> w, std::span<float> v,
                  std::span<const float> g, const OptimizerPolicy& policy, CounterSet* counters,
                  std::span<float> update) {
  ops::check_sgd_sizes(p, step, w.size(), v.size(), g.size());
  check_update_size(update, w.size());
  const QuantizeSpec write = update_spec(policy);
  quantize(w, w, QuantizeSpec{policy.weights}, site_counters(counters, "sgd.w"));
  const std::vector<float> gr = quantized_copy(g, policy.grad, site_counters(counters, "sgd.grad"));
  const float wd = static_cast<float>(p.weight_decay), mu = static_cast<float>(p.momentum),
              keep = static_cast<float>(1 - p.dampening), neg_lr = static_cast<float>(-p.lr);
  const std::size_t n = w.size();
  std::vector<float> grad(n), u(n);
  for (std::size_t i = 0; i < n; ++i) grad[i] = p.weight_decay != 0 ? gr[i] + wd * w[i] : gr[i];
  if (p.momentum != 0) {
    // The buffer is stored (rounded to the state format) before g'' reads it,
    // as PyTorch's grad.add(buf, ...) and `grad = buf` read the stored tensor.
    std::vector<float> buf(n);
    for (std::size_t i = 0; i < n; ++i) buf[i] = step == 1 ? grad[i] : mu * v[i] + keep * grad[i];
    quantize(buf, v, QuantizeSpec{policy.state}, site_counters(counters, "sgd.state"));
    for (std::size_t i = 0; i < n; ++i) grad[i] = p.nesterov ? grad[i] + mu * v[i] : v[i];
  }
  for (std::size_t i = 0; i < n; ++i) u[i] = neg_lr * grad[i];
  if (!update.empty()) std::copy(u.begin(), u.end(), update.begin());
  add_arrays(w, u, w, write, site_counters(counters, "sgd.update"));
}

void adam_step_emu(const ops::AdamParams& p, std::int64_t step, std::span<float> w, std::span<float> m, std::span<float> v,
                   std::span<const float> g, const OptimizerPolicy& policy, CounterSet* counters,
                   std::span<float> update) {
  ops::check_adam_sizes(p, step, w.size(), m.size(), v.size(), g.size());
  check_update_size(update, w.size());
  const QuantizeSpec write = update_spec(policy);
  const ops::AdamScalars s = ops::adam_scalars(p, step);
  const float wd = static_cast<float>(p.weight_decay), a = static_cast<float>(s.lerp_weight),
              beta2 = static_cast<float>(p.beta2), c2 = static_cast<float>(s.one_minus_beta2),
              bc2 = static_cast<float>(s.bias_correction2_sqrt), eps = static_cast<float>(p.eps),
              neg_step = static_cast<float>(s.neg_step_size);
  quantize(w, w, QuantizeSpec{policy.weights}, site_counters(counters, "adam.w"));
  if (p.adamw && p.weight_decay != 0)
    decay_weights(w, static_cast<float>(s.decay_factor), policy, site_counters(counters, "adam.decay"));
  const std::vector<float> gr = quantized_copy(g, policy.grad, site_counters(counters, "adam.grad"));
  const std::size_t n = w.size();
  std::vector<float> m_new(n), v_new(n), u(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float grad = p.weight_decay != 0 && !p.adamw ? gr[i] + wd * w[i] : gr[i];
    m_new[i] = ops::lerp_fp32(m[i], grad, a);
    v_new[i] = beta2 * v[i] + (c2 * grad) * grad;
  }
  quantize(m_new, m, QuantizeSpec{policy.state}, site_counters(counters, "adam.m"));
  quantize(v_new, v, QuantizeSpec{policy.state}, site_counters(counters, "adam.v"));
  for (std::size_t i = 0; i < n; ++i) {
    const float denom = std::sqrt(v[i]) / bc2 + eps;
    u[i] = (neg_step * m[i]) / denom;
  }
  if (!update.empty()) std::copy(u.begin(), u.end(), update.begin());
  add_arrays(w, u, w, write, site_counters(counters, "adam.update"));
}

}  // namespace mpverify::emu
