// Which input element wins each max-pooling window: the semantics the three
// sides (ref, emu, gpu) share.
//  - padding positions are never candidates (-inf that loses every tie), and
//    pad < r, pad < s guarantee every window holds an input element;
//  - candidates are visited in row-major window order; a candidate wins when
//    it is NaN and the best is not, or when it is greater than the best: so a
//    tie keeps the first index and the first NaN propagates;
//  - backward scatters dy of each window to its winner (the argmax), summing
//    where windows overlap (stride < window).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "ops/pool_shape.h"

namespace mpverify::ops {

// For each output element (NCHW over out_h x out_w), the flat index into x of
// its winner. Throws std::invalid_argument for a bad shape or size of x.
std::vector<std::size_t> max_pool_argmax(const PoolShape& p, std::span<const float> x);
std::vector<std::size_t> max_pool_argmax(const PoolShape& p, std::span<const double> x);

}  // namespace mpverify::ops
