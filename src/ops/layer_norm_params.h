// The shape, hyperparameter and shape check of layer normalisation over the
// last dimension, shared by refs::layer_norm_ref and emu::layer_norm_emu:
// x is rows x features, row-major; each row is normalised over its features,
// and gamma and beta hold one value per feature (torch.nn.LayerNorm(features)).
#pragma once

#include <cstddef>

namespace mpverify::ops {

struct LayerNormShape {
  int rows = 1, features = 1;
  std::size_t size() const { return static_cast<std::size_t>(rows) * static_cast<std::size_t>(features); }
};

struct LayerNormParams {
  double eps = 1e-5;  // PyTorch's default
};

// Throws std::invalid_argument unless rows >= 1 and 1 <= features <= 2^24
// (the count divides the sums, and must be exact in fp32 as a kernel's is).
void check_layer_norm_shape(const LayerNormShape& s, const char* op);

}  // namespace mpverify::ops
