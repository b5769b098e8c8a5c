#include "emu/block_sum.h"

#include <bit>
#include <stdexcept>
#include <string>
#include <vector>

#include "emu/accumulate.h"

namespace mpverify::emu {

void check_lanes(int lanes) {
  if (lanes < 1 || lanes > 1024 || !std::has_single_bit(static_cast<unsigned>(lanes)))
    throw std::invalid_argument("block_sum: lanes must be a power of two in 1..1024, got " + std::to_string(lanes));
}

double block_sum(std::span<const double> terms, const formats::Format& format, int lanes, Counters* counters) {
  check_lanes(lanes);
  const auto l = static_cast<std::size_t>(lanes);
  const NativeFormat native = native_format(format);
  std::vector<double> lane(l, 0.0);
  for (std::size_t i = 0; i < terms.size(); ++i)
    lane[i % l] = add_in_format(format, native, lane[i % l], terms[i], counters);
  for (std::size_t stride = l / 2; stride >= 1; stride /= 2)
    for (std::size_t t = 0; t < stride; ++t) lane[t] = add_in_format(format, native, lane[t], lane[t + stride], counters);
  return lane[0];
}

std::size_t block_sum_depth(std::size_t m, int lanes) {
  check_lanes(lanes);
  const auto l = static_cast<std::size_t>(lanes);
  return (m + l - 1) / l + static_cast<std::size_t>(std::countr_zero(l));
}

}  // namespace mpverify::emu
