#include "nn/causal_self_attention.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "nn/policies.h"
#include "nn/positional_embedding.h"
#include "nn/residual_add.h"
#include "nn/tensor_checks.h"
#include "nn/tensor_counters.h"

namespace mpverify::nn {

namespace {

int head_dim_of(const std::string& name, int d_model, int heads, int context_length) {
  if (d_model >= 1 && heads >= 1 && context_length >= 1 && d_model % heads == 0) return d_model / heads;
  std::string message = "CausalSelfAttention ";
  message += name;
  message += ": d_model (";
  message += std::to_string(d_model);
  message += ") must be a positive multiple of heads (";
  message += std::to_string(heads);
  message += ") and context_length >= 1";
  throw std::invalid_argument(message);
}

// A T x hd head slice of a rows x d matrix: rows `row0` .. row0 + T - 1, columns col0 .. col0 + hd - 1.
struct Slice {
  std::size_t row0, col0, T, hd, d;
  void gather(std::span<const float> m, std::span<float> out) const {
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = 0; j < hd; ++j) out[i * hd + j] = m[(row0 + i) * d + col0 + j];
  }
  void scatter(std::span<const float> in, std::span<float> m) const {
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = 0; j < hd; ++j) m[(row0 + i) * d + col0 + j] = in[i * hd + j];
  }
};

}  // namespace

CausalSelfAttention::CausalSelfAttention(std::string name, int d_model, int heads, int context_length,
                                         std::uint64_t seed, std::uint64_t stream)
    : Layer(std::move(name)),
      d_(d_model),
      heads_(heads),
      T_(context_length),
      hd_(head_dim_of(this->name(), d_model, heads, context_length)),
      scale_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd_)))),
      q_(this->name() + ".q", d_model, d_model, seed, stream + 0),
      k_(this->name() + ".k", d_model, d_model, seed, stream + 2),
      v_(this->name() + ".v", d_model, d_model, seed, stream + 4),
      o_(this->name() + ".o", d_model, d_model, seed, stream + 6) {}

std::vector<Parameter*> CausalSelfAttention::parameters() {
  std::vector<Parameter*> all;
  for (Linear* l : {&q_, &k_, &v_, &o_})
    for (Parameter* p : l->parameters()) all.push_back(p);
  return all;
}

void CausalSelfAttention::set_training(bool training) {
  Layer::set_training(training);
  for (Linear* l : {&q_, &k_, &v_, &o_}) l->set_training(training);
}

ops::SoftmaxShape CausalSelfAttention::softmax_shape() const { return {batch_ * heads_ * T_, T_, true}; }

void CausalSelfAttention::head_gemms(Context& ctx, const std::string& tensor, const ops::GemmShape& shape,
                                     const Operand& a, const Operand& b, Layout c_layout, Tensor& c,
                                     const emu::GemmPolicy& policy) const {
  const std::span<const float> sa = a.tensor->span(), sb = b.tensor->span();
  TensorCounters counters(ctx, name() + "." + tensor);
  const auto T = static_cast<std::size_t>(T_), hd = static_cast<std::size_t>(hd_), d = static_cast<std::size_t>(d_);
  const std::size_t square = T * T;
  std::vector<float> abuf(std::max(square, T * hd)), bbuf(abuf.size()), cbuf(abuf.size());
  // The operand of (b, h) as a contiguous matrix: a score block is one already; a head slice is gathered.
  auto view = [&](Layout layout, std::span<const float> m, std::size_t bi, std::size_t h,
                  std::vector<float>& buf) -> std::span<const float> {
    if (layout == Layout::score_block) return m.subspan((bi * static_cast<std::size_t>(heads_) + h) * square, square);
    Slice{bi * T, h * hd, T, hd, d}.gather(m, buf);
    return std::span<const float>(buf.data(), T * hd);
  };
  for (std::size_t bi = 0; bi < static_cast<std::size_t>(batch_); ++bi)
    for (std::size_t h = 0; h < static_cast<std::size_t>(heads_); ++h) {
      const auto av = view(a.layout, sa, bi, h, abuf), bv = view(b.layout, sb, bi, h, bbuf);
      if (c_layout == Layout::score_block) {
        const auto out = c.span().subspan((bi * static_cast<std::size_t>(heads_) + h) * square, square);
        ctx.backend().gemm(shape, av, bv, out, policy, counters.get());
      } else {
        const std::span<float> out(cbuf.data(), T * hd);
        ctx.backend().gemm(shape, av, bv, out, policy, counters.get());
        Slice{bi * T, h * hd, T, hd, d}.scatter(out, c.span());
      }
    }
}

Tensor CausalSelfAttention::forward(Context& ctx, const Tensor& x) {
  batch_ = sequence_count(name(), x, T_, d_);
  q_out_ = q_.forward(ctx, x);
  k_out_ = k_.forward(ctx, x);
  v_out_ = v_.forward(ctx, x);
  const int rows = batch_ * heads_ * T_;
  const emu::GemmPolicy policy = attention_matmul_policy(ctx.precision(), Pass::forward);

  Tensor scores(rows, T_);
  head_gemms(ctx, "scores", ops::GemmShape{T_, T_, hd_, false, true}, {Layout::head_slice, name() + ".q", &q_out_},
             {Layout::head_slice, name() + ".k", &k_out_}, Layout::score_block, scores, policy);
  for (float& s : scores.values) s *= scale_;  // in fp32, on the GEMM's fp32 result
  ctx.store(name(), "scores", Role::activation, scores.span());

  probs_ = Tensor(rows, T_);
  ctx.backend().softmax(softmax_shape(), scores.span(), probs_.span(), softmax_policy(ctx.precision()),
                        ctx.counters());
  ctx.store(name(), "probs", Role::activation, probs_.span());

  Tensor context(x.n, d_);
  head_gemms(ctx, "context", ops::GemmShape{T_, hd_, T_, false, false},
             {Layout::score_block, name() + ".probs", &probs_}, {Layout::head_slice, name() + ".v", &v_out_},
             Layout::head_slice, context, policy);
  ctx.store(name(), "context", Role::activation, context.span());
  return o_.forward(ctx, context);
}

Tensor CausalSelfAttention::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  expect_forward_ran(name(), probs_);
  expect_shape(name(), "dy", dy, batch_ * T_, d_, 1, 1);
  const Tensor dcontext = o_.backward(ctx, dy, true);
  const Precision& p = ctx.precision();
  const emu::GemmPolicy gradient_first = attention_matmul_policy(p, Pass::backward, GradientOperand::first);
  const emu::GemmPolicy gradient_second = attention_matmul_policy(p, Pass::backward, GradientOperand::second);
  const Operand dc{Layout::head_slice, name() + ".dcontext", &dcontext};

  Tensor dprobs(probs_.n, T_);
  head_gemms(ctx, "dprobs", ops::GemmShape{T_, T_, hd_, false, true}, dc,
             {Layout::head_slice, name() + ".v", &v_out_}, Layout::score_block, dprobs, gradient_first);
  ctx.store(name(), "dprobs", Role::activation_grad, dprobs.span());
  Tensor dv(dy.n, d_);
  head_gemms(ctx, "dv", ops::GemmShape{T_, hd_, T_, true, false}, {Layout::score_block, name() + ".probs", &probs_},
             dc, Layout::head_slice, dv, gradient_second);
  ctx.store(name(), "dv", Role::activation_grad, dv.span());

  Tensor dscores(probs_.n, T_);
  ctx.backend().softmax_backward(softmax_shape(), probs_.span(), dprobs.span(), dscores.span(),
                                 softmax_policy(p), ctx.counters());
  for (float& s : dscores.values) s *= scale_;  // the forward's scale, in fp32
  ctx.store(name(), "dscores", Role::activation_grad, dscores.span());

  const Operand ds{Layout::score_block, name() + ".dscores", &dscores};
  Tensor dq(dy.n, d_), dk(dy.n, d_);
  head_gemms(ctx, "dq", ops::GemmShape{T_, hd_, T_, false, false}, ds, {Layout::head_slice, name() + ".k", &k_out_},
             Layout::head_slice, dq, gradient_first);
  ctx.store(name(), "dq", Role::activation_grad, dq.span());
  head_gemms(ctx, "dk", ops::GemmShape{T_, hd_, T_, true, false}, ds, {Layout::head_slice, name() + ".q", &q_out_},
             Layout::head_slice, dk, gradient_first);
  ctx.store(name(), "dk", Role::activation_grad, dk.span());

  const Tensor dxq = q_.backward(ctx, dq, need_dx), dxk = k_.backward(ctx, dk, need_dx),
               dxv = v_.backward(ctx, dv, need_dx);
  if (!need_dx) return {};
  Tensor dx = add_fp32(name(), add_fp32(name(), dxq, dxk), dxv);
  ctx.store(name(), "dx", Role::activation_grad, dx.span());
  return dx;
}

}  // namespace mpverify::nn
