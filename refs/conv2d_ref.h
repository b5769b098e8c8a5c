// The reference 2-D convolution (NCHW, square stride and padding, no
// dilation, no groups): forward, backward-data and backward-filter as Eigen
// GEMMs over an im2col matrix, in FP32 and in FP64 (the tighter oracle). Same
// signature shape as emu::conv2d_*_emu and gpu::conv2d_*_gpu.
//
//   y[n,k,p,q] = sum_{c,r,s} x[n,c, p*stride - pad + r, q*stride - pad + s] * wgt[k,c,r,s]
//
// with x read as 0 outside the image (the padding). Backward data and filter
// are its adjoints: dx = d<y,dy>/dx, dw = d<y,dy>/dw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace mpverify::refs {

struct Conv2dShape {
  int n = 0, c = 0, h = 0, w = 0;  // input: batch, channels, height, width
  int k = 0, r = 0, s = 0;         // filters: output channels, height, width
  int stride = 1, pad = 0;         // the same along both axes
  int p() const;                   // output height: (h + 2 pad - r) / stride + 1
  int q() const;                   // output width:  (w + 2 pad - s) / stride + 1
  std::size_t x_size() const;       // n c h w
  std::size_t weight_size() const;  // k c r s
  std::size_t y_size() const;       // n k p q

  // The most terms one output element sums (the length behind gamma_L in the
  // tolerances): forward c r s; backward data k ceil(r/stride) ceil(s/stride)
  // (only the taps of one stride phase reach an input element, see
  // emu/conv2d_emu.h); backward filter n p q.
  std::int64_t forward_terms() const;
  std::int64_t backward_data_terms() const;
  std::int64_t backward_filter_terms() const;

  // Throws std::invalid_argument naming the dimension, or the span (by the
  // caller's names, e.g. "dx") whose size is wrong.
  void check(std::size_t x, std::size_t weight, std::size_t y, const char* x_name = "x",
             const char* weight_name = "weight", const char* y_name = "y") const;
};

// FP32: Eigen's float GEMM (the speed baseline of the emulator).
void conv2d_forward_ref(const Conv2dShape& shape, std::span<const float> x, std::span<const float> wgt,
                        std::span<float> y);
void conv2d_backward_data_ref(const Conv2dShape& shape, std::span<const float> dy, std::span<const float> wgt,
                              std::span<float> dx);
void conv2d_backward_filter_ref(const Conv2dShape& shape, std::span<const float> x, std::span<const float> dy,
                                std::span<float> dw);

// FP64 on the same float inputs.
void conv2d_forward_ref_fp64(const Conv2dShape& shape, std::span<const float> x, std::span<const float> wgt,
                             std::span<double> y);
void conv2d_backward_data_ref_fp64(const Conv2dShape& shape, std::span<const float> dy, std::span<const float> wgt,
                                   std::span<double> dx);
void conv2d_backward_filter_ref_fp64(const Conv2dShape& shape, std::span<const float> x, std::span<const float> dy,
                                     std::span<double> dw);

// || op(|a|, |b|) ||_F / || op(a, b) ||_F in FP64, as refs::gemm_condition:
// the factor that turns the componentwise bound |out - out_hat| <= gamma_L
// op(|a|,|b|) of each dot product into a normwise relative bound. Infinity
// when the result is 0.
double conv2d_condition(const Conv2dShape& shape, std::span<const float> x, std::span<const float> wgt);
double conv2d_backward_data_condition(const Conv2dShape& shape, std::span<const float> dy,
                                      std::span<const float> wgt);
double conv2d_backward_filter_condition(const Conv2dShape& shape, std::span<const float> x,
                                        std::span<const float> dy);

}  // namespace mpverify::refs
