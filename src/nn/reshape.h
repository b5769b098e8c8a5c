// Reinterprets each example's c h w values as c' x h' x w' (the generator's
// n x 3136 Linear output as n x 64 x 7 x 7) and back in backward: the NCHW
// layout keeps an example's values contiguous, so no value moves and no
// arithmetic happens; nothing is stored.
#pragma once

#include "nn/layer.h"

namespace mpverify::nn {

class Reshape final : public Layer {
 public:
  Reshape(std::string name, int channels, int height, int width);
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;

 private:
  int c_, h_, w_;
  int in_n_ = 0, in_c_ = 0, in_h_ = 0, in_w_ = 0;  // the last forward's input shape
};

}  // namespace mpverify::nn
