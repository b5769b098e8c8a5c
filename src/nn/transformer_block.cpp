#include "nn/transformer_block.h"

#include "nn/positional_embedding.h"
#include "nn/residual_add.h"

namespace mpverify::nn {

TransformerBlock::TransformerBlock(std::string name, int d_model, int heads, int context_length,
                                   std::uint64_t seed, std::uint64_t stream)
    : Layer(std::move(name)),
      d_(d_model),
      context_length_(context_length),
      ln1_(this->name() + ".ln1", d_model),
      attn_(this->name() + ".attn", d_model, heads, context_length, seed, stream),
      ln2_(this->name() + ".ln2", d_model),
      fc1_(this->name() + ".fc1", d_model, kMlpExpansion * d_model, seed, stream + 8),
      gelu_(this->name() + ".gelu", ops::ActivationParams{ops::Activation::gelu, 0.0}),
      fc2_(this->name() + ".fc2", kMlpExpansion * d_model, d_model, seed, stream + 10) {}

std::vector<Parameter*> TransformerBlock::parameters() {
  std::vector<Parameter*> all;
  for (Layer* l : mutable_sublayers())
    for (Parameter* p : l->parameters()) all.push_back(p);
  return all;
}

void TransformerBlock::set_training(bool training) {
  Layer::set_training(training);
  for (Layer* l : mutable_sublayers()) l->set_training(training);
}

Tensor TransformerBlock::forward(Context& ctx, const Tensor& x) {
  sequence_count(name(), x, context_length_, d_);
  Tensor h = add_fp32(name(), x, attn_.forward(ctx, ln1_.forward(ctx, x)));
  ctx.store(name(), "h", Role::activation, h.span());
  const Tensor m = fc2_.forward(ctx, gelu_.forward(ctx, fc1_.forward(ctx, ln2_.forward(ctx, h))));
  Tensor y = add_fp32(name(), h, m);
  ctx.store(name(), "y", Role::activation, y.span());
  return y;
}

Tensor TransformerBlock::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  const Tensor d_gelu = fc2_.backward(ctx, dy, true);
  const Tensor d_fc1 = gelu_.backward(ctx, d_gelu, true);
  const Tensor dm = ln2_.backward(ctx, fc1_.backward(ctx, d_fc1, true), true);
  Tensor dh = add_fp32(name(), dy, dm);
  ctx.store(name(), "dh", Role::activation_grad, dh.span());
  const Tensor da = ln1_.backward(ctx, attn_.backward(ctx, dh, true), need_dx);
  if (!need_dx) return {};
  Tensor dx = add_fp32(name(), dh, da);
  ctx.store(name(), "dx", Role::activation_grad, dx.span());
  return dx;
}

}  // namespace mpverify::nn
