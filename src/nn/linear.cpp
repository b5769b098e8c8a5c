#include "nn/linear.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "nn/block_scaled_matmul.h"
#include "nn/init.h"
#include "nn/operand_scaling.h"
#include "nn/policies.h"
#include "nn/tensor_counters.h"

namespace mpverify::nn {

Linear::Linear(std::string name, int in, int out, std::uint64_t seed, std::uint64_t stream)
    : Layer(std::move(name)), in_(in), out_(out) {
  if (in < 1 || out < 1) throw std::invalid_argument("Linear " + this->name() + ": in and out must be >= 1");
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  w_ = make_parameter(this->name() + ".w", static_cast<std::size_t>(out) * in, ParameterKind::weight);
  b_ = make_parameter(this->name() + ".b", static_cast<std::size_t>(out), ParameterKind::weight);
  fill_uniform(w_.master, bound, seed, stream);
  fill_uniform(b_.master, bound, seed, stream + 1);
}

Tensor Linear::forward(Context& ctx, const Tensor& x) {
  if (x.example_size() != static_cast<std::size_t>(in_))
    throw std::invalid_argument("Linear " + name() + ": expected " + std::to_string(in_) + " inputs per example, got " +
                                std::to_string(x.example_size()));
  x_ = x;
  Tensor y(x.n, out_);
  const ops::GemmShape shape{x.n, out_, in_, false, true};
  if (ctx.precision().block_scaled(name())) {
    block_scaled_matmul(ctx, name(), BlockGemm::fprop, shape, x.span(), w_.value, y.span(), "y");
    return finish_forward(ctx, y);
  }
  const ScaledOperand xs(ctx, name() + ".x", x.span()), ws(ctx, name() + ".w", w_.value);
  ctx.backend().gemm(shape, xs.values(), ws.values(), y.span(), matmul_policy(ctx.precision(), Pass::forward),
                     TensorCounters(ctx, name() + ".y").get());
  unscale_result(xs, ws, y.span());
  return finish_forward(ctx, y);
}

Tensor Linear::finish_forward(Context& ctx, Tensor& y) {
  ctx.backend().bias_add(y.channels(), y.span(), b_.value, y.span(), bias_policy(ctx.precision()), ctx.counters());
  ctx.store(name(), "y", Role::activation, y.span());
  return y;
}

// The three GEMMs of nn/block_scaled_matmul.h in place of the plain ones below.
void Linear::block_scaled_backward(Context& ctx, const Tensor& dy, Tensor* dx) {
  if (dx) {
    block_scaled_matmul(ctx, name(), BlockGemm::dgrad, ops::GemmShape{dy.n, in_, out_}, dy.span(), w_.value,
                        dx->span(), "dx");
    ctx.store(name(), "dx", Role::activation_grad, dx->span());
  }
  w_.grad.assign(w_.size(), 0.0f);
  block_scaled_matmul(ctx, name(), BlockGemm::wgrad, ops::GemmShape{out_, in_, dy.n, true, false}, dy.span(),
                      x_.span(), w_.grad, "dw");
  ctx.store(name(), "dw", Role::weight_grad, w_.grad);
}

Tensor Linear::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  if (ctx.precision().block_scaled(name())) {
    Tensor dx;
    if (need_dx) dx = Tensor(x_.n, x_.c, x_.h, x_.w);
    block_scaled_backward(ctx, dy, need_dx ? &dx : nullptr);
    return finish_backward(ctx, dy, dx);
  }
  const emu::GemmPolicy policy = matmul_policy(ctx.precision(), Pass::backward);
  const ScaledOperand dys(ctx, name() + ".dy", dy.span());
  Tensor dx;
  if (need_dx) {
    dx = Tensor(x_.n, x_.c, x_.h, x_.w);
    const ScaledOperand ws(ctx, name() + ".w", w_.value);
    ctx.backend().gemm(ops::GemmShape{dy.n, in_, out_}, dys.values(), ws.values(), dx.span(), policy,
                       TensorCounters(ctx, name() + ".dx").get());
    unscale_result(dys, ws, dx.span());
    ctx.store(name(), "dx", Role::activation_grad, dx.span());
  }
  w_.grad.assign(w_.size(), 0.0f);
  const ScaledOperand xs(ctx, name() + ".x", x_.span());
  ctx.backend().gemm(ops::GemmShape{out_, in_, dy.n, true, false}, dys.values(), xs.values(), w_.grad, policy,
                     TensorCounters(ctx, name() + ".dw").get());
  unscale_result(dys, xs, w_.grad);
  ctx.store(name(), "dw", Role::weight_grad, w_.grad);
  return finish_backward(ctx, dy, dx);
}

Tensor Linear::finish_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  b_.grad.assign(b_.size(), 0.0f);
  ctx.backend().bias_add_backward(dy.channels(), dy.span(), b_.grad, bias_policy(ctx.precision()), ctx.counters());
  ctx.store(name(), "db", Role::weight_grad, b_.grad);
  return dx;
}

}  // namespace mpverify::nn
