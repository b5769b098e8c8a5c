// A fully connected layer: y = x W^T + b, x read as n x in (the c h w of
// each example flattened), W out x in, b out. Forward is one GEMM whose fp32
// result gets the bias in fp32 (cuBLAS's epilogue) and is stored once in the
// activation format. Backward: dx = dy W, dW = dy^T x (both GEMMs with the
// backward operand format), db = the sum of dy over the batch. Under a block-scaled recipe the three GEMMs
// are nn/block_scaled_matmul.h's instead.
#pragma once

#include <cstdint>

#include "nn/layer.h"

namespace mpverify::nn {

class Linear final : public Layer {
 public:
  // Weights and bias uniform in +-1/sqrt(in) (PyTorch's default init),
  // drawn from Philox stream `stream` under `seed`.
  Linear(std::string name, int in, int out, std::uint64_t seed, std::uint64_t stream);
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  std::vector<Parameter*> parameters() override { return {&w_, &b_}; }
  int in() const { return in_; }
  int out() const { return out_; }

 private:
  // The bias and the store, after forward's GEMM; db and its store, after backward's.
  Tensor finish_forward(Context& ctx, Tensor& y);
  Tensor finish_backward(Context& ctx, const Tensor& dy, Tensor& dx);
  void block_scaled_backward(Context& ctx, const Tensor& dy, Tensor* dx);

  int in_, out_;
  Parameter w_, b_;
  Tensor x_;  // the last forward's input, for backward
};

}  // namespace mpverify::nn
