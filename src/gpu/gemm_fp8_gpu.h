// An FP8 GEMM through cuBLASLt (sm_89 and later), same shape as emu::gemm_emu: row-major float in, holding
// values of the FP8 formats (anything else is rounded to them, saturating), fp32 out. cuBLASLt takes FP8 only
// as "TN" (both operands K-major) with m, n and k multiples of 16.
//
// fast_accumulation sets CUBLASLT_MATMUL_DESC_FAST_ACCUM: the tensor cores' partial sums are then kept in
// their own accumulator for the whole of K; without it cuBLASLt adds them into an fp32 accumulator at
// intervals of its own choosing (the promotion DeepSeek-V3 describes).
#pragma once

#include <span>

#include "formats/format.h"
#include "ops/gemm_shape.h"

namespace mpverify::gpu {

// Throws std::invalid_argument for a transposed shape, a dimension that is not a multiple of 16 or a format
// that is not fp8-e4m3 / fp8-e5m2; std::runtime_error with gpu_unavailable_reason() without a device, and
// on any CUDA/cuBLASLt error (no algorithm for this device included).
void gemm_fp8_gpu(const ops::GemmShape& shape, std::span<const float> a, const formats::Format& a_format,
                  std::span<const float> b, const formats::Format& b_format, std::span<float> c, bool fast_accumulation);

// The argument checks above, without a device (shared by the CUDA and the stub builds).
void check_fp8_gemm(const ops::GemmShape& shape, const formats::Format& a_format, const formats::Format& b_format);

}  // namespace mpverify::gpu
