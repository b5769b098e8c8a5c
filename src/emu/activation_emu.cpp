#include "emu/activation_emu.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"

namespace mpverify::emu {

namespace {

std::vector<float> rounded(std::span<const float> x, const formats::Format& f, Counters* counters) {
  std::vector<float> out(x.begin(), x.end());
  quantize(out, out, QuantizeSpec{f}, counters);
  return out;
}

// Rounds exact double values once to the output format (counted).
void round_out(const std::vector<double>& exact, std::span<float> out, const formats::Format& f, Counters* counters) {
  Counters local;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    formats::Flags flags;
    const std::uint32_t bits = formats::from_double(f, exact[i], {}, flags);
    out[i] = formats::to_float(f, bits, flags);
    if (counters) count_rounding(local, f, exact[i], bits, flags);
  }
  if (counters) *counters += local;
}

void check(std::size_t a, std::size_t b, const char* what) {
  if (a != b)
    throw std::invalid_argument(std::string("activation_emu: ") + what + " sizes differ (" + std::to_string(a) +
                                " vs " + std::to_string(b) + ")");
}

}  // namespace

void activation_emu(const ActivationParams& p, std::span<const float> x, std::span<float> y,
                    const ElementwisePolicy& policy, CounterSet* counters) {
  check(x.size(), y.size(), "x and y");
  const std::vector<float> xr = rounded(x, policy.input, site_counters(counters, "activation.x"));
  std::vector<double> exact(xr.size());
  for (std::size_t i = 0; i < xr.size(); ++i) exact[i] = refs::activation_fp64(p, xr[i]);
  round_out(exact, y, policy.output, site_counters(counters, "activation.y"));
}

void activation_backward_emu(const ActivationParams& p, std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx, const ElementwisePolicy& policy, CounterSet* counters) {
  check(x.size(), dy.size(), "x and dy");
  check(x.size(), dx.size(), "x and dx");
  const std::vector<float> xr = rounded(x, policy.input, site_counters(counters, "activation_backward.x"));
  const std::vector<float> dyr = rounded(dy, policy.input, site_counters(counters, "activation_backward.dy"));
  std::vector<double> exact(xr.size());
  for (std::size_t i = 0; i < xr.size(); ++i)
    exact[i] = refs::activation_derivative_fp64(p, xr[i]) * static_cast<double>(dyr[i]);
  round_out(exact, dx, policy.output, site_counters(counters, "activation_backward.dx"));
}

}  // namespace mpverify::emu
