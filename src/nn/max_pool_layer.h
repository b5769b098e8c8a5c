// 2-D max pooling as a layer (refs/max_pool_ref.h has the semantics: ties
// keep the first index, padding never wins): a square window, stride and
// padding. It keeps its input x: backward scatters dy to each window's
// winner, found again from x.
#pragma once

#include "nn/layer.h"
#include "refs/max_pool_ref.h"

namespace mpverify::nn {

class MaxPool2d final : public Layer {
 public:
  MaxPool2d(std::string name, int kernel, int stride, int pad = 0);
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  // The pooling's shape for input x.
  ops::PoolShape shape_for(const Tensor& x) const;

 private:
  int kernel_, stride_, pad_;
  Tensor x_;  // the last forward's input, for backward
};

}  // namespace mpverify::nn
