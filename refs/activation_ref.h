// Reference activations, forward and backward: evaluated in FP64
// (ops/fp64_math.h) and, for the float outputs, rounded once. Same signature
// shape as emu::activation_emu and gpu::activation_gpu.
#pragma once

#include <span>

#include "ops/activation_params.h"

namespace mpverify::refs {

// y[i] = f(x[i]); dx[i] = f'(x[i]) * dy[i]. In FP64, each result rounded once to float.
void activation_ref(const ops::ActivationParams& p, std::span<const float> x, std::span<float> y);
void activation_backward_ref(const ops::ActivationParams& p, std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx);

}  // namespace mpverify::refs
