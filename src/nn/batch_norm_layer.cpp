#include "nn/batch_norm_layer.h"

#include <stdexcept>
#include <string>

#include "nn/init.h"
#include "nn/policies.h"
#include "nn/tensor_checks.h"

namespace mpverify::nn {

BatchNorm2d::BatchNorm2d(std::string name, int channels, refs::BatchNormParams params)
    : Layer(std::move(name)), channels_(channels), params_(params) {
  if (channels_ < 1) {
    std::string message = "BatchNorm2d ";
    message += this->name();
    message += ": channels must be >= 1";
    throw std::invalid_argument(message);
  }
  const auto c = static_cast<std::size_t>(channels_);
  gamma_ = make_parameter(this->name() + ".gamma", c, ParameterKind::norm);
  beta_ = make_parameter(this->name() + ".beta", c, ParameterKind::norm);
  gamma_.master.assign(c, 1.0f);
  running_mean_.assign(c, 0.0f);
  running_var_.assign(c, 1.0f);
  mean_.assign(c, 0.0f);
  invstd_.assign(c, 0.0f);
}

Tensor BatchNorm2d::forward(Context& ctx, const Tensor& x) {
  if (x.c != channels_) {
    std::string message = "BatchNorm2d ";
    message += name();
    message += ": expected ";
    message += std::to_string(channels_);
    message += " channels, got ";
    message += std::to_string(x.c);
    throw std::invalid_argument(message);
  }
  refs::check_batch_norm_shape(x.channels(), name().c_str());
  x_ = x;
  Tensor y(x.n, x.c, x.h, x.w);
  ctx.backend().batch_norm(x.channels(), params_, x.span(), gamma_.value, beta_.value, y.span(), mean_, invstd_,
                           running_mean_, running_var_, batch_norm_policy(ctx.precision()), ctx.counters());
  ctx.store(name(), "y", Role::activation, y.span());
  return y;
}

Tensor BatchNorm2d::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  expect_shape(name(), "dy", dy, x_.n, x_.c, x_.h, x_.w);
  // The backend computes dx with dgamma and dbeta; the first layer's is dropped.
  Tensor dx(x_.n, x_.c, x_.h, x_.w);
  gamma_.grad.assign(gamma_.size(), 0.0f);
  beta_.grad.assign(beta_.size(), 0.0f);
  ctx.backend().batch_norm_backward(x_.channels(), x_.span(), dy.span(), gamma_.value, mean_, invstd_, dx.span(),
                                    gamma_.grad, beta_.grad, batch_norm_policy(ctx.precision()), ctx.counters());
  if (need_dx) ctx.store(name(), "dx", Role::activation_grad, dx.span());
  const formats::Format& norm = ctx.precision().norm_parameters;
  ctx.store(name(), "dgamma", Role::weight_grad, norm, gamma_.grad);
  ctx.store(name(), "dbeta", Role::weight_grad, norm, beta_.grad);
  if (!need_dx) return {};
  return dx;
}

}  // namespace mpverify::nn
