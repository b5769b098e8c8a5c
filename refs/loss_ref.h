// Reference losses, forward and backward: softmax with cross-entropy over
// integer class labels, mean squared error, and binary cross-entropy with
// logits. Evaluated in FP64; the float versions round each result once.
// Same signature shape as emu::*_emu and gpu::*_gpu: the forward returns the
// loss (a scalar, the mean over the batch or the elements), the backward
// fills the gradient of that loss with an upstream dloss of 1.
//
// The `_fp64` versions take doubles so that tests can perturb inputs by any
// step (finite differences) or feed inputs already rounded to a format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace mpverify::refs {

// --- checks shared by the three sides (each throws std::invalid_argument) ---

// `a` and `b` must hold the same number of elements; the message names both.
void check_same_size(std::string_view op, std::string_view a_name, std::size_t a, std::string_view b_name,
                     std::size_t b);
// A mean over no element is undefined.
void check_not_empty(std::string_view op, std::string_view name, std::size_t n);
// Targets of binary cross-entropy are probabilities: each in [0, 1]; the
// message names the first index outside (NaN included).
void check_probability_targets(std::string_view op, std::span<const float> t);
void check_probability_targets(std::string_view op, std::span<const double> t);

// --- softmax with cross-entropy ----------------------------------------------

// Logits are batch x classes, row-major; one label per row.
struct SoftmaxCrossEntropyShape {
  int batch = 0;    // b
  int classes = 0;  // m
  std::size_t logits_size() const { return static_cast<std::size_t>(batch) * static_cast<std::size_t>(classes); }
  // Throws std::invalid_argument: batch or classes below 1, logits or labels
  // of the wrong size (named), or the first label outside [0, classes)
  // (its index named).
  void check(std::size_t logits, std::span<const std::int32_t> labels) const;
};

// loss = (1/b) sum_i (logsumexp(z_i) - z_i[label_i]).
double softmax_cross_entropy_fp64(const SoftmaxCrossEntropyShape& s, std::span<const double> logits,
                                  std::span<const std::int32_t> labels);
// dlogits_ij = (softmax(z_i)_j - [j == label_i]) / b.
std::vector<double> softmax_cross_entropy_backward_fp64(const SoftmaxCrossEntropyShape& s,
                                                        std::span<const double> logits,
                                                        std::span<const std::int32_t> labels);
float softmax_cross_entropy_ref(const SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                std::span<const std::int32_t> labels);
void softmax_cross_entropy_backward_ref(const SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                        std::span<const std::int32_t> labels, std::span<float> dlogits);

// --- mean squared error --------------------------------------------------------

// loss = (1/N) sum (y - t)^2; dy = 2 (y - t) / N.
double mse_fp64(std::span<const double> y, std::span<const double> t);
std::vector<double> mse_backward_fp64(std::span<const double> y, std::span<const double> t);
float mse_ref(std::span<const float> y, std::span<const float> t);
void mse_backward_ref(std::span<const float> y, std::span<const float> t, std::span<float> dy);

// --- binary cross-entropy with logits ---------------------------------------------

// One element's term in the form PyTorch evaluates, which never overflows:
// max(x, 0) - x t + log1p(exp(-|x|)) (= -t log s(x) - (1 - t) log(1 - s(x))).
double bce_with_logits_term_fp64(double x, double t);
// Its derivative in x: sigmoid(x) - t.
double bce_with_logits_derivative_fp64(double x, double t);
// loss = (1/N) sum of the terms; dx = (sigmoid(x) - t) / N. t in [0, 1].
double bce_with_logits_fp64(std::span<const double> x, std::span<const double> t);
std::vector<double> bce_with_logits_backward_fp64(std::span<const double> x, std::span<const double> t);
float bce_with_logits_ref(std::span<const float> x, std::span<const float> t);
void bce_with_logits_backward_ref(std::span<const float> x, std::span<const float> t, std::span<float> dx);

}  // namespace mpverify::refs
