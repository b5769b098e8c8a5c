#include "emu/block_stats.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace mpverify::emu {

double BlockStats::sqnr_db() const {
  if (counted == 0) return std::numeric_limits<double>::quiet_NaN();
  if (noise == 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / noise);
}

BlockStats& BlockStats::operator+=(const BlockStats& o) {
  nonzero_in += o.nonzero_in;
  signal += o.signal;
  noise += o.noise;
  counted += o.counted;
  for (const auto& [exponent, blocks] : o.scale_exponents) scale_exponents[exponent] += blocks;
  zero_scales += o.zero_scales;
  return *this;
}

BlockStats block_stats(std::span<const float> x, const BlockQuantized& q) {
  if (x.size() != q.values.size())
    throw std::invalid_argument("block_stats: the input has " + std::to_string(x.size()) +
                                " elements, its quantization " + std::to_string(q.values.size()));
  BlockStats s;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) continue;
    s.nonzero_in += x[i] != 0;
    if (!std::isfinite(q.values[i])) continue;
    const double r = x[i], d = r - static_cast<double>(q.values[i]);
    s.signal += r * r;
    s.noise += d * d;
    s.counted += 1;
  }
  for (const float scale : q.scales) {
    if (scale == 0) ++s.zero_scales;
    else if (std::isfinite(scale)) ++s.scale_exponents[std::ilogb(scale)];
  }
  return s;
}

}  // namespace mpverify::emu
