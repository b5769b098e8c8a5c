// Shape checks the layers share: a gradient handed to backward must have the
// shape of the output of the last forward, and an input the shape the layer
// was built for. Both throw std::invalid_argument naming the layer.
#pragma once

#include <string_view>

#include "nn/tensor.h"

namespace mpverify::nn {

// Throws unless t is n x c x h x w; `what` names the tensor ("dy", "x").
void expect_shape(std::string_view layer, std::string_view what, const Tensor& t, int n, int c, int h, int w);
// Throws unless a forward has saved its input (`saved` is not empty).
void expect_forward_ran(std::string_view layer, const Tensor& saved);

}  // namespace mpverify::nn
