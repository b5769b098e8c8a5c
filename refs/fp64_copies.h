// The FP64 references' float32 interface: inputs widened to double, results rounded once to float32.
#pragma once

#include <span>
#include <vector>

namespace mpverify::refs::detail {

inline std::vector<double> widen(std::span<const float> v) { return {v.begin(), v.end()}; }

inline void narrow(const std::vector<double>& from, std::span<float> to) {
  for (std::size_t i = 0; i < to.size(); ++i) to[i] = static_cast<float>(from[i]);
}

}  // namespace mpverify::refs::detail
