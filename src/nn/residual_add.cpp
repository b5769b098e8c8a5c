#include "nn/residual_add.h"

#include "nn/tensor_checks.h"

namespace mpverify::nn {

Tensor add_fp32(std::string_view layer, const Tensor& a, const Tensor& b) {
  expect_shape(layer, "the residual's second operand", b, a.n, a.c, a.h, a.w);
  Tensor out(a.n, a.c, a.h, a.w);
  for (std::size_t i = 0; i < out.size(); ++i) out.values[i] = a.values[i] + b.values[i];
  return out;
}

}  // namespace mpverify::nn
