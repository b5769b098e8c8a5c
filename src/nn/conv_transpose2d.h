// A 2-D transposed convolution layer (the DCGAN generator's upsampling):
// input z (n, in, h, w) -> output (n, out, H, W), H = (h - 1) stride - 2 pad
// + kernel (likewise W; no output_padding), weight in x out x kernel x kernel
// (PyTorch's ConvTranspose2d layout), one bias per output channel.
//
// It is the adjoint of the convolution C with shape {n, c = out, h = H,
// w = W, k = in, kernel, stride, pad}, whose output is exactly h x w:
//   forward   out = C^T z          = conv2d_backward_data(dy = z, W)
//   backward  dz  = C dout         = conv2d_forward(x = dout, W)
//             dW  = d<C^T z, dout>/dW = conv2d_backward_filter(x = dout, dy = z)
// so each direction is one of the backend's three convolution ops, with the
// same reduction orders and counters. The bias is added in fp32 as in
// Conv2d. Operand sites: "<name>.x" (z), "<name>.w", "<name>.dy" (dout).
#pragma once

#include <cstdint>

#include "emu/conv2d_emu.h"
#include "nn/layer.h"

namespace mpverify::nn {

class ConvTranspose2d final : public Layer {
 public:
  // Weights zero-mean noise with standard deviation 0.02 (DCGAN's
  // initialisation) from Philox stream `stream` under `seed`; bias zero.
  ConvTranspose2d(std::string name, int in_channels, int out_channels, int kernel, int stride, int pad,
                  std::uint64_t seed, std::uint64_t stream);
  Tensor forward(Context& ctx, const Tensor& z) override;
  Tensor backward(Context& ctx, const Tensor& dout, bool need_dx) override;
  std::vector<Parameter*> parameters() override { return {&w_, &b_}; }

  // The convolution whose adjoint this layer is, for input z (throws unless
  // z has in_channels channels and the output is at least 1 x 1).
  ops::Conv2dShape adjoint_shape(const Tensor& z) const;
  int in_channels() const { return in_; }
  int out_channels() const { return out_; }

 private:
  int in_, out_, kernel_, stride_, pad_;
  Parameter w_, b_;
  Tensor z_;  // the last forward's input, for backward
};

}  // namespace mpverify::nn
