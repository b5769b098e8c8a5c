#include "emu/activation_emu.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "ops/fp64_math.h"

namespace mpverify::emu {

namespace {

void check(std::size_t a, std::size_t b, const char* what) {
  if (a != b)
    throw std::invalid_argument(std::string("activation_emu: ") + what + " sizes differ (" + std::to_string(a) +
                                " vs " + std::to_string(b) + ")");
}

}  // namespace

void activation_emu(const ops::ActivationParams& p, std::span<const float> x, std::span<float> y,
                    const ElementwisePolicy& policy, CounterSet* counters) {
  check(x.size(), y.size(), "x and y");
  const std::vector<float> xr = quantized_copy(x, policy.input, site_counters(counters, "activation.x"));
  std::vector<double> exact(xr.size());
  for (std::size_t i = 0; i < xr.size(); ++i) exact[i] = ops::activation_fp64(p, xr[i]);
  round_values(exact, y, policy.output, site_counters(counters, "activation.y"));
}

void activation_backward_emu(const ops::ActivationParams& p, std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx, const ElementwisePolicy& policy, CounterSet* counters) {
  check(x.size(), dy.size(), "x and dy");
  check(x.size(), dx.size(), "x and dx");
  const std::vector<float> xr = quantized_copy(x, policy.input, site_counters(counters, "activation_backward.x"));
  const std::vector<float> dyr = quantized_copy(dy, policy.input, site_counters(counters, "activation_backward.dy"));
  std::vector<double> exact(xr.size());
  for (std::size_t i = 0; i < xr.size(); ++i)
    exact[i] = ops::activation_derivative_fp64(p, xr[i]) * static_cast<double>(dyr[i]);
  round_values(exact, dx, policy.output, site_counters(counters, "activation_backward.dx"));
}

}  // namespace mpverify::emu
