#include "refs/conv2d_ref.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "refs/eigen_blocking.h"

namespace mpverify::refs {

namespace {

template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// col (c r s x p q) of one image: row (ci, ri, si), column (oh, ow) holds the
// input element under tap (ri, si) of window (oh, ow), 0 in the padding.
template <typename T>
void im2col(const ops::Conv2dShape& sh, const float* image, T* col) {
  const int P = sh.p(), Q = sh.q();
  for (int ci = 0; ci < sh.c; ++ci)
    for (int ri = 0; ri < sh.r; ++ri)
      for (int si = 0; si < sh.s; ++si, col += static_cast<std::ptrdiff_t>(P) * Q)
        for (int oh = 0; oh < P; ++oh) {
          const int ih = oh * sh.stride - sh.pad + ri;
          for (int ow = 0; ow < Q; ++ow) {
            const int iw = ow * sh.stride - sh.pad + si;
            const bool inside = ih >= 0 && ih < sh.h && iw >= 0 && iw < sh.w;
            col[oh * Q + ow] = inside ? static_cast<T>(image[(static_cast<std::size_t>(ci) * sh.h + ih) * sh.w + iw]) : T(0);
          }
        }
}

// The adjoint of im2col: adds each column entry back onto its input element.
template <typename T>
void col2im_add(const ops::Conv2dShape& sh, const T* col, T* image) {
  const int P = sh.p(), Q = sh.q();
  for (int ci = 0; ci < sh.c; ++ci)
    for (int ri = 0; ri < sh.r; ++ri)
      for (int si = 0; si < sh.s; ++si, col += static_cast<std::ptrdiff_t>(P) * Q)
        for (int oh = 0; oh < P; ++oh) {
          const int ih = oh * sh.stride - sh.pad + ri;
          if (ih < 0 || ih >= sh.h) continue;
          for (int ow = 0; ow < Q; ++ow) {
            const int iw = ow * sh.stride - sh.pad + si;
            if (iw >= 0 && iw < sh.w) image[(static_cast<std::size_t>(ci) * sh.h + ih) * sh.w + iw] += col[oh * Q + ow];
          }
        }
}

struct Dims {
  Eigen::Index crs, pq, chw, kpq;
  explicit Dims(const ops::Conv2dShape& s)
      : crs(static_cast<Eigen::Index>(s.forward_terms())),
        pq(static_cast<Eigen::Index>(s.p()) * s.q()),
        chw(static_cast<Eigen::Index>(s.c) * s.h * s.w),
        kpq(static_cast<Eigen::Index>(s.k) * s.p() * s.q()) {}
};

template <typename T>
void forward(const ops::Conv2dShape& s, std::span<const float> x, std::span<const float> wgt, std::span<T> y) {
  pin_eigen_blocking();
  s.check(x.size(), wgt.size(), y.size());
  const Dims d(s);
  const RowMajor<T> W = Eigen::Map<const RowMajor<float>>(wgt.data(), s.k, d.crs).template cast<T>();
  RowMajor<T> col(d.crs, d.pq);
  for (int img = 0; img < s.n; ++img) {
    im2col(s, x.data() + img * d.chw, col.data());
    Eigen::Map<RowMajor<T>>(y.data() + img * d.kpq, s.k, d.pq).noalias() = W * col;
  }
}

// dx = col2im(W^T dy) per image: a GEMM, then the overlapping windows summed.
template <typename T>
void backward_data(const ops::Conv2dShape& s, std::span<const float> dy, std::span<const float> wgt, std::span<T> dx) {
  pin_eigen_blocking();
  s.check(dx.size(), wgt.size(), dy.size(), "dx", "weight", "dy");
  const Dims d(s);
  const RowMajor<T> Wt = Eigen::Map<const RowMajor<float>>(wgt.data(), s.k, d.crs).transpose().template cast<T>();
  RowMajor<T> dcol(d.crs, d.pq);
  std::fill(dx.begin(), dx.end(), T(0));
  for (int img = 0; img < s.n; ++img) {
    dcol.noalias() = Wt * Eigen::Map<const RowMajor<float>>(dy.data() + img * d.kpq, s.k, d.pq).template cast<T>();
    col2im_add(s, dcol.data(), dx.data() + img * d.chw);
  }
}

// dw = sum over images of dy_n col_n^T.
template <typename T>
void backward_filter(const ops::Conv2dShape& s, std::span<const float> x, std::span<const float> dy, std::span<T> dw) {
  pin_eigen_blocking();
  s.check(x.size(), dw.size(), dy.size(), "x", "dw", "dy");
  const Dims d(s);
  RowMajor<T> col(d.crs, d.pq);
  RowMajor<T> DW = RowMajor<T>::Zero(s.k, d.crs);
  for (int img = 0; img < s.n; ++img) {
    im2col(s, x.data() + img * d.chw, col.data());
    DW.noalias() +=
        Eigen::Map<const RowMajor<float>>(dy.data() + img * d.kpq, s.k, d.pq).template cast<T>() * col.transpose();
  }
  Eigen::Map<RowMajor<T>>(dw.data(), s.k, d.crs) = DW;
}

std::vector<float> absolute(std::span<const float> v) {
  std::vector<float> out(v.begin(), v.end());
  for (auto& x : out) x = std::fabs(x);
  return out;
}

// || op(|a|,|b|) ||_F / || op(a,b) ||_F for one of the FP64 functions.
template <typename Op>
double condition(std::size_t out_size, std::span<const float> a, std::span<const float> b, Op op) {
  std::vector<double> out(out_size), abs_out(out_size);
  op(a, b, std::span<double>(out));
  op(std::span<const float>(absolute(a)), std::span<const float>(absolute(b)), std::span<double>(abs_out));
  double num = 0, den = 0;
  for (std::size_t i = 0; i < out_size; ++i) {
    num += abs_out[i] * abs_out[i];
    den += out[i] * out[i];
  }
  return den > 0 ? std::sqrt(num / den) : INFINITY;
}

}  // namespace

void conv2d_forward_ref(const ops::Conv2dShape& s, std::span<const float> x, std::span<const float> wgt,
                        std::span<float> y) {
  forward<float>(s, x, wgt, y);
}
void conv2d_backward_data_ref(const ops::Conv2dShape& s, std::span<const float> dy, std::span<const float> wgt,
                              std::span<float> dx) {
  backward_data<float>(s, dy, wgt, dx);
}
void conv2d_backward_filter_ref(const ops::Conv2dShape& s, std::span<const float> x, std::span<const float> dy,
                                std::span<float> dw) {
  backward_filter<float>(s, x, dy, dw);
}

void conv2d_forward_ref_fp64(const ops::Conv2dShape& s, std::span<const float> x, std::span<const float> wgt,
                             std::span<double> y) {
  forward<double>(s, x, wgt, y);
}
void conv2d_backward_data_ref_fp64(const ops::Conv2dShape& s, std::span<const float> dy, std::span<const float> wgt,
                                   std::span<double> dx) {
  backward_data<double>(s, dy, wgt, dx);
}
void conv2d_backward_filter_ref_fp64(const ops::Conv2dShape& s, std::span<const float> x, std::span<const float> dy,
                                     std::span<double> dw) {
  backward_filter<double>(s, x, dy, dw);
}

double conv2d_condition(const ops::Conv2dShape& s, std::span<const float> x, std::span<const float> wgt) {
  s.check(x.size(), wgt.size(), s.y_size());
  return condition(s.y_size(), x, wgt, [&](auto a, auto b, auto out) { conv2d_forward_ref_fp64(s, a, b, out); });
}
double conv2d_backward_data_condition(const ops::Conv2dShape& s, std::span<const float> dy, std::span<const float> wgt) {
  s.check(s.x_size(), wgt.size(), dy.size(), "dx", "weight", "dy");
  return condition(s.x_size(), dy, wgt,
                   [&](auto a, auto b, auto out) { conv2d_backward_data_ref_fp64(s, a, b, out); });
}
double conv2d_backward_filter_condition(const ops::Conv2dShape& s, std::span<const float> x, std::span<const float> dy) {
  s.check(x.size(), s.weight_size(), dy.size(), "x", "dw", "dy");
  return condition(s.weight_size(), x, dy,
                   [&](auto a, auto b, auto out) { conv2d_backward_filter_ref_fp64(s, a, b, out); });
}

}  // namespace mpverify::refs
