// Emulated losses: what a framework's fp32 loss kernel computes on the fp16
// logits or predictions that autocast hands it, with every rounding counted.
//
// The model, for each loss:
//  1. the logits / predictions are rounded to the policy's input format
//     (fp16 by default; counted at "<op>.logits", ".y" or ".x"). Class
//     labels are integers; the float targets are used exactly as given
//     (frameworks keep them in fp32);
//  2. exp, log, log1p and the element terms are evaluated exactly (in double)
//     on the rounded inputs: the kernel's fp32 math, were it exact;
//  3. the reductions are running sums in the accumulation format (fp32 by
//     default, as frameworks keep losses and softmax; fp16 shows what a
//     half-precision running sum would do), each addition rounded once
//     (emu::Accumulator): the sum of exp(z - max) of each softmax row
//     (".sum_exp"), and the sum behind each mean (".batch_sum" for the rows
//     of cross-entropy, ".sum" for the elements of MSE and BCE). The row max
//     is a comparison, exact in any format;
//  4. the loss is that sum divided by its count, rounded once to fp32
//     (".loss"); each gradient element is evaluated exactly from the rounded
//     inputs (and, for softmax, the accumulated row sum) and rounded once to
//     the output format (fp16 by default, an fp16 model's gradient;
//     ".dlogits", ".dy", ".dx"). The upstream dloss is 1.
// A backward call's sites carry "_backward" (e.g. "mse_backward.dy"), so a
// forward and a backward counted into one CounterSet stay apart. Counting is
// off when `counters` is null.
#pragma once

#include <cstdint>
#include <span>

#include "emu/counters.h"
#include "formats/format.h"
#include "ops/loss_checks.h"

namespace mpverify::emu {

struct LossPolicy {
  formats::Format input = formats::parse_format("fp16");       // logits / predictions
  formats::Format accumulate = formats::parse_format("fp32");  // row sums of exp, the sums behind the means
  formats::Format output = formats::parse_format("fp16");      // the gradient (the loss itself is fp32)
};

// Sites: "softmax_cross_entropy.logits", ".sum_exp", ".batch_sum", ".loss".
float softmax_cross_entropy_emu(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                std::span<const std::int32_t> labels, const LossPolicy& policy,
                                CounterSet* counters = nullptr);
// Sites: "softmax_cross_entropy_backward.logits", ".sum_exp", ".dlogits".
void softmax_cross_entropy_backward_emu(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                        std::span<const std::int32_t> labels, std::span<float> dlogits,
                                        const LossPolicy& policy, CounterSet* counters = nullptr);

// Sites: "mse.y", "mse.sum", "mse.loss".
float mse_emu(std::span<const float> y, std::span<const float> t, const LossPolicy& policy,
              CounterSet* counters = nullptr);
// Sites: "mse_backward.y", "mse_backward.dy".
void mse_backward_emu(std::span<const float> y, std::span<const float> t, std::span<float> dy,
                      const LossPolicy& policy, CounterSet* counters = nullptr);

// Sites: "bce_with_logits.x", "bce_with_logits.sum", "bce_with_logits.loss". t in [0, 1].
float bce_with_logits_emu(std::span<const float> x, std::span<const float> t, const LossPolicy& policy,
                          CounterSet* counters = nullptr);
// Sites: "bce_with_logits_backward.x", "bce_with_logits_backward.dx".
void bce_with_logits_backward_emu(std::span<const float> x, std::span<const float> t, std::span<float> dx,
                                  const LossPolicy& policy, CounterSet* counters = nullptr);

}  // namespace mpverify::emu
