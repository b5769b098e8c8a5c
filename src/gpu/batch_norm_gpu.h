// Batch normalisation, training mode, as CUDA kernels (semantics in
// refs/batch_norm_ref.h), same shape as refs::batch_norm_ref, host floats in
// and out. One block of emu::kGpuReductionLanes threads per channel, a
// deterministic fixed-order reduction (the order emu/block_sum.h models);
// fp16 x, y, dy, dx (rounded on the device with __float2half_rn); fp32
// statistics, gamma, beta, dgamma, dbeta; every fp32 operation an explicit
// IEEE intrinsic (__fadd_rn, __fmaf_rn, __fdiv_rn, __fsqrt_rn), so nothing
// is contracted or approximated:
//   forward  mean = sum(x) / M; d = x - mean; var = sum(d*d) (fmaf) / M;
//            invstd = 1 / sqrt(var + eps); y = fp16(fmaf(gamma, d * invstd, beta));
//            running stats in double (__dmul_rn, __dadd_rn), rounded to fp32;
//   backward xhat = (x - mean) * invstd; dbeta = sum(dy); dgamma = sum(dy*xhat) (fmaf);
//            dx = fp16(gamma * invstd / M * ((M dy - dbeta) - xhat dgamma)).
#pragma once

#include <span>

#include "ops/batch_norm_params.h"

namespace mpverify::gpu {

// Throw std::runtime_error with gpu_unavailable_reason() without a device.
void batch_norm_gpu(const ops::ChannelShape& s, const ops::BatchNormParams& p, std::span<const float> x,
                    std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                    std::span<float> mean, std::span<float> invstd, std::span<float> running_mean,
                    std::span<float> running_var);
void batch_norm_backward_gpu(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> dy,
                             std::span<const float> gamma, std::span<const float> mean,
                             std::span<const float> invstd, std::span<float> dx, std::span<float> dgamma,
                             std::span<float> dbeta);

}  // namespace mpverify::gpu
