#pragma once
// The operands of a block-scaled GEMM (block_scaled_gemm.h) as the tensor cores read them: each of A's rows and
// each of B's columns a vector along K of element codes, with one scale per block of K.
//
// A (m x k, or k x m stored when transposed) and B (k x n, or n x k) are block-quantized along K as stored
// (block_quantize.h: axis 1 of A as m x k, axis 0 as k x m; axis 0 of B as k x n, axis 1 as n x k), each with
// its own scheme and options, then laid out. K is padded with zero elements to a multiple of the model's
// granule (block_scaled_k_granule): the padding is what a caller of the hardware adds (tcgen05.mma takes whole
// instructions; DeepGEMM's TMA loads fill past K with zeros); a padded element takes its block's scale, and a
// block lying wholly in the padding the scale the scheme gives a block of zeros (E8M0 2^-127, UE4M3 0, fp32 1
// or fp8-tile1x128's floor 10^-4 / 448), so padding is the same as quantizing the zero-padded tensor. The
// quantization counters count the real elements only.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "emu/block_quantize.h"
#include "emu/block_stats.h"
#include "formats/format.h"
#include "ops/gemm_shape.h"

namespace mpverify::emu {

struct ScaledOperand {
  formats::Format element;
  std::size_t rows = 0;              // m for A, n for B
  std::size_t k = 0;                 // K padded to the granule
  std::size_t block = 0;             // elements of K per scale (a whole-tensor scale: repeated every `block`)
  std::vector<std::uint32_t> codes;  // rows x k element codes, row-major
  std::vector<float> scales;         // rows x (k / block) scale values, row-major
};

struct ScaledOperands {
  ScaledOperand a, b;
  // NVFP4: the GEMM's epilogue alpha, multiplying the accumulated result (block_scaled_gemm.h); 1 otherwise.
  float alpha = 1;
  BlockCounters counters_a, counters_b;
  BlockStats stats_a, stats_b;  // SQNR and scale exponents of each quantization (block_stats.h)
};

// Quantizes A and B along K with their schemes and lays them out for the model; `block` is each scheme's
// block along K, or `whole_block` for a whole-tensor scheme. Throws what block_quantize throws.
ScaledOperands quantize_operands(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                                 const BlockScheme& scheme_a, const BlockScheme& scheme_b,
                                 const BlockQuantizeOptions& options_a, const BlockQuantizeOptions& options_b,
                                 std::size_t k_granule, std::size_t whole_block);

// Transformer Engine's NVFP4 GEMM alpha from the two tensors' amaxes (NaN ignored):
// fl32(fl32(amax_a * amax_b) * fl32(1 / (6^2 * 448^2))) (transformer_engine/common/recipe/nvfp4.cu at 0191035,
// lines 72 and 80: alpha_in * amax_A * amax_B * factor_inv, with alpha_in = 1).
float nvfp4_gemm_alpha(std::span<const float> a, std::span<const float> b);

}  // namespace mpverify::emu
