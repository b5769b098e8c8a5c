// Synthetic per-rank gradients with a seed, for trying the reduction orders
// without a training run: element i of rank r is a standard normal draw
// (Box-Muller on two Philox words: stochastic_draw(seed, r, 2i) and
// (seed, r, 2i + 1)), times 2^-10, a typical gradient magnitude. The same
// seed gives the same values on every run of a build (the draws are
// integers; log, sqrt and cos are the C library's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mpverify::collective {

// ranks x n floats, row r = rank r.
std::vector<float> synthetic_gradients(std::size_t ranks, std::size_t n, std::uint64_t seed);

}  // namespace mpverify::collective
