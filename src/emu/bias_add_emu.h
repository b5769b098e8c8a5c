// Emulated bias add, as an fp16 kernel computes it:
//  forward  y = fl_out(x + b[c]) from x and b rounded to the input format:
//           one rounding of the exact sum (an fp16 __hadd);
//  backward db[c] = fl_out(sum of dy over n, h, w), the sum kept in the
//           accumulation format (fp32 by default, as frameworks keep bias
//           gradients) in the GPU kernel's order: emu/block_sum.h with
//           `lanes` (256, the kernel's block; 1 for a plain running sum).
// dx = dy is the identity and is not computed. Same shape as refs::bias_add_ref.
#pragma once

#include <span>

#include "emu/block_sum.h"
#include "emu/counters.h"
#include "formats/format.h"
#include "ops/channel_shape.h"

namespace mpverify::emu {

struct BiasAddPolicy {
  formats::Format input = formats::parse_format("fp16");         // x, b, dy
  formats::Format output = formats::parse_format("fp16");        // y, db
  formats::Format accumulation = formats::parse_format("fp32");  // db's running sums
  int lanes = kGpuReductionLanes;
};

// Sites: "bias_add.x", "bias_add.b" (input rounding), "bias_add.y" (the
// rounding of x + b, counted as an addition: swamped = b != 0 lost, y == x).
void bias_add_emu(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> b, std::span<float> y,
                  const BiasAddPolicy& policy = {}, CounterSet* counters = nullptr);
// Sites: "bias_add_backward.dy", "bias_add_backward.accumulate" (every
// addition of the block sum; swamping = a lost update), "bias_add_backward.db".
void bias_add_backward_emu(const ops::ChannelShape& s, std::span<const float> dy, std::span<float> db,
                           const BiasAddPolicy& policy = {}, CounterSet* counters = nullptr);

}  // namespace mpverify::emu
