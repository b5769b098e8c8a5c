#include "ops/loss_checks.h"

#include <stdexcept>
#include <string>

namespace mpverify::ops {

namespace {

std::string prefix(std::string_view op) {
  std::string s(op);
  s += ": ";
  return s;
}

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

}  // namespace mpverify::ops
