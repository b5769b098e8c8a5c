// Reference losses, forward and backward: softmax with cross-entropy over
// integer class labels, mean squared error, and binary cross-entropy with
// logits. Evaluated in FP64; the float versions round each result once.
// Same signature shape as emu::*_emu and gpu::*_gpu: the forward returns the
// loss (a scalar, the mean over the batch or the elements), the backward
// fills the gradient of that loss with an upstream dloss of 1.
//
// The FP64 losses they round (the `_fp64` functions, which take doubles so
// that tests can perturb inputs by any step or feed inputs already rounded to
// a format) are in ops/fp64_math.h, shared with the emulator.
#pragma once

#include <cstdint>
#include <span>

#include "ops/loss_checks.h"

namespace mpverify::refs {

// --- softmax with cross-entropy ----------------------------------------------

float softmax_cross_entropy_ref(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                std::span<const std::int32_t> labels);
void softmax_cross_entropy_backward_ref(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                        std::span<const std::int32_t> labels, std::span<float> dlogits);

// --- mean squared error --------------------------------------------------------

float mse_ref(std::span<const float> y, std::span<const float> t);
void mse_backward_ref(std::span<const float> y, std::span<const float> t, std::span<float> dy);

// --- binary cross-entropy with logits ---------------------------------------------

float bce_with_logits_ref(std::span<const float> x, std::span<const float> t);
void bce_with_logits_backward_ref(std::span<const float> x, std::span<const float> t, std::span<float> dx);

}  // namespace mpverify::refs
