// Reference 2D max pooling over NCHW: window r x s, stride, padding; the
// semantics shared by the three sides are in ops/max_pool_argmax.h.
// Forward is exact (it selects an input); backward in FP64, rounded once to float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ops/pool_shape.h"

namespace mpverify::refs {

// The oracle in double (finite-difference checks perturb its inputs).
std::vector<double> max_pool_fp64(const ops::PoolShape& p, std::span<const double> x);
std::vector<double> max_pool_backward_fp64(const ops::PoolShape& p, std::span<const double> x,
                                           std::span<const double> dy);

// Sizes: x, dx: x_size(); y, dy: y_size(). Throws std::invalid_argument naming a wrong one.
void max_pool_ref(const ops::PoolShape& p, std::span<const float> x, std::span<float> y);
void max_pool_backward_ref(const ops::PoolShape& p, std::span<const float> x, std::span<const float> dy,
                           std::span<float> dx);

}  // namespace mpverify::refs
