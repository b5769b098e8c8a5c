// The FP64 math the references and the emulator share: activations and
// their derivatives, and the losses with their gradients, evaluated in double
// in forms that neither overflow nor cancel. refs/ rounds these to float for
// its FP32 references; the emulator measures its rounded results against
// them and builds its error bounds on them (emu/loss_bounds.h). One
// definition keeps the oracle and the bounds on the same values.
//
// The loss functions check their arguments (ops/loss_checks.h); the forward
// returns the mean over the batch or the elements, the backward the gradient
// of that mean with an upstream dloss of 1.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ops/activation_params.h"
#include "ops/loss_checks.h"

namespace mpverify::ops {

// --- activations ----------------------------------------------------------------

// f(x) and f'(x).
double activation_fp64(const ActivationParams& p, double x);
double activation_derivative_fp64(const ActivationParams& p, double x);

// --- softmax with cross-entropy -------------------------------------------------

// loss = (1/b) sum_i (logsumexp(z_i) - z_i[label_i]).
double softmax_cross_entropy_fp64(const SoftmaxCrossEntropyShape& s, std::span<const double> logits,
                                  std::span<const std::int32_t> labels);
// dlogits_ij = (softmax(z_i)_j - [j == label_i]) / b.
std::vector<double> softmax_cross_entropy_backward_fp64(const SoftmaxCrossEntropyShape& s,
                                                        std::span<const double> logits,
                                                        std::span<const std::int32_t> labels);

// --- mean squared error ---------------------------------------------------------

// loss = (1/N) sum (y - t)^2; dy = 2 (y - t) / N.
double mse_fp64(std::span<const double> y, std::span<const double> t);
std::vector<double> mse_backward_fp64(std::span<const double> y, std::span<const double> t);

// --- binary cross-entropy with logits -------------------------------------------

// One element's term in the form PyTorch evaluates, which never overflows:
// max(x, 0) - x t + log1p(exp(-|x|)) (= -t log s(x) - (1 - t) log(1 - s(x))).
double bce_with_logits_term_fp64(double x, double t);
// Its derivative in x: sigmoid(x) - t.
double bce_with_logits_derivative_fp64(double x, double t);
// loss = (1/N) sum of the terms; dx = (sigmoid(x) - t) / N. t in [0, 1].
double bce_with_logits_fp64(std::span<const double> x, std::span<const double> t);
std::vector<double> bce_with_logits_backward_fp64(std::span<const double> x, std::span<const double> t);

}  // namespace mpverify::ops
