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
  // Lane t takes terms t, t + lanes, ...: chunk by chunk, each chunk one step of every lane.
  std::vector<double> lane(l, 0.0);
  std::size_t i = 0;
  for (; i + l <= terms.size(); i += l) add_lanes(format, lane.data(), terms.data() + i, l, counters);
  add_lanes(format, lane.data(), terms.data() + i, terms.size() - i, counters);
  for (std::size_t stride = l / 2; stride >= 1; stride /= 2)
    add_lanes(format, lane.data(), lane.data() + stride, stride, counters);
  return lane[0];
}

std::size_t block_sum_depth(std::size_t m, int lanes) {
  check_lanes(lanes);
  const auto l = static_cast<std::size_t>(lanes);
  return (m + l - 1) / l + static_cast<std::size_t>(std::countr_zero(l));
}

}  // namespace mpverify::emu
