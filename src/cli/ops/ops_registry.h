// The op families of `mpverify ops`, one per file in this folder.
#pragma once

#include <vector>

#include "cli/ops/op_common.h"

namespace mpverify::cli::ops {

OpFamily gemm_op_family();
OpFamily activation_op_family();
OpFamily loss_op_family();
OpFamily optimizer_op_family();
OpFamily conv2d_op_family();

inline std::vector<OpFamily> all_op_families() {
  return {
      gemm_op_family(),
      activation_op_family(),
      loss_op_family(),
      optimizer_op_family(),
      conv2d_op_family(),
  };
}

}  // namespace mpverify::cli::ops
