#include "loss_ref.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "activation_ref.h"

namespace mpverify::refs {

namespace {

std::string prefix(std::string_view op) {
  std::string s(op);
  s += ": ";
  return s;
}

std::vector<double> widen(std::span<const float> v) { return {v.begin(), v.end()}; }

template <typename T>
void check_probabilities(std::string_view op, std::span<const T> t) {
  for (std::size_t i = 0; i < t.size(); ++i)
    if (!(t[i] >= 0 && t[i] <= 1)) {
      std::string msg = prefix(op);
      msg += "target t[" + std::to_string(i) + "] = " + std::to_string(static_cast<double>(t[i]));
      msg += " is not a probability in [0, 1]";
      throw std::invalid_argument(msg);
    }
}

void check_pair(std::string_view op, std::string_view a_name, std::size_t a, std::string_view b_name, std::size_t b) {
  check_same_size(op, a_name, a, b_name, b);
  check_not_empty(op, a_name, a);
}

}  // namespace

void check_same_size(std::string_view op, std::string_view a_name, std::size_t a, std::string_view b_name,
                     std::size_t b) {
  if (a == b) return;
  std::string msg = prefix(op);
  msg += std::string(a_name) + " has " + std::to_string(a) + " elements but " + std::string(b_name) + " has " +
         std::to_string(b);
  throw std::invalid_argument(msg);
}

void check_not_empty(std::string_view op, std::string_view name, std::size_t n) {
  if (n > 0) return;
  std::string msg = prefix(op);
  msg += std::string(name) + " is empty: the mean over no element is undefined";
  throw std::invalid_argument(msg);
}

void check_probability_targets(std::string_view op, std::span<const float> t) { check_probabilities(op, t); }
void check_probability_targets(std::string_view op, std::span<const double> t) { check_probabilities(op, t); }

// --- softmax with cross-entropy ----------------------------------------------

void SoftmaxCrossEntropyShape::check(std::size_t logits, std::span<const std::int32_t> labels) const {
  const std::string_view op = "softmax_cross_entropy";
  if (batch < 1 || classes < 1) {
    std::string msg = prefix(op);
    msg += "batch and classes must be at least 1 (got " + std::to_string(batch) + " x " + std::to_string(classes) + ")";
    throw std::invalid_argument(msg);
  }
  check_same_size(op, "logits", logits, "batch x classes", logits_size());
  check_same_size(op, "labels", labels.size(), "batch", static_cast<std::size_t>(batch));
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0 || labels[i] >= classes) {
      std::string msg = prefix(op);
      msg += "labels[" + std::to_string(i) + "] = " + std::to_string(labels[i]) + " is outside [0, " +
             std::to_string(classes) + ")";
      throw std::invalid_argument(msg);
    }
}

namespace {

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

float softmax_cross_entropy_ref(const SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                std::span<const std::int32_t> labels) {
  return static_cast<float>(softmax_cross_entropy_fp64(s, widen(logits), labels));
}

void softmax_cross_entropy_backward_ref(const SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                        std::span<const std::int32_t> labels, std::span<float> dlogits) {
  s.check(logits.size(), labels);
  check_same_size("softmax_cross_entropy", "dlogits", dlogits.size(), "logits", logits.size());
  const auto d = softmax_cross_entropy_backward_fp64(s, widen(logits), labels);
  std::transform(d.begin(), d.end(), dlogits.begin(), [](double v) { return static_cast<float>(v); });
}

// --- mean squared error --------------------------------------------------------

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

float mse_ref(std::span<const float> y, std::span<const float> t) {
  return static_cast<float>(mse_fp64(widen(y), widen(t)));
}

void mse_backward_ref(std::span<const float> y, std::span<const float> t, std::span<float> dy) {
  check_same_size("mse", "dy", dy.size(), "y", y.size());
  const auto d = mse_backward_fp64(widen(y), widen(t));
  std::transform(d.begin(), d.end(), dy.begin(), [](double v) { return static_cast<float>(v); });
}

// --- binary cross-entropy with logits ---------------------------------------------

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

float bce_with_logits_ref(std::span<const float> x, std::span<const float> t) {
  return static_cast<float>(bce_with_logits_fp64(widen(x), widen(t)));
}

void bce_with_logits_backward_ref(std::span<const float> x, std::span<const float> t, std::span<float> dx) {
  check_same_size("bce_with_logits", "dx", dx.size(), "x", x.size());
  const auto d = bce_with_logits_backward_fp64(widen(x), widen(t));
  std::transform(d.begin(), d.end(), dx.begin(), [](double v) { return static_cast<float>(v); });
}

}  // namespace mpverify::refs
