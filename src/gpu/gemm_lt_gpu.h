// A GEMM through cuBLASLt with the algorithm its heuristic ranks first, and that algorithm's configuration
// as cublasLtMatmulAlgoConfigGetAttribute reads it: which algorithm, tile, stages, split of K and how the
// split parts are reduced. It answers in which order a cuBLAS GEMM sums (experiments/hardware): a split of
// K makes each output the reduction of several partial sums, each a chain of the instruction.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "gpu/gemm_gpu.h"
#include "ops/gemm_shape.h"

namespace mpverify::gpu {

// The values of cublasLtMatmulAlgoConfigAttributes_t (cublasLt.h names each id's enum).
struct LtAlgorithm {
  int id = -1;                    // CUBLASLT_ALGO_CONFIG_ID
  unsigned tile = 0;              // cublasLtMatmulTile_t
  unsigned stages = 0;            // cublasLtMatmulStages_t
  int split_k = 1;                // CUBLASLT_ALGO_CONFIG_SPLITK_NUM: parts of K computed apart
  unsigned reduction_scheme = 0;  // cublasLtReductionScheme_t: how those parts are added
  unsigned swizzle = 0, custom_option = 0, inner_shape = 0, cluster_shape = 0;
  std::size_t workspace_bytes = 0;  // what the heuristic said the algorithm needs
};

// "none", "in place", "compute type", "output type" (cublasLtReductionScheme_t), else the number.
std::string reduction_scheme_name(unsigned scheme);
// One line: "algorithm 23, tile 20, stages 16, split-K 1 (reduction none), swizzle 0, custom 0, inner 0,
// cluster 0, workspace 0 B".
std::string describe(const LtAlgorithm& algorithm);

// C = A B (row-major, no transposes) with A's and B's values in fp16 (fp16_fp32_accumulate) or bf16
// (bf16_fp32_accumulate), fp32 accumulation and output, through cublasLtMatmul with the heuristic's first
// algorithm (32 MiB of workspace allowed); returns that algorithm. Throws std::invalid_argument for another
// compute or a transpose, std::runtime_error without a device and on any CUDA/cuBLAS error.
LtAlgorithm gemm_lt_gpu(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                        std::span<float> c, GemmCompute compute);

}  // namespace mpverify::gpu
