#include "nn/activation_layer.h"

#include "nn/policies.h"
#include "nn/tensor_checks.h"

namespace mpverify::nn {

ActivationLayer::ActivationLayer(std::string name, ops::ActivationParams params)
    : Layer(std::move(name)), params_(params) {}

Tensor ActivationLayer::forward(Context& ctx, const Tensor& x) {
  x_ = x;
  Tensor y(x.n, x.c, x.h, x.w);
  ctx.backend().activation(params_, x.span(), y.span(), elementwise_policy(ctx.precision()), ctx.counters());
  ctx.store(name(), "y", Role::activation, y.span());
  return y;
}

Tensor ActivationLayer::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  expect_shape(name(), "dy", dy, x_.n, x_.c, x_.h, x_.w);
  if (!need_dx) return {};  // no parameters: nothing else to compute
  Tensor dx(x_.n, x_.c, x_.h, x_.w);
  ctx.backend().activation_backward(params_, x_.span(), dy.span(), dx.span(), elementwise_policy(ctx.precision()),
                                    ctx.counters());
  ctx.store(name(), "dx", Role::activation_grad, dx.span());
  return dx;
}

}  // namespace mpverify::nn
