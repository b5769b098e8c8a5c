#include "activation_ref.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace mpverify::refs {

std::string_view to_string(Activation a) {
  switch (a) {
    case Activation::relu: return "relu";
    case Activation::leaky_relu: return "leaky-relu";
    case Activation::tanh: return "tanh";
    case Activation::sigmoid: return "sigmoid";
  }
  return "?";
}

std::optional<Activation> parse_activation(std::string_view name) {
  for (Activation a : {Activation::relu, Activation::leaky_relu, Activation::tanh, Activation::sigmoid})
    if (to_string(a) == name) return a;
  return std::nullopt;
}

double activation_fp64(const ActivationParams& p, double x) {
  switch (p.kind) {
    case Activation::relu: return !(x <= 0) ? x : 0.0;  // NaN stays NaN, as torch.relu (clamp_min) keeps it
    case Activation::leaky_relu: return x > 0 ? x : p.negative_slope * x;
    case Activation::tanh: return std::tanh(x);
    // 1 / (1 + e^-x) loses nothing for x >= 0; for x < 0 write it as
    // e^x / (1 + e^x) so that tiny results keep their relative accuracy.
    case Activation::sigmoid: return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
  }
  return NAN;
}

double activation_derivative_fp64(const ActivationParams& p, double x) {
  switch (p.kind) {
    case Activation::relu: return x > 0 ? 1.0 : 0.0;  // 0 at x = 0, as PyTorch
    case Activation::leaky_relu: return x > 0 ? 1.0 : p.negative_slope;
    // 1 - tanh^2 and s (1 - s) cancel where |x| is large (tanh and s near 1):
    // at x = 14.5, 1 - tanh^2 is 9e-13 and double's tanh leaves it a 1e-4
    // relative error. In e = exp(-2|x|) (resp. exp(-|x|)) nothing cancels:
    // tanh' = 4e / (1 + e)^2, sigmoid' = e / (1 + e)^2, both even in x.
    case Activation::tanh: {
      const double e = std::exp(-2.0 * std::fabs(x));
      return 4.0 * e / ((1.0 + e) * (1.0 + e));
    }
    case Activation::sigmoid: {
      const double e = std::exp(-std::fabs(x));
      return e / ((1.0 + e) * (1.0 + e));
    }
  }
  return NAN;
}

namespace {
void check(std::size_t a, std::size_t b, const char* what) {
  if (a != b)
    throw std::invalid_argument(std::string("activation: ") + what + " sizes differ (" + std::to_string(a) + " vs " +
                                std::to_string(b) + ")");
}
}  // namespace

void activation_ref(const ActivationParams& p, std::span<const float> x, std::span<float> y) {
  check(x.size(), y.size(), "x and y");
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(activation_fp64(p, x[i]));
}

void activation_backward_ref(const ActivationParams& p, std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx) {
  check(x.size(), dy.size(), "x and dy");
  check(x.size(), dx.size(), "x and dx");
  for (std::size_t i = 0; i < x.size(); ++i)
    dx[i] = static_cast<float>(activation_derivative_fp64(p, x[i]) * static_cast<double>(dy[i]));
}

}  // namespace mpverify::refs
