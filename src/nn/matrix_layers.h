// The names of a model's matrix layers (nn::Linear, nn::Conv2d) in model
// order, looking inside the containers (nn::Sequential, nn::TransformerBlock,
// nn::CausalSelfAttention: its projections q, k, v, o). What
// BlockScaling::high_precision_last counts: a model's last that-many names
// keep the plain matrix ops under a block-scaled recipe. The transformer's
// list ends with its output head.
#pragma once

#include <string>
#include <vector>

#include "nn/layer.h"

namespace mpverify::nn {

std::vector<std::string> matrix_layer_names(const Layer& model);

}  // namespace mpverify::nn
