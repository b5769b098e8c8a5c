// Bias add as CUDA kernels, same shape as refs::bias_add_ref, host floats in
// and out; inside, fp16 I/O:
//  forward  y = __hadd(x, b[c]) on the fp16-rounded values: one rounding;
//  backward one block of emu::kGpuReductionLanes threads per channel, fp32
//           running sums then a shared-memory tree (the order emu/block_sum.h
//           models), db rounded to fp16 once.
#pragma once

#include <span>

#include "ops/channel_shape.h"

namespace mpverify::gpu {

// Throw std::runtime_error with gpu_unavailable_reason() without a device.
void bias_add_gpu(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> b, std::span<float> y);
void bias_add_backward_gpu(const ops::ChannelShape& s, std::span<const float> dy, std::span<float> db);

}  // namespace mpverify::gpu
