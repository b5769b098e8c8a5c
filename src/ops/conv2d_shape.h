// The shape of a 2-D convolution (NCHW, square stride and padding, no
// dilation, no groups), shared by the three sides (refs::conv2d_*_ref,
// emu::conv2d_*_emu, gpu::conv2d_*_gpu):
//
//   y[n,k,p,q] = sum_{c,r,s} x[n,c, p*stride - pad + r, q*stride - pad + s] * wgt[k,c,r,s]
//
// with x read as 0 outside the image (the padding). Backward data and filter
// are its adjoints: dx = d<y,dy>/dx, dw = d<y,dy>/dw.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpverify::ops {

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

}  // namespace mpverify::ops
