// The element-wise sum of two tensors of one shape in fp32: out_i = fl32(a_i
// + b_i), one IEEE addition each, what a framework's add kernel computes for
// fp32, fp16 or bf16 operands before it rounds the result to its output type
// (here the caller's Context::store). The transformer's residual connections
// (x + attn(ln1(x)), h + mlp(ln2(h)), and their gradients) and the attention's
// sum of the three input gradients of its Q, K and V projections.
#pragma once

#include <string_view>

#include "nn/tensor.h"

namespace mpverify::nn {

// Throws std::invalid_argument, naming `layer`, unless a and b have one shape.
Tensor add_fp32(std::string_view layer, const Tensor& a, const Tensor& b);

}  // namespace mpverify::nn
