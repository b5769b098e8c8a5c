// The tensor the layers pass around: an NCHW block of floats (a Linear
// layer's activations are n x c x 1 x 1). Every backend keeps its values as
// floats on the host; a value "in fp16" is a float that fp16 holds exactly.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "ops/channel_shape.h"

namespace mpverify::nn {

struct Tensor {
  int n = 0, c = 0, h = 1, w = 1;
  std::vector<float> values;

  Tensor() = default;
  Tensor(int n_, int c_, int h_ = 1, int w_ = 1)
      : n(n_), c(c_), h(h_), w(w_), values(static_cast<std::size_t>(n_) * c_ * h_ * w_, 0.0f) {}

  std::size_t size() const { return values.size(); }
  // Floats per example: c h w.
  std::size_t example_size() const { return static_cast<std::size_t>(c) * h * w; }
  ops::ChannelShape channels() const { return {n, c, h, w}; }
  std::span<float> span() { return values; }
  std::span<const float> span() const { return values; }
};

}  // namespace mpverify::nn
