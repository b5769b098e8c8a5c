#include "refs/eigen_blocking.h"

#include <Eigen/Core>

namespace mpverify::refs {

void pin_eigen_blocking() {
  static const bool pinned = [] {
    Eigen::setCpuCacheSizes(kEigenL1, kEigenL2, kEigenL3);
    return true;
  }();
  (void)pinned;
}

EigenCacheSizes eigen_cache_sizes() { return {Eigen::l1CacheSize(), Eigen::l2CacheSize(), Eigen::l3CacheSize()}; }

}  // namespace mpverify::refs
