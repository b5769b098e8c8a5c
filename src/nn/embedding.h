// A token embedding (torch.nn.Embedding): each token id selects a row of the
// vocab x dim table W.
//
// Token ids come in as the tensor the layer is given: n x 1 (c = h = w = 1),
// one id per row, each a float holding an integer in [0, vocab) (floats hold
// every integer below 2^24 exactly; anything else is refused, naming the row).
// So a model that starts with an Embedding takes its batch as any other model
// does, as a Tensor, and a sequence batch of B sequences of T tokens is
// B*T x 1, sequence after sequence (nn/positional_embedding.h, the layout of
// the transformer's layers).
//
// Forward: y (n x dim) row i = W[id_i], the working weights' values, stored
// once in the activation format ("y"). Backward: dW[v] = the sum of the rows
// of dy whose id is v, a scatter-add in fp32 in row order (as PyTorch's
// embedding backward accumulates in fp32 for fp16 and bf16 gradients), rows
// of W that no id selects get 0; stored in the weight-gradient format ("dw").
// The ids have no gradient: backward with need_dx throws std::invalid_argument
// (an Embedding is a model's first layer).
//
// W is initialised as GPT-2's embeddings, zero-mean noise of standard
// deviation 0.02 (nn::fill_noise) from Philox stream `stream` under `seed`.
// Its Parameter is of kind weight (it is rounded to Precision::weights like
// any weight), but it is no matrix layer: block-scaled recipes never apply to it.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/layer.h"

namespace mpverify::nn {

inline constexpr double kEmbeddingInitStddev = 0.02;

class Embedding final : public Layer {
 public:
  Embedding(std::string name, int vocab, int dim, std::uint64_t seed, std::uint64_t stream);
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  std::vector<Parameter*> parameters() override { return {&w_}; }
  int vocab() const { return vocab_; }
  int dim() const { return dim_; }

 private:
  int vocab_, dim_;
  Parameter w_;
  std::vector<std::int32_t> ids_;  // the last forward's token ids, for backward
};

// The token ids of an n x 1 tensor (see above); throws std::invalid_argument,
// naming `layer` and the first offending row, for a value that is not an
// integer in [0, vocab).
std::vector<std::int32_t> token_ids(std::string_view layer, const Tensor& x, int vocab);

}  // namespace mpverify::nn
