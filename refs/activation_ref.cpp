#include "refs/activation_ref.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "ops/fp64_math.h"

namespace mpverify::refs {

namespace {
void check(std::size_t a, std::size_t b, const char* what) {
  if (a != b)
    throw std::invalid_argument(std::string("activation: ") + what + " sizes differ (" + std::to_string(a) + " vs " +
                                std::to_string(b) + ")");
}
}  // namespace

void activation_ref(const ops::ActivationParams& p, std::span<const float> x, std::span<float> y) {
  check(x.size(), y.size(), "x and y");
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(ops::activation_fp64(p, x[i]));
}

void activation_backward_ref(const ops::ActivationParams& p, std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx) {
  check(x.size(), dy.size(), "x and dy");
  check(x.size(), dx.size(), "x and dx");
  for (std::size_t i = 0; i < x.size(); ++i)
    dx[i] = static_cast<float>(ops::activation_derivative_fp64(p, x[i]) * static_cast<double>(dy[i]));
}

}  // namespace mpverify::refs
