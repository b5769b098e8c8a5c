// A second Eigen baseline for the GEMM benchmark, compiled for the build
// machine's CPU (-march=native: AVX2/AVX-512 and FMA where it has them).
// refs::gemm_ref is built for the portable x86-64 baseline (SSE2), as the
// library must run anywhere; the emulator picks its AVX-512 kernels at run
// time. Comparing against both keeps the speed figures honest.
// GCC 12's AVX-512 intrinsics headers warn falsely inside Eigen's kernels.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Dense>

namespace mpverify::bench {

void eigen_native_sgemm(int n, const float* a, const float* b, float* c) {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const Matrix> A(a, n, n), B(b, n, n);
  Eigen::Map<Matrix> C(c, n, n);
  C.noalias() = A * B;
}

}  // namespace mpverify::bench
