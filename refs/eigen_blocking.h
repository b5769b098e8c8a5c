// Eigen picks the blocking of a matrix product, and with it the order in which
// each dot product is summed, from the CPU's cache sizes as it reads them at
// run time: the same product of the same floats then gives different bits on
// machines with different caches (seen between two x86 servers: the fp32
// reference runs of the same seed diverged). pin_eigen_blocking() sets fixed
// sizes once, before any product, so a seed gives the same FP32/FP64
// reference bits on every machine. Every Eigen product of the project calls it.
#pragma once

#include <cstddef>

namespace mpverify::refs {

// The cache sizes every product's blocking is computed from (bytes).
inline constexpr std::ptrdiff_t kEigenL1 = 32 * 1024, kEigenL2 = 1024 * 1024, kEigenL3 = 8 * 1024 * 1024;

// Idempotent and thread-safe (a function-local static).
void pin_eigen_blocking();

// The L1, L2 and L3 sizes Eigen's products are blocked for now, as Eigen reports them.
struct EigenCacheSizes {
  std::ptrdiff_t l1 = 0, l2 = 0, l3 = 0;
};
EigenCacheSizes eigen_cache_sizes();

}  // namespace mpverify::refs
