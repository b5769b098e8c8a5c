#include "collective/synthetic.h"

#include <cmath>
#include <numbers>

#include "formats/philox.h"

namespace mpverify::collective {

std::vector<float> synthetic_gradients(std::size_t ranks, std::size_t n, std::uint64_t seed) {
  std::vector<float> out(ranks * n);
  for (std::size_t r = 0; r < ranks; ++r)
    for (std::size_t i = 0; i < n; ++i) {
      // (word + 1) * 2^-32 lies in (0, 1]: log never sees 0.
      const double u1 = (static_cast<double>(formats::stochastic_draw(seed, r, 2 * i)) + 1.0) * 0x1p-32;
      const double u2 = static_cast<double>(formats::stochastic_draw(seed, r, 2 * i + 1)) * 0x1p-32;
      const double g = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
      out[r * n + i] = static_cast<float>(g * 0x1p-10);
    }
  return out;
}

}  // namespace mpverify::collective
