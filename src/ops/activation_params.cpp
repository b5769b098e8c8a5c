#include "ops/activation_params.h"

namespace mpverify::ops {

std::string_view to_string(Activation a) {
  switch (a) {
    case Activation::relu: return "relu";
    case Activation::leaky_relu: return "leaky-relu";
    case Activation::tanh: return "tanh";
    case Activation::sigmoid: return "sigmoid";
    case Activation::gelu: return "gelu";
  }
  return "?";
}

std::optional<Activation> parse_activation(std::string_view name) {
  for (Activation a :
       {Activation::relu, Activation::leaky_relu, Activation::tanh, Activation::sigmoid, Activation::gelu})
    if (to_string(a) == name) return a;
  return std::nullopt;
}

}  // namespace mpverify::ops
