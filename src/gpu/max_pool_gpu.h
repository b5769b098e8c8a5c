// 2D max pooling as CUDA kernels (semantics in ops/max_pool_argmax.h), same
// shape as refs::max_pool_ref, host floats in and out, fp16 inside:
//  forward  one thread per output, the winner of the fp16-rounded window;
//  backward a deterministic gather, one thread per input element: an fp32
//           running sum of the dy (rounded to fp16) of the windows it wins,
//           in row-major window order, rounded to fp16 once (no atomics).
#pragma once

#include <span>

#include "ops/pool_shape.h"

namespace mpverify::gpu {

// Throw std::runtime_error with gpu_unavailable_reason() without a device.
void max_pool_gpu(const ops::PoolShape& p, std::span<const float> x, std::span<float> y);
void max_pool_backward_gpu(const ops::PoolShape& p, std::span<const float> x, std::span<const float> dy,
                           std::span<float> dx);

}  // namespace mpverify::gpu
