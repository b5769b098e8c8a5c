#include "nn/batch_norm_layer.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "nn/init.h"
#include "nn/policies.h"
#include "nn/tensor_checks.h"

namespace mpverify::nn {

BatchNorm2d::BatchNorm2d(std::string name, int channels, ops::BatchNormParams params)
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

void BatchNorm2d::set_running_statistics(std::vector<float> mean, std::vector<float> var) {
  if (mean.size() != static_cast<std::size_t>(channels_) || var.size() != static_cast<std::size_t>(channels_)) {
    std::string message = "BatchNorm2d ";
    message += name();
    message += ": running statistics need ";
    message += std::to_string(channels_);
    message += " values each";
    throw std::invalid_argument(message);
  }
  running_mean_ = std::move(mean);
  running_var_ = std::move(var);
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
  Tensor y(x.n, x.c, x.h, x.w);
  if (!training()) {
    x_ = Tensor();  // nothing to differentiate
    const std::size_t plane = static_cast<std::size_t>(x.h) * static_cast<std::size_t>(x.w);
    for (std::size_t c = 0; c < static_cast<std::size_t>(x.c); ++c) {
      const double scale = static_cast<double>(gamma_.value[c]) /
                           std::sqrt(static_cast<double>(running_var_[c]) + params_.eps);
      const double mean = running_mean_[c], shift = beta_.value[c];
      for (std::size_t i = 0; i < static_cast<std::size_t>(x.n); ++i) {
        const std::size_t base = (i * static_cast<std::size_t>(x.c) + c) * plane;
        for (std::size_t k = base; k < base + plane; ++k)
          y.values[k] = static_cast<float>((static_cast<double>(x.values[k]) - mean) * scale + shift);
      }
    }
    ctx.store(name(), "y", Role::activation, y.span());
    return y;
  }
  ops::check_batch_norm_shape(x.channels(), name().c_str());
  x_ = x;
  ctx.backend().batch_norm(x.channels(), params_, x.span(), gamma_.value, beta_.value, y.span(), mean_, invstd_,
                           running_mean_, running_var_, batch_norm_policy(ctx.precision()), ctx.counters());
  ctx.store(name(), "y", Role::activation, y.span());
  return y;
}

Tensor BatchNorm2d::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  if (!training()) {
    std::string message = "BatchNorm2d ";
    message += name();
    message += ": backward in evaluation mode (call set_training(true) before training)";
    throw std::logic_error(message);
  }
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
