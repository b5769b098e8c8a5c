// SGD and Adam as CUDA kernels, one per optimizer, same shape as
// refs::sgd_step_ref / adam_step_ref: host floats in and out, updated in place.
//
// Inside, each thread performs the reference's float operations in the same
// order with __fmul_rn, __fadd_rn, __fsub_rn, __fdiv_rn and __fsqrt_rn. nvcc
// contracts a * b + c into one FMA by default (--fmad=true), which rounds once
// where the reference (PyTorch's scalar CPU kernels) rounds twice; the _rn
// intrinsics are never contracted, so with fp32 storage the kernels equal the
// reference bit for bit. No fast-math: denormals are kept, sqrt and division
// are IEEE correctly rounded.
//
// Storage: the state (momentum buffer; m and v) is fp32. The weights are fp32
// or fp16; fp16 weights are read, updated in fp32, and written back with
// __float2half_rn of the fp32 result: fl16(fl32(w + u)), the double rounding
// of a PyTorch fp16 parameter (its kernels compute in fp32 "opmath"), which
// differs from the emulator's single rounding fl16(w + u) when fl32(w + u)
// lands on an fp16 midpoint that w + u was not on. The gradient is fp32 or
// rounded to fp16 first (__float2half_rn), as an fp16 model produced it.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "ops/optimizer_params.h"

namespace mpverify::gpu {

enum class OptimizerStorageFormat { fp32, fp16 };

struct OptimizerStorage {
  OptimizerStorageFormat weights = OptimizerStorageFormat::fp32;
  OptimizerStorageFormat grad = OptimizerStorageFormat::fp32;
};

// `update` (empty, or as long as w) receives each element's u, the fp32 value
// the kernel adds to w (what emu::sgd_step_emu's `update` holds; the
// trainer's lost-update statistics read it).
// Throws std::invalid_argument on size mismatch (as the reference), then
// std::runtime_error with gpu_unavailable_reason() without a device.
void sgd_step_gpu(const ops::SgdParams& p, std::int64_t step, std::span<float> w, std::span<float> v,
                  std::span<const float> g, const OptimizerStorage& storage = {}, std::span<float> update = {});
void adam_step_gpu(const ops::AdamParams& p, std::int64_t step, std::span<float> w, std::span<float> m,
                   std::span<float> v, std::span<const float> g, const OptimizerStorage& storage = {},
                   std::span<float> update = {});
// The size check behind `update` (the CUDA build's and the stubs').
inline void check_update_size(std::span<float> update, std::size_t n) {
  if (!update.empty() && update.size() != n)
    throw std::invalid_argument("gpu optimizer step: `update` must be empty or as long as w (" + std::to_string(n) +
                                "), not " + std::to_string(update.size()));
}

}  // namespace mpverify::gpu
