// The reference GEMM: plain Eigen, FP32 and FP64. Same signature shape as
// emu::gemm_emu and gpu::gemm_gpu, so a test or `mpverify ops` can run any
// of the three on the same inputs.
//
// Layouts and shapes: ops/gemm_shape.h.
#pragma once

#include <span>

#include "ops/gemm_shape.h"

namespace mpverify::refs {

void gemm_ref(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b, std::span<float> c);
// FP64 accumulation of the same FP32 inputs: the tighter oracle.
void gemm_ref_fp64(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                   std::span<double> c);

// || |op(A)| |op(B)| ||_F / || op(A) op(B) ||_F in FP64: the factor that turns
// the componentwise dot-product bound |C - C_hat| <= gamma_k |A||B| (Higham,
// eq. 3.13) into a normwise relative bound. Infinity when the product is 0.
double gemm_condition(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b);

}  // namespace mpverify::refs
