// Standard normal draws for the calibration simulations (gate_calibration.cpp
// and gate_calibration_sequential.cpp), reproducible from a seed and a stream.
#pragma once

#include <cmath>
#include <cstdint>

#include "data/random.h"

namespace mpverify::experiments {

// Standard normal draws: Marsaglia's polar method (log and sqrt only) on the
// Philox uniforms; 53-bit uniforms so that the tails are not quantised.
class Normal {
 public:
  Normal(std::uint64_t seed, std::uint64_t stream) : draws_(seed, stream) {}
  double next() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    for (;;) {
      const double u = 2 * uniform53() - 1, v = 2 * uniform53() - 1;
      const double s = u * u + v * v;
      if (s >= 1 || s == 0) continue;
      const double f = std::sqrt(-2 * std::log(s) / s);
      spare_ = v * f;
      have_spare_ = true;
      return u * f;
    }
  }
  data::Draws& draws() { return draws_; }

 private:
  double uniform53() {
    const std::uint64_t hi = draws_.next_u32() >> 5, lo = draws_.next_u32() >> 6;  // 27 + 26 bits
    return static_cast<double>((hi << 26) | lo) * 0x1p-53;
  }
  data::Draws draws_;
  double spare_ = 0;
  bool have_spare_ = false;
};

}  // namespace mpverify::experiments
