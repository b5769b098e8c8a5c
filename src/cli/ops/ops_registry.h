// The op families of `mpverify ops`, one per file in this folder, listed in
// the order of a training step: matrix ops, element-wise ops and pooling,
// normalisation, losses, optimizer updates.
#pragma once

#include <vector>

#include "cli/ops/op_common.h"

namespace mpverify::cli::ops {

OpFamily gemm_op_family();
OpFamily block_gemm_op_family();
OpFamily conv2d_op_family();
OpFamily bias_add_op_family();
OpFamily activation_op_family();
OpFamily max_pool_op_family();
OpFamily batch_norm_op_family();
OpFamily loss_op_family();
OpFamily optimizer_op_family();

inline std::vector<OpFamily> all_op_families() {
  return {
      gemm_op_family(),       block_gemm_op_family(), conv2d_op_family(),   bias_add_op_family(),
      activation_op_family(), max_pool_op_family(),   batch_norm_op_family(), loss_op_family(),
      optimizer_op_family(),
  };
}

}  // namespace mpverify::cli::ops
