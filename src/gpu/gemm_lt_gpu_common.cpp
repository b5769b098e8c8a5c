// The names and checks of gemm_lt_gpu (gemm_lt_gpu.h), in every build.
#include <stdexcept>
#include <string>

#include "gpu/gemm_lt_gpu.h"

namespace mpverify::gpu {

std::string reduction_scheme_name(unsigned scheme) {
  switch (scheme) {  // cublasLtReductionScheme_t: NONE 0, INPLACE 1, COMPUTE_TYPE 2, OUTPUT_TYPE 4
    case 0: return "none";
    case 1: return "in place";
    case 2: return "compute type";
    case 4: return "output type";
    default: return std::to_string(scheme);
  }
}

std::string describe(const LtAlgorithm& a) {
  return "algorithm " + std::to_string(a.id) + ", tile " + std::to_string(a.tile) + ", stages " +
         std::to_string(a.stages) + ", split-K " + std::to_string(a.split_k) + " (reduction " +
         reduction_scheme_name(a.reduction_scheme) + "), swizzle " + std::to_string(a.swizzle) + ", custom " +
         std::to_string(a.custom_option) + ", inner " + std::to_string(a.inner_shape) + ", cluster " +
         std::to_string(a.cluster_shape) + ", workspace " + std::to_string(a.workspace_bytes) + " B";
}

}  // namespace mpverify::gpu
