#include "refs/gemm_ref.h"

#include <Eigen/Core>
#include <cmath>
#include <vector>
#include <stdexcept>
#include <string>

#include "refs/eigen_blocking.h"

namespace mpverify::refs {

namespace {

template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <typename T>
void gemm(const ops::GemmShape& s, std::span<const float> a, std::span<const float> b, std::span<T> c) {
  pin_eigen_blocking();
  s.check(a.size(), b.size(), c.size());
  const Eigen::Map<const RowMajor<float>> A(a.data(), s.transpose_a ? s.k : s.m, s.transpose_a ? s.m : s.k);
  const Eigen::Map<const RowMajor<float>> B(b.data(), s.transpose_b ? s.n : s.k, s.transpose_b ? s.k : s.n);
  Eigen::Map<RowMajor<T>> C(c.data(), s.m, s.n);
  const RowMajor<T> At = s.transpose_a ? RowMajor<T>(A.transpose().template cast<T>()) : RowMajor<T>(A.template cast<T>());
  const RowMajor<T> Bt = s.transpose_b ? RowMajor<T>(B.transpose().template cast<T>()) : RowMajor<T>(B.template cast<T>());
  C.noalias() = At * Bt;
}

}  // namespace

void gemm_ref(const ops::GemmShape& s, std::span<const float> a, std::span<const float> b, std::span<float> c) {
  gemm<float>(s, a, b, c);
}

void gemm_ref_fp64(const ops::GemmShape& s, std::span<const float> a, std::span<const float> b, std::span<double> c) {
  gemm<double>(s, a, b, c);
}

double gemm_condition(const ops::GemmShape& s, std::span<const float> a, std::span<const float> b) {
  std::vector<double> c(s.c_size()), abs_c(s.c_size());
  gemm_ref_fp64(s, a, b, c);
  std::vector<float> abs_a(a.begin(), a.end()), abs_b(b.begin(), b.end());
  for (auto& x : abs_a) x = std::fabs(x);
  for (auto& x : abs_b) x = std::fabs(x);
  gemm_ref_fp64(s, abs_a, abs_b, abs_c);
  double num = 0, den = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    num += abs_c[i] * abs_c[i];
    den += c[i] * c[i];
  }
  return den > 0 ? std::sqrt(num / den) : INFINITY;
}

}  // namespace mpverify::refs
