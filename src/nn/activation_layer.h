// An activation function as a layer (relu, leaky_relu, tanh, sigmoid):
// y = f(x) element-wise, dx = f'(x) dy, both through the backend with the
// element-wise policy (inputs in Precision::elementwise). It keeps its input
// x for backward (the backend's derivative reads x, not y).
#pragma once

#include "nn/layer.h"
#include "refs/activation_ref.h"

namespace mpverify::nn {

class ActivationLayer final : public Layer {
 public:
  ActivationLayer(std::string name, ops::ActivationParams params);
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  const ops::ActivationParams& params() const { return params_; }

 private:
  ops::ActivationParams params_;
  Tensor x_;  // the last forward's input, for backward
};

}  // namespace mpverify::nn
