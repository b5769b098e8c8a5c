// A 2-D convolution layer over NCHW: y = conv(x, W) + b with W out x in x
// kernel x kernel (PyTorch's layout), the same stride and padding along both
// axes, one bias per output channel. As Linear: forward is one convolution
// whose fp32 result gets the bias in fp32 (the epilogue) and is stored once
// in the activation format; backward: dx = backward_data(dy, W) (skipped
// for the first layer), dW = backward_filter(x, dy), db = the sum of dy over
// n, h, w. The operands go through ScaledOperand (sites "<name>.x",
// "<name>.w", "<name>.dy"). Under a block-scaled recipe the three are the GEMMs of nn/conv_lowering.h.
#pragma once

#include <cstdint>

#include "emu/conv2d_emu.h"
#include "nn/layer.h"

namespace mpverify::nn {

class Conv2d final : public Layer {
 public:
  // Weights and bias uniform in +-1/sqrt(in kernel^2) (PyTorch's default),
  // drawn from Philox streams `stream` and `stream + 1` under `seed`.
  Conv2d(std::string name, int in_channels, int out_channels, int kernel, int stride, int pad, std::uint64_t seed,
         std::uint64_t stream);
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  std::vector<Parameter*> parameters() override { return {&w_, &b_}; }

  // The convolution's shape for input x (throws unless x has in_channels channels).
  ops::Conv2dShape shape_for(const Tensor& x) const;
  int in_channels() const { return in_; }
  int out_channels() const { return out_; }

 private:
  // The bias and the store, after forward's convolution; db and its store, after backward's.
  Tensor finish_forward(Context& ctx, Tensor& y);
  Tensor finish_backward(Context& ctx, const Tensor& dy, Tensor& dx);
  // Under a block-scaled recipe: the GEMMs of nn/conv_lowering.h instead of the convolutions.
  void block_scaled_forward(Context& ctx, const ops::Conv2dShape& shape, Tensor& y);
  void block_scaled_backward(Context& ctx, const ops::Conv2dShape& shape, const Tensor& dy, Tensor* dx);

  int in_, out_, kernel_, stride_, pad_;
  Parameter w_, b_;
  Tensor x_;  // the last forward's input, for backward
};

}  // namespace mpverify::nn
