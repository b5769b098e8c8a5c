// The shape of a GEMM, shared by the three sides (refs::gemm_ref,
// emu::gemm_emu, gpu::gemm_gpu) so that any of them runs on the same inputs.
//
// Layouts are row-major: A is m x k (k x m when transpose_a), B is k x n
// (n x k when transpose_b), C is m x n; C = op(A) * op(B).
#pragma once

#include <cstddef>

namespace mpverify::ops {

struct GemmShape {
  int m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  std::size_t a_size() const { return static_cast<std::size_t>(m) * static_cast<std::size_t>(k); }
  std::size_t b_size() const { return static_cast<std::size_t>(k) * static_cast<std::size_t>(n); }
  std::size_t c_size() const { return static_cast<std::size_t>(m) * static_cast<std::size_t>(n); }
  // Throws std::invalid_argument naming the dimension or span that is wrong.
  void check(std::size_t a, std::size_t b, std::size_t c) const;
};

}  // namespace mpverify::ops
