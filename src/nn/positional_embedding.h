// A learned positional embedding, added (GPT-2's wpe): the input is a sequence
// batch, B sequences of T = context_length rows of dim features, sequence
// after sequence (B*T x dim: row b T + t is position t of sequence b), and
//   y[b T + t] = fl32(x[b T + t] + P[t]),
// one fp32 addition per element, stored once in the activation format ("y").
// Backward: dx = dy (returned as it is, not stored again: it is the gradient
// the next layer stored), dP[t] = the sum over b of dy[b T + t] in fp32 in the
// order b = 0, 1, ..., stored in the weight-gradient format ("dw").
//
// Every sequence of a batch has exactly context_length positions: an input
// whose row count is not a multiple of it is refused. P (context_length x dim)
// is initialised as GPT-2's, noise of standard deviation 0.02 (nn::fill_noise)
// from Philox stream `stream` under `seed`; a weight, never block-scaled.
#pragma once

#include <cstdint>

#include "nn/layer.h"

namespace mpverify::nn {

class PositionalEmbedding final : public Layer {
 public:
  PositionalEmbedding(std::string name, int context_length, int dim, std::uint64_t seed, std::uint64_t stream);
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  std::vector<Parameter*> parameters() override { return {&p_}; }
  int context_length() const { return context_length_; }

 private:
  int context_length_, dim_;
  Parameter p_;
  int rows_ = 0;  // the last forward's B*T
};

// Throws std::invalid_argument, naming `layer`, unless x is a sequence batch
// of sequences of `context_length` rows of `dim` features (n a positive
// multiple of context_length, c h w = dim); returns the number of sequences B.
int sequence_count(std::string_view layer, const Tensor& x, int context_length, int dim);

}  // namespace mpverify::nn
