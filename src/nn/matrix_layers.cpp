#include "nn/matrix_layers.h"

#include "nn/causal_self_attention.h"
#include "nn/conv2d_layer.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "nn/transformer_block.h"

namespace mpverify::nn {

namespace {

void collect(const Layer& layer, std::vector<std::string>& names) {
  if (const auto* s = dynamic_cast<const Sequential*>(&layer)) {
    for (const auto& l : s->layers()) collect(*l, names);
  } else if (const auto* b = dynamic_cast<const TransformerBlock*>(&layer)) {
    for (const Layer* l : b->sublayers()) collect(*l, names);
  } else if (const auto* a = dynamic_cast<const CausalSelfAttention*>(&layer)) {
    for (const Linear* l : a->projections()) collect(*l, names);
  } else if (dynamic_cast<const Linear*>(&layer) || dynamic_cast<const Conv2d*>(&layer)) {
    names.push_back(layer.name());
  }
}

}  // namespace

std::vector<std::string> matrix_layer_names(const Layer& model) {
  std::vector<std::string> names;
  collect(model, names);
  return names;
}

}  // namespace mpverify::nn
