// Emulated row softmax (semantics and the causal mask in refs/softmax_ref.h,
// ops/softmax_shape.h), modelling a kernel with one warp per row that works in
// the accumulation format A (fp32: frameworks compute softmax in fp32 for
// fp16 and bf16 inputs, autocast's softmax and the fused attention kernels
// alike):
//
// forward, per row, over its visible columns, from x rounded to the input format:
//   m = max x (exact: a selection; NaN if any x is NaN)
//   d = fl_A(x - m); e = fl_A(exp(d)) (exp in FP64, rounded once: a
//       correctly rounded expf); sum = the block sum of e in A
//       (emu/block_sum.h, `lanes`)
//   y = fl_out(e / sum), the quotient in double rounded once; masked columns 0.
// backward, from y and dy rounded to the input format:
//   dot = the block sum of dy*y in A (exact products);
//   dx = fl_out(y (dy - dot)) evaluated in double, rounded once; masked 0.
#pragma once

#include <span>

#include "emu/counters.h"
#include "emu/row_reduction.h"
#include "formats/format.h"
#include "ops/softmax_shape.h"

namespace mpverify::emu {

struct SoftmaxPolicy {
  formats::Format input = formats::parse_format("fp16");       // x (forward); y and dy (backward)
  formats::Format output = formats::parse_format("fp16");      // y, dx
  formats::Format accumulate = formats::parse_format("fp32");  // x - max, exp, the sums (A)
  int lanes = kRowReductionLanes;
};

// Sites: "softmax.x" (input rounding), "softmax.shifted" (x - max),
// "softmax.exp", "softmax.sum" (the additions), "softmax.y".
void softmax_emu(const ops::SoftmaxShape& s, std::span<const float> x, std::span<float> y,
                 const SoftmaxPolicy& policy = {}, CounterSet* counters = nullptr);
// Sites: "softmax_backward.y", "softmax_backward.dy" (input rounding),
// "softmax_backward.dot" (the additions), "softmax_backward.dx".
void softmax_backward_emu(const ops::SoftmaxShape& s, std::span<const float> y, std::span<const float> dy,
                          std::span<float> dx, const SoftmaxPolicy& policy = {}, CounterSet* counters = nullptr);

}  // namespace mpverify::emu
