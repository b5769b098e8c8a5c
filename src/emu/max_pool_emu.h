// Emulated 2D max pooling (semantics in ops/max_pool_argmax.h):
//  forward  x rounded to the input format, the winner of each window selected
//           (exact), then rounded to the output format (exact when the output
//           format holds the input format's values: rounding is monotonic, so
//           it commutes with max);
//  backward each input element sums the dy of the windows it wins, in
//           row-major window order, in the accumulation format (fp32 by
//           default), then one rounding to the output format. This models a
//           deterministic gather kernel (one thread per input element, an fp32
//           running sum, one fp16 rounding: gpu::max_pool_backward_gpu), not
//           a scatter with atomics, whose order of addition is unspecified.
// Same shape as refs::max_pool_ref.
#pragma once

#include <span>

#include "emu/counters.h"
#include "formats/format.h"
#include "ops/pool_shape.h"

namespace mpverify::emu {

struct MaxPoolPolicy {
  formats::Format input = formats::parse_format("fp16");         // x, dy
  formats::Format output = formats::parse_format("fp16");        // y, dx
  formats::Format accumulation = formats::parse_format("fp32");  // dx at overlapping windows
};

// Sites: "max_pool.x", "max_pool.y".
void max_pool_emu(const ops::PoolShape& p, std::span<const float> x, std::span<float> y, const MaxPoolPolicy& policy = {},
                  CounterSet* counters = nullptr);
// Sites: "max_pool_backward.x", "max_pool_backward.dy", "max_pool_backward.accumulate"
// (one addition per window, into its winner's running sum), "max_pool_backward.dx".
void max_pool_backward_emu(const ops::PoolShape& p, std::span<const float> x, std::span<const float> dy,
                           std::span<float> dx, const MaxPoolPolicy& policy = {}, CounterSet* counters = nullptr);

}  // namespace mpverify::emu
