// Causal multi-head self-attention (GPT-2's, without dropout) over a sequence
// batch: x is B*T x d (B sequences of T = context_length rows, sequence after
// sequence: nn/positional_embedding.h), H heads of hd = d / H features each.
//
//   q, k, v = the projections NAME.q, NAME.k, NAME.v of x (nn::Linear, d -> d)
//   per sequence b and head h, with Q_bh the T x hd slice of q (rows of b,
//   columns h hd .. h hd + hd - 1), likewise K_bh, V_bh:
//     S_bh = fl32(fl32(Q_bh K_bh^T) * fl32(1 / sqrt(hd)))   (stored "scores")
//     P_bh = softmax(S_bh), causal: row i sees columns 0..i   (stored "probs")
//     C_bh = P_bh V_bh, into the columns of head h            (stored "context")
//   y = NAME.o(C) (nn::Linear, d -> d; it stores its own "y").
// Backward, from dy: dC = NAME.o's dx; dP_bh = dC_bh V_bh^T ("dprobs"),
// dV_bh = P_bh^T dC_bh ("dv"), dS = softmax_backward(P, dP) * scale in fp32
// ("dscores"), dQ_bh = dS_bh K_bh ("dq"), dK_bh = dS_bh^T Q_bh ("dk"), each
// projection's backward, and dx = fl32(fl32(dx_q + dx_k) + dx_v) ("dx").
//
// The four projections are nn::Linear layers, so a block-scaled recipe applies
// to them as to any Linear. The two batched matmuls are not: each (b, h) GEMM
// is backend.gemm with nn::attention_matmul_policy (both operands in the
// activation format, unscaled: bf16 under fp8 and the block-scaled recipes,
// fp16 under o1 and o2, fp32 under fp32; the recipe's accumulation). Every GEMM returns fp32 and the layer stores each tensor once,
// whole (B*H*T x T for scores, probs, dprobs, dscores; B*T x d for the rest),
// in its role's format, so the recorders see them as one tensor each; the
// matmuls' counters go to NAME.scores, NAME.context, NAME.dprobs, NAME.dv,
// NAME.dq, NAME.dk (nn/tensor_counters.h). The softmax runs through the
// backend with nn::softmax_policy (fp32 math). Projections draw from Philox
// streams stream + 0, 2, 4, 6 (q, k, v, o) under `seed`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/layer.h"
#include "nn/linear.h"
#include "ops/softmax_shape.h"

namespace mpverify::nn {

class CausalSelfAttention final : public Layer {
 public:
  // Throws std::invalid_argument unless heads divides d_model and every size is >= 1.
  CausalSelfAttention(std::string name, int d_model, int heads, int context_length, std::uint64_t seed,
                      std::uint64_t stream);
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  std::vector<Parameter*> parameters() override;
  void set_training(bool training) override;

  // The projections in forward order: q, k, v, o.
  std::vector<const Linear*> projections() const { return {&q_, &k_, &v_, &o_}; }
  int heads() const { return heads_; }
  int head_dim() const { return hd_; }
  int context_length() const { return T_; }
  float scale() const { return scale_; }  // fl32(1 / sqrt(head_dim))
  // The last forward's probabilities (B*H*T x T, as stored).
  const Tensor& probs() const { return probs_; }

 private:
  // Where a GEMM operand or result lives: the T x hd head slice of a B*T x d
  // tensor, or the T x T block of a B*H*T x T one.
  enum class Layout { head_slice, score_block };
  struct Operand {
    Layout layout;
    std::string site;  // the operand-scaling site
    const Tensor* tensor;
  };
  // For every (b, h): c_bh = op(a_bh) op(b_bh) through backend.gemm, counted as NAME.TENSOR.
  void head_gemms(Context& ctx, const std::string& tensor, const ops::GemmShape& shape, const Operand& a,
                  const Operand& b, Layout c_layout, Tensor& c, const emu::GemmPolicy& policy) const;
  ops::SoftmaxShape softmax_shape() const;

  int d_, heads_, T_, hd_;
  float scale_;
  Linear q_, k_, v_, o_;
  int batch_ = 0;
  Tensor q_out_, k_out_, v_out_, probs_;  // the last forward's, as stored, for backward
};

}  // namespace mpverify::nn
