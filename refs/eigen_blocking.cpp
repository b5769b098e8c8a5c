#include "refs/eigen_blocking.h"
#include "formats/fp_environment.h"

#include <Eigen/Core>

namespace mpverify::refs {

void pin_eigen_blocking() {
  formats::check_fp_environment("the FP32/FP64 references");
  static const bool pinned = [] {
    Eigen::setCpuCacheSizes(kEigenL1, kEigenL2, kEigenL3);
    return true;
  }();
  (void)pinned;
}

EigenCacheSizes eigen_cache_sizes() { return {Eigen::l1CacheSize(), Eigen::l2CacheSize(), Eigen::l3CacheSize()}; }

}  // namespace mpverify::refs
