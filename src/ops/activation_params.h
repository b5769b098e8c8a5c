// Which activation, and its parameter: shared by the three sides
// (refs::activation_ref, emu::activation_emu, gpu::activation_gpu).
#pragma once

#include <optional>
#include <string_view>

namespace mpverify::ops {

// gelu: PyTorch's exact erf form, 0.5 x (1 + erf(x / sqrt 2)) (ops/gelu_fp64.h).
enum class Activation { relu, leaky_relu, tanh, sigmoid, gelu };
std::string_view to_string(Activation a);
std::optional<Activation> parse_activation(std::string_view name);

struct ActivationParams {
  Activation kind = Activation::relu;
  double negative_slope = 0.01;  // leaky_relu only
};

}  // namespace mpverify::ops
