// A pre-layer-norm transformer block (GPT-2's, without dropout) over a
// sequence batch (B*T x d, nn/positional_embedding.h):
//   h = x + NAME.attn(NAME.ln1(x))                                  (stored "h")
//   y = h + NAME.fc2(gelu(NAME.fc1(NAME.ln2(h))))                   (stored "y")
// NAME.attn is nn::CausalSelfAttention (H heads), NAME.ln1 and NAME.ln2 are
// nn::LayerNorm (d features), the MLP is NAME.fc1 (nn::Linear d -> 4d),
// NAME.gelu (nn::ActivationLayer, exact GELU) and NAME.fc2 (nn::Linear 4d ->
// d). The residual additions are fp32 (nn/residual_add.h), their results
// stored once in the activation format. Backward: dh = dy + the MLP branch's
// dx ("dh"), dx = dh + the attention branch's dx ("dx"), both fp32 sums
// stored in the activation-gradient format.
//
// Philox streams under `seed`: attn stream + 0..7 (nn/causal_self_attention.h),
// fc1 stream + 8, fc2 stream + 10 (two each: weight and bias).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/activation_layer.h"
#include "nn/causal_self_attention.h"
#include "nn/layer_norm_layer.h"
#include "nn/linear.h"

namespace mpverify::nn {

inline constexpr int kMlpExpansion = 4;  // the MLP's width: 4 d_model

class TransformerBlock final : public Layer {
 public:
  TransformerBlock(std::string name, int d_model, int heads, int context_length, std::uint64_t seed,
                   std::uint64_t stream);
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  // Every sub-layer's parameters, in forward order.
  std::vector<Parameter*> parameters() override;
  void set_training(bool training) override;

  // The sub-layers in forward order: ln1, attn, ln2, fc1, gelu, fc2.
  std::vector<const Layer*> sublayers() const { return {&ln1_, &attn_, &ln2_, &fc1_, &gelu_, &fc2_}; }
  const CausalSelfAttention& attention() const { return attn_; }

 private:
  std::vector<Layer*> mutable_sublayers() { return {&ln1_, &attn_, &ln2_, &fc1_, &gelu_, &fc2_}; }

  int d_, context_length_;
  LayerNorm ln1_;
  CausalSelfAttention attn_;
  LayerNorm ln2_;
  Linear fc1_;
  ActivationLayer gelu_;
  Linear fc2_;
};

}  // namespace mpverify::nn
