// Reference activations, forward and backward: evaluated in FP64 and, for
// the float outputs, rounded once. Same signature shape as emu::activation_emu
// and gpu::activation_gpu.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace mpverify::refs {

enum class Activation { relu, leaky_relu, tanh, sigmoid };
std::string_view to_string(Activation a);
std::optional<Activation> parse_activation(std::string_view name);

struct ActivationParams {
  Activation kind = Activation::relu;
  double negative_slope = 0.01;  // leaky_relu only
};

// f(x) and f'(x) in double: the oracle the float paths are measured against.
double activation_fp64(const ActivationParams& p, double x);
double activation_derivative_fp64(const ActivationParams& p, double x);

// y[i] = f(x[i]); dx[i] = f'(x[i]) * dy[i]. In FP64, each result rounded once to float.
void activation_ref(const ActivationParams& p, std::span<const float> x, std::span<float> y);
void activation_backward_ref(const ActivationParams& p, std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx);

}  // namespace mpverify::refs
