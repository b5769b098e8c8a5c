#include "nn/conv_transpose2d.h"

#include <stdexcept>
#include <string>

#include "nn/init.h"
#include "nn/operand_scaling.h"
#include "nn/policies.h"
#include "nn/tensor_checks.h"
#include "nn/tensor_counters.h"

namespace mpverify::nn {

namespace {
constexpr double kDcganInitStddev = 0.02;
}

ConvTranspose2d::ConvTranspose2d(std::string name, int in_channels, int out_channels, int kernel, int stride, int pad,
                                 std::uint64_t seed, std::uint64_t stream)
    : Layer(std::move(name)), in_(in_channels), out_(out_channels), kernel_(kernel), stride_(stride), pad_(pad) {
  if (in_ < 1 || out_ < 1 || kernel_ < 1 || stride_ < 1 || pad_ < 0) {
    std::string message = "ConvTranspose2d ";
    message += this->name();
    message += ": need in_channels, out_channels, kernel, stride >= 1 and pad >= 0";
    throw std::invalid_argument(message);
  }
  w_ = make_parameter(this->name() + ".w", static_cast<std::size_t>(in_) * out_ * kernel_ * kernel_,
                      ParameterKind::weight);
  b_ = make_parameter(this->name() + ".b", static_cast<std::size_t>(out_), ParameterKind::weight);
  fill_noise(w_.master, kDcganInitStddev, seed, stream);
}

ops::Conv2dShape ConvTranspose2d::adjoint_shape(const Tensor& z) const {
  std::string message = "ConvTranspose2d ";
  message += name();
  if (z.c != in_) {
    message += ": expected ";
    message += std::to_string(in_);
    message += " input channels, got ";
    message += std::to_string(z.c);
    throw std::invalid_argument(message);
  }
  const int height = (z.h - 1) * stride_ - 2 * pad_ + kernel_;
  const int width = (z.w - 1) * stride_ - 2 * pad_ + kernel_;
  const ops::Conv2dShape shape{z.n, out_, height, width, in_, kernel_, kernel_, stride_, pad_};
  // With H >= 1, (H + 2 pad - kernel) / stride + 1 = h exactly; the check
  // guards the formula, not the input.
  if (z.n < 1 || z.h < 1 || z.w < 1 || height < 1 || width < 1 || shape.p() != z.h || shape.q() != z.w) {
    message += ": an input of ";
    message += std::to_string(z.h);
    message += " x ";
    message += std::to_string(z.w);
    message += " gives an output of ";
    message += std::to_string(height);
    message += " x ";
    message += std::to_string(width);
    message += "; use a larger input or a smaller padding";
    throw std::invalid_argument(message);
  }
  return shape;
}

Tensor ConvTranspose2d::forward(Context& ctx, const Tensor& z) {
  const ops::Conv2dShape shape = adjoint_shape(z);
  z_ = z;
  Tensor out(z.n, out_, shape.h, shape.w);
  const ScaledOperand zs(ctx, name() + ".x", z.span()), ws(ctx, name() + ".w", w_.value);
  ctx.backend().conv2d_backward_data(shape, zs.values(), ws.values(), out.span(),
                                     matmul_policy(ctx.precision(), Pass::forward),
                                     TensorCounters(ctx, name() + ".y").get());
  unscale_result(zs, ws, out.span());
  ctx.backend().bias_add(out.channels(), out.span(), b_.value, out.span(), bias_policy(ctx.precision()),
                         ctx.counters());
  ctx.store(name(), "y", Role::activation, out.span());
  return out;
}

Tensor ConvTranspose2d::backward(Context& ctx, const Tensor& dout, bool need_dx) {
  expect_forward_ran(name(), z_);
  const ops::Conv2dShape shape = adjoint_shape(z_);
  expect_shape(name(), "dy", dout, shape.n, out_, shape.h, shape.w);
  const emu::GemmPolicy policy = matmul_policy(ctx.precision(), Pass::backward);
  const ScaledOperand douts(ctx, name() + ".dy", dout.span());
  Tensor dz;
  if (need_dx) {
    dz = Tensor(z_.n, z_.c, z_.h, z_.w);
    const ScaledOperand ws(ctx, name() + ".w", w_.value);
    ctx.backend().conv2d_forward(shape, douts.values(), ws.values(), dz.span(), policy,
                                 TensorCounters(ctx, name() + ".dx").get());
    unscale_result(douts, ws, dz.span());
    ctx.store(name(), "dx", Role::activation_grad, dz.span());
  }
  w_.grad.assign(w_.size(), 0.0f);
  const ScaledOperand zs(ctx, name() + ".x", z_.span());
  ctx.backend().conv2d_backward_filter(shape, douts.values(), zs.values(), w_.grad, policy,
                                       TensorCounters(ctx, name() + ".dw").get());
  unscale_result(douts, zs, w_.grad);
  ctx.store(name(), "dw", Role::weight_grad, w_.grad);
  b_.grad.assign(b_.size(), 0.0f);
  ctx.backend().bias_add_backward(dout.channels(), dout.span(), b_.grad, bias_policy(ctx.precision()),
                                  ctx.counters());
  ctx.store(name(), "db", Role::weight_grad, b_.grad);
  return dz;
}

}  // namespace mpverify::nn
