#include "ops/fp64_math.h"

#include <algorithm>
#include <cmath>

#include "ops/gelu_fp64.h"

namespace mpverify::ops {

double activation_fp64(const ActivationParams& p, double x) {
  switch (p.kind) {
    case Activation::relu: return !(x <= 0) ? x : 0.0;  // NaN stays NaN, as torch.relu (clamp_min) keeps it
    case Activation::leaky_relu: return x > 0 ? x : p.negative_slope * x;
    case Activation::tanh: return std::tanh(x);
    // 1 / (1 + e^-x) loses nothing for x >= 0; for x < 0 write it as
    // e^x / (1 + e^x) so that tiny results keep their relative accuracy.
    case Activation::sigmoid: return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
    case Activation::gelu: return gelu_fp64(x);
  }
  return NAN;
}

double activation_derivative_fp64(const ActivationParams& p, double x) {
  switch (p.kind) {
    case Activation::relu: return x > 0 ? 1.0 : 0.0;  // 0 at x = 0, as PyTorch
    case Activation::leaky_relu: return x > 0 ? 1.0 : p.negative_slope;
    // 1 - tanh^2 and s (1 - s) cancel where |x| is large (tanh and s near 1):
    // at x = 14.5, 1 - tanh^2 is 9e-13 and double's tanh leaves it a 1e-4
    // relative error. In e = exp(-2|x|) (resp. exp(-|x|)) nothing cancels:
    // tanh' = 4e / (1 + e)^2, sigmoid' = e / (1 + e)^2, both even in x.
    case Activation::tanh: {
      const double e = std::exp(-2.0 * std::fabs(x));
      return 4.0 * e / ((1.0 + e) * (1.0 + e));
    }
    case Activation::sigmoid: {
      const double e = std::exp(-std::fabs(x));
      return e / ((1.0 + e) * (1.0 + e));
    }
    case Activation::gelu: return gelu_derivative_fp64(x);
  }
  return NAN;
}

namespace {

// A loss's two spans: the same size, and not empty.
void check_pair(std::string_view op, std::string_view a_name, std::size_t a, std::string_view b_name, std::size_t b) {
  check_same_size(op, a_name, a, b_name, b);
  check_not_empty(op, a_name, a);
}

// The row's max and the sum of exp(z - max) over the other elements:
// subtracting the max keeps every exponent <= 0, so nothing overflows, and
// keeping the max's own term (1) apart lets log1p keep logsumexp - max to
// full relative accuracy when the other terms are tiny.
struct RowSoftmax {
  double max = 0, others = 0;
  double sum_exp() const { return 1 + others; }
};

RowSoftmax row_softmax(std::span<const double> z) {
  const auto at = std::max_element(z.begin(), z.end());
  RowSoftmax r{*at, 0.0};
  for (auto it = z.begin(); it != z.end(); ++it)
    if (it != at) r.others += std::exp(*it - r.max);
  return r;
}

}  // namespace

double softmax_cross_entropy_fp64(const SoftmaxCrossEntropyShape& s, std::span<const double> logits,
                                  std::span<const std::int32_t> labels) {
  s.check(logits.size(), labels);
  const auto m = static_cast<std::size_t>(s.classes);
  double total = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const auto z = logits.subspan(i * m, m);
    const RowSoftmax r = row_softmax(z);
    total += std::log1p(r.others) + (r.max - z[static_cast<std::size_t>(labels[i])]);
  }
  return total / s.batch;
}

std::vector<double> softmax_cross_entropy_backward_fp64(const SoftmaxCrossEntropyShape& s,
                                                        std::span<const double> logits,
                                                        std::span<const std::int32_t> labels) {
  s.check(logits.size(), labels);
  const auto m = static_cast<std::size_t>(s.classes);
  std::vector<double> d(logits.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const auto z = logits.subspan(i * m, m);
    const RowSoftmax r = row_softmax(z);
    for (std::size_t j = 0; j < m; ++j) {
      const double p = std::exp(z[j] - r.max) / r.sum_exp();
      d[i * m + j] = (p - (static_cast<std::int32_t>(j) == labels[i] ? 1.0 : 0.0)) / s.batch;
    }
  }
  return d;
}

double mse_fp64(std::span<const double> y, std::span<const double> t) {
  check_pair("mse", "y", y.size(), "t", t.size());
  double total = 0;
  for (std::size_t i = 0; i < y.size(); ++i) total += (y[i] - t[i]) * (y[i] - t[i]);
  return total / static_cast<double>(y.size());
}

std::vector<double> mse_backward_fp64(std::span<const double> y, std::span<const double> t) {
  check_pair("mse", "y", y.size(), "t", t.size());
  std::vector<double> d(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) d[i] = 2 * (y[i] - t[i]) / static_cast<double>(y.size());
  return d;
}

double bce_with_logits_term_fp64(double x, double t) {
  return std::max(x, 0.0) - x * t + std::log1p(std::exp(-std::fabs(x)));
}

double bce_with_logits_derivative_fp64(double x, double t) {
  return activation_fp64({Activation::sigmoid}, x) - t;
}

double bce_with_logits_fp64(std::span<const double> x, std::span<const double> t) {
  check_pair("bce_with_logits", "x", x.size(), "t", t.size());
  check_probability_targets("bce_with_logits", t);
  double total = 0;
  for (std::size_t i = 0; i < x.size(); ++i) total += bce_with_logits_term_fp64(x[i], t[i]);
  return total / static_cast<double>(x.size());
}

std::vector<double> bce_with_logits_backward_fp64(std::span<const double> x, std::span<const double> t) {
  check_pair("bce_with_logits", "x", x.size(), "t", t.size());
  check_probability_targets("bce_with_logits", t);
  std::vector<double> d(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    d[i] = bce_with_logits_derivative_fp64(x[i], t[i]) / static_cast<double>(x.size());
  return d;
}

}  // namespace mpverify::ops
