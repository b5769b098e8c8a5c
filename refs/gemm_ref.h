// The reference GEMM: plain Eigen, FP32 and FP64. Same signature shape as
// emu::gemm_emu and gpu::gemm_gpu, so a test or `mpverify ops` can run any
// of the three on the same inputs.
//
// Layouts are row-major: A is m x k (k x m when transpose_a), B is k x n
// (n x k when transpose_b), C is m x n; C = op(A) * op(B).
#pragma once

#include <span>

namespace mpverify::refs {

struct GemmShape {
  int m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  std::size_t a_size() const { return static_cast<std::size_t>(m) * static_cast<std::size_t>(k); }
  std::size_t b_size() const { return static_cast<std::size_t>(k) * static_cast<std::size_t>(n); }
  std::size_t c_size() const { return static_cast<std::size_t>(m) * static_cast<std::size_t>(n); }
  // Throws std::invalid_argument naming the dimension or span that is wrong.
  void check(std::size_t a, std::size_t b, std::size_t c) const;
};

void gemm_ref(const GemmShape& shape, std::span<const float> a, std::span<const float> b, std::span<float> c);
// FP64 accumulation of the same FP32 inputs: the tighter oracle.
void gemm_ref_fp64(const GemmShape& shape, std::span<const float> a, std::span<const float> b, std::span<double> c);

// || |op(A)| |op(B)| ||_F / || op(A) op(B) ||_F in FP64: the factor that turns
// the componentwise dot-product bound |C - C_hat| <= gamma_k |A||B| (Higham,
// eq. 3.13) into a normwise relative bound. Infinity when the product is 0.
double gemm_condition(const GemmShape& shape, std::span<const float> a, std::span<const float> b);

}  // namespace mpverify::refs
