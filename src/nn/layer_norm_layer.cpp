#include "nn/layer_norm_layer.h"

#include <stdexcept>
#include <string>

#include "nn/init.h"
#include "nn/policies.h"
#include "nn/tensor_checks.h"

namespace mpverify::nn {

LayerNorm::LayerNorm(std::string name, int features, ops::LayerNormParams params)
    : Layer(std::move(name)), features_(features), params_(params) {
  if (features_ < 1) {
    std::string message = "LayerNorm ";
    message += this->name();
    message += ": features must be >= 1";
    throw std::invalid_argument(message);
  }
  const auto f = static_cast<std::size_t>(features_);
  gamma_ = make_parameter(this->name() + ".gamma", f, ParameterKind::norm);
  beta_ = make_parameter(this->name() + ".beta", f, ParameterKind::norm);
  gamma_.master.assign(f, 1.0f);
}

Tensor LayerNorm::forward(Context& ctx, const Tensor& x) {
  if (x.example_size() != static_cast<std::size_t>(features_)) {
    std::string message = "LayerNorm ";
    message += name();
    message += ": expected ";
    message += std::to_string(features_);
    message += " features per row, got ";
    message += std::to_string(x.example_size());
    throw std::invalid_argument(message);
  }
  x_ = x;
  const ops::LayerNormShape shape{x.n, features_};
  mean_.assign(static_cast<std::size_t>(x.n), 0.0f);
  rstd_.assign(static_cast<std::size_t>(x.n), 0.0f);
  Tensor y(x.n, x.c, x.h, x.w);
  ctx.backend().layer_norm(shape, params_, x.span(), gamma_.value, beta_.value, y.span(), mean_, rstd_,
                           layer_norm_policy(ctx.precision()), ctx.counters());
  ctx.store(name(), "y", Role::activation, y.span());
  return y;
}

Tensor LayerNorm::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  expect_forward_ran(name(), x_);
  expect_shape(name(), "dy", dy, x_.n, x_.c, x_.h, x_.w);
  // The backend computes dx with dgamma and dbeta; the first layer's is dropped.
  Tensor dx(x_.n, x_.c, x_.h, x_.w);
  gamma_.grad.assign(gamma_.size(), 0.0f);
  beta_.grad.assign(beta_.size(), 0.0f);
  ctx.backend().layer_norm_backward(ops::LayerNormShape{x_.n, features_}, x_.span(), dy.span(), gamma_.value, mean_,
                                    rstd_, dx.span(), gamma_.grad, beta_.grad, layer_norm_policy(ctx.precision()),
                                    ctx.counters());
  if (need_dx) ctx.store(name(), "dx", Role::activation_grad, dx.span());
  const formats::Format& norm = ctx.precision().norm_parameters;
  ctx.store(name(), "dgamma", Role::weight_grad, norm, gamma_.grad);
  ctx.store(name(), "dbeta", Role::weight_grad, norm, beta_.grad);
  if (!need_dx) return {};
  return dx;
}

}  // namespace mpverify::nn
