// A second Eigen baseline for the conv2d benchmark, compiled for the build
// machine's CPU (-march=native), as eigen_native_sgemm.cpp is for the GEMM
// benchmark: refs::conv2d_forward_ref is the same algorithm (im2col of each
// image, then one SGEMM) built for the portable x86-64 baseline (SSE2),
// while the emulator picks its AVX-512 kernels at run time. The shape comes
// as plain integers so that no header of the library is compiled here with
// other flags than the library's. bench_conv checks this baseline's output
// against refs::conv2d_forward_ref before it times anything.
// GCC 12's AVX-512 intrinsics headers warn falsely inside Eigen's kernels.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Dense>

#include <cstddef>

namespace mpverify::bench {

void eigen_native_conv2d_forward(int n, int c, int h, int w, int k, int r, int s, int stride, int pad,
                                 const float* x, const float* weight, float* y) {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int p = (h + 2 * pad - r) / stride + 1, q = (w + 2 * pad - s) / stride + 1;
  const Eigen::Index crs = static_cast<Eigen::Index>(c) * r * s, pq = static_cast<Eigen::Index>(p) * q;
  Eigen::Map<const Matrix> W(weight, k, crs);
  Matrix col(crs, pq);
  for (int img = 0; img < n; ++img) {
    const float* image = x + static_cast<std::size_t>(img) * c * h * w;
    float* row = col.data();
    for (int ci = 0; ci < c; ++ci)
      for (int ri = 0; ri < r; ++ri)
        for (int si = 0; si < s; ++si, row += pq)
          for (int oh = 0; oh < p; ++oh) {
            const int ih = oh * stride - pad + ri;
            for (int ow = 0; ow < q; ++ow) {
              const int iw = ow * stride - pad + si;
              const bool inside = ih >= 0 && ih < h && iw >= 0 && iw < w;
              row[oh * q + ow] = inside ? image[(static_cast<std::size_t>(ci) * h + ih) * w + iw] : 0.0f;
            }
          }
    Eigen::Map<Matrix>(y + static_cast<std::size_t>(img) * k * pq, k, pq).noalias() = W * col;
  }
}

}  // namespace mpverify::bench
