#include "nn/conv2d_layer.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "nn/block_scaled_matmul.h"
#include "nn/conv_lowering.h"
#include "nn/init.h"
#include "nn/operand_scaling.h"
#include "nn/policies.h"
#include "nn/tensor_checks.h"
#include "nn/tensor_counters.h"

namespace mpverify::nn {

Conv2d::Conv2d(std::string name, int in_channels, int out_channels, int kernel, int stride, int pad,
               std::uint64_t seed, std::uint64_t stream)
    : Layer(std::move(name)), in_(in_channels), out_(out_channels), kernel_(kernel), stride_(stride), pad_(pad) {
  if (in_ < 1 || out_ < 1 || kernel_ < 1 || stride_ < 1 || pad_ < 0) {
    std::string message = "Conv2d ";
    message += this->name();
    message += ": need in_channels, out_channels, kernel, stride >= 1 and pad >= 0";
    throw std::invalid_argument(message);
  }
  const std::size_t fan_in = static_cast<std::size_t>(in_) * kernel_ * kernel_;
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  w_ = make_parameter(this->name() + ".w", static_cast<std::size_t>(out_) * fan_in, ParameterKind::weight);
  b_ = make_parameter(this->name() + ".b", static_cast<std::size_t>(out_), ParameterKind::weight);
  fill_uniform(w_.master, bound, seed, stream);
  fill_uniform(b_.master, bound, seed, stream + 1);
}

ops::Conv2dShape Conv2d::shape_for(const Tensor& x) const {
  if (x.c != in_) {
    std::string message = "Conv2d ";
    message += name();
    message += ": expected ";
    message += std::to_string(in_);
    message += " input channels, got ";
    message += std::to_string(x.c);
    throw std::invalid_argument(message);
  }
  return ops::Conv2dShape{x.n, in_, x.h, x.w, out_, kernel_, kernel_, stride_, pad_};
}

Tensor Conv2d::forward(Context& ctx, const Tensor& x) {
  const ops::Conv2dShape shape = shape_for(x);
  x_ = x;
  Tensor y(x.n, out_, shape.p(), shape.q());
  if (ctx.precision().block_scaled(name())) {
    block_scaled_forward(ctx, shape, y);
    return finish_forward(ctx, y);
  }
  const ScaledOperand xs(ctx, name() + ".x", x.span()), ws(ctx, name() + ".w", w_.value);
  ctx.backend().conv2d_forward(shape, xs.values(), ws.values(), y.span(),
                               matmul_policy(ctx.precision(), Pass::forward), TensorCounters(ctx, name() + ".y").get());
  unscale_result(xs, ws, y.span());
  return finish_forward(ctx, y);
}

Tensor Conv2d::finish_forward(Context& ctx, Tensor& y) {
  ctx.backend().bias_add(y.channels(), y.span(), b_.value, y.span(), bias_policy(ctx.precision()), ctx.counters());
  ctx.store(name(), "y", Role::activation, y.span());
  return y;
}

// The GEMMs of nn/conv_lowering.h on the patches, block-scaled (nn/block_scaled_matmul.h).
void Conv2d::block_scaled_forward(Context& ctx, const ops::Conv2dShape& shape, Tensor& y) {
  const int positions = shape.n * shape.p() * shape.q(), crs = in_ * kernel_ * kernel_;
  const std::vector<float> patches = im2col_rows(shape, x_.span());
  std::vector<float> rows(static_cast<std::size_t>(positions) * out_);
  block_scaled_matmul(ctx, name(), BlockGemm::fprop, ops::GemmShape{positions, out_, crs, false, true}, patches,
                      w_.value, rows, "y");
  positions_to_nchw(shape, rows, y.span());
}

void Conv2d::block_scaled_backward(Context& ctx, const ops::Conv2dShape& shape, const Tensor& dy, Tensor* dx) {
  const int positions = shape.n * shape.p() * shape.q(), crs = in_ * kernel_ * kernel_;
  const std::vector<float> dy_rows = nchw_to_positions(shape, dy.span());
  if (dx) {
    std::vector<float> dpatches(static_cast<std::size_t>(positions) * crs);
    block_scaled_matmul(ctx, name(), BlockGemm::dgrad, ops::GemmShape{positions, crs, out_, false, false}, dy_rows,
                        w_.value, dpatches, "dx");
    col2im_rows(shape, dpatches, dx->span());
    ctx.store(name(), "dx", Role::activation_grad, dx->span());
  }
  w_.grad.assign(w_.size(), 0.0f);
  const std::vector<float> patches = im2col_rows(shape, x_.span());
  block_scaled_matmul(ctx, name(), BlockGemm::wgrad, ops::GemmShape{out_, crs, positions, true, false}, dy_rows,
                      patches, w_.grad, "dw");
  ctx.store(name(), "dw", Role::weight_grad, w_.grad);
}

Tensor Conv2d::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  expect_forward_ran(name(), x_);
  const ops::Conv2dShape shape = shape_for(x_);
  expect_shape(name(), "dy", dy, shape.n, out_, shape.p(), shape.q());
  if (ctx.precision().block_scaled(name())) {
    Tensor dx;
    if (need_dx) dx = Tensor(x_.n, x_.c, x_.h, x_.w);
    block_scaled_backward(ctx, shape, dy, need_dx ? &dx : nullptr);
    return finish_backward(ctx, dy, dx);
  }
  const emu::GemmPolicy policy = matmul_policy(ctx.precision(), Pass::backward);
  const ScaledOperand dys(ctx, name() + ".dy", dy.span());
  Tensor dx;
  if (need_dx) {
    dx = Tensor(x_.n, x_.c, x_.h, x_.w);
    const ScaledOperand ws(ctx, name() + ".w", w_.value);
    ctx.backend().conv2d_backward_data(shape, dys.values(), ws.values(), dx.span(), policy,
                                       TensorCounters(ctx, name() + ".dx").get());
    unscale_result(dys, ws, dx.span());
    ctx.store(name(), "dx", Role::activation_grad, dx.span());
  }
  w_.grad.assign(w_.size(), 0.0f);
  const ScaledOperand xs(ctx, name() + ".x", x_.span());
  ctx.backend().conv2d_backward_filter(shape, xs.values(), dys.values(), w_.grad,
                                      matmul_policy(ctx.precision(), Pass::backward, GradientOperand::second),
                                      TensorCounters(ctx, name() + ".dw").get());
  unscale_result(xs, dys, w_.grad);
  ctx.store(name(), "dw", Role::weight_grad, w_.grad);
  return finish_backward(ctx, dy, dx);
}

Tensor Conv2d::finish_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  b_.grad.assign(b_.size(), 0.0f);
  ctx.backend().bias_add_backward(dy.channels(), dy.span(), b_.grad, bias_policy(ctx.precision()), ctx.counters());
  ctx.store(name(), "db", Role::weight_grad, b_.grad);
  return dx;
}

}  // namespace mpverify::nn
