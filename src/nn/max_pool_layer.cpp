#include "nn/max_pool_layer.h"

#include <stdexcept>
#include <string>

#include "nn/policies.h"
#include "nn/tensor_checks.h"

namespace mpverify::nn {

MaxPool2d::MaxPool2d(std::string name, int kernel, int stride, int pad)
    : Layer(std::move(name)), kernel_(kernel), stride_(stride), pad_(pad) {
  if (kernel_ < 1 || stride_ < 1 || pad_ < 0 || pad_ >= kernel_) {
    std::string message = "MaxPool2d ";
    message += this->name();
    message += ": need kernel, stride >= 1 and 0 <= pad < kernel";
    throw std::invalid_argument(message);
  }
}

ops::PoolShape MaxPool2d::shape_for(const Tensor& x) const {
  return ops::PoolShape{x.n, x.c, x.h, x.w, kernel_, kernel_, stride_, pad_};
}

Tensor MaxPool2d::forward(Context& ctx, const Tensor& x) {
  const ops::PoolShape shape = shape_for(x);
  shape.check_dims(name().c_str());
  x_ = x;
  Tensor y(x.n, x.c, shape.out_h(), shape.out_w());
  ctx.backend().max_pool(shape, x.span(), y.span(), max_pool_policy(ctx.precision()), ctx.counters());
  ctx.store(name(), "y", Role::activation, y.span());
  return y;
}

Tensor MaxPool2d::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  const ops::PoolShape shape = shape_for(x_);
  expect_shape(name(), "dy", dy, x_.n, x_.c, shape.out_h(), shape.out_w());
  if (!need_dx) return {};
  Tensor dx(x_.n, x_.c, x_.h, x_.w);
  ctx.backend().max_pool_backward(shape, x_.span(), dy.span(), dx.span(), max_pool_policy(ctx.precision()),
                                  ctx.counters());
  ctx.store(name(), "dx", Role::activation_grad, dx.span());
  return dx;
}

}  // namespace mpverify::nn
