// Reference row softmax (ops/softmax_shape.h), per row over its visible
// columns V (all of them, or 0..i under the causal mask):
//   y_j = exp(x_j - m) / sum_{k in V} exp(x_k - m),  m = max_{k in V} x_k,
//   y_j = 0 for a masked column;
// backward, from the output y: dx_j = y_j (dy_j - sum_{k in V} dy_k y_k), 0 where masked.
// In FP64, the float outputs rounded once. Same signature shape as emu::softmax_emu.
#pragma once

#include <span>
#include <vector>

#include "ops/softmax_shape.h"

namespace mpverify::refs {

// The oracle in double (finite-difference checks perturb its inputs).
std::vector<double> softmax_fp64(const ops::SoftmaxShape& s, std::span<const double> x);
std::vector<double> softmax_backward_fp64(const ops::SoftmaxShape& s, std::span<const double> y,
                                          std::span<const double> dy);

// Every span has s.size() elements; throws std::invalid_argument naming a wrong size.
void softmax_ref(const ops::SoftmaxShape& s, std::span<const float> x, std::span<float> y);
void softmax_backward_ref(const ops::SoftmaxShape& s, std::span<const float> y, std::span<const float> dy,
                          std::span<float> dx);

}  // namespace mpverify::refs
