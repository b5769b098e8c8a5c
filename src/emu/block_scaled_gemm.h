#pragma once
// Block-scaled GEMM: C = op(A) op(B) with A and B block-quantized along K (block_quantize.h,
// block_scaled_operand.h) and the products accumulated by a tensor-core model, per output element, along K in
// order. Three models (docs/tensor-cores.md#block-scaled-gemm):
//
// sm100.mxf8f6f4  Blackwell tcgen05.mma kind::mxf8f6f4 (mma_block_scaled.h) chained along K from c = +0, each
//                 result the next one's c: k = 32, one UE8M0 scale pair per instruction. Schemes with E8M0
//                 scales per 32 elements of K (mxfp8-e4m3, mxfp8-e5m2, mxfp6-*, mxfp4), in any pairing.
// sm100.mxf4nvf4  kind::mxf4nvf4 chained the same way: k = 64, E2M1 elements; both operands mxfp4 (UE8M0 per
//                 32) or both nvfp4 (UE4M3 per 16). NVFP4's fp32 tensor scales enter as the epilogue's alpha,
//                 as Transformer Engine and cuBLAS apply them (D = alpha * accumulator, beta = 0):
//                 C = fl32(alpha * d), alpha from nvfp4_gemm_alpha (block_scaled_operand.h), rounded to
//                 nearest-even.
// sm90.fp8-blockwise  Hopper, DeepSeek-V3 and DeepGEMM (deepseek-ai/DeepGEMM at 54e2261,
//                 deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh lines 287-348): for each block of
//                 128 along K, four sm90.wgmma.k32.f32.e4m3 (mma_presets.h: F = 13, E8M13 results) chained from
//                 zero over the unscaled elements (WGMMA::wgmma(..., accum, k) with scale_d = k != 0, line 315),
//                 then promoted: s = fl32(scale_a * scale_b) first (line 333), then
//                 final = fl32(s * partial + final) as one fused multiply-add (line 343: `final_accum += s *
//                 accum`; nvcc contracts it to FFMA by default, and DeepGEMM's JIT flags, csrc/jit/compiler.hpp
//                 line 55, do not turn --fmad off), final starting at +0. fp32 scales (fp8-tile1x128 for A,
//                 fp8-block128x128 or fp8-tile1x128 for B, fp8-tensor: its one scale at every block) with E4M3
//                 elements. DeepGEMM stores C as bf16; C here is the fp32 accumulator.
//
// NaN results are the canonical 0x7FFFFFFF. The scalar instruction models (mma_model.h, mma_block_scaled.h)
// define the result, about a microsecond per instruction. block_scaled_multiply runs a fast path
// (block_scaled_fast.h) with the same bits and the same counters: codes and scales decoded once per GEMM, each
// instruction's fused sum in integer arithmetic, some 20-40 ns per instruction on one core (10-30 times the
// scalar models; experiments/speed/bench_block_scaled_gemm); an output element with a NaN, infinite or invalid
// code or scale, or whose chain leaves fp32's normal range, is computed by the scalar models instead.
// tests/block_scaled_fast_test.cpp holds the two paths equal.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "emu/block_quantize.h"
#include "emu/block_scaled_operand.h"
#include "emu/block_stats.h"
#include "emu/mma_model.h"
#include "ops/gemm_shape.h"

namespace mpverify::emu {

enum class BlockScaledAccumulation : std::uint8_t { sm100_mxf8f6f4, sm100_mxf4nvf4, sm90_fp8_blockwise };
std::string_view to_string(BlockScaledAccumulation a);
std::optional<BlockScaledAccumulation> parse_block_scaled_accumulation(std::string_view name);

// K is padded with zero elements to a multiple of this (block_scaled_operand.h): the instruction's k (32, 64),
// or sm90's block of 128.
std::size_t block_scaled_k_granule(BlockScaledAccumulation a);

struct BlockScaledGemmPolicy {
  BlockScheme scheme_a = *find_block_scheme("mxfp8-e4m3");
  BlockScheme scheme_b = *find_block_scheme("mxfp8-e4m3");
  BlockScaledAccumulation accumulation = BlockScaledAccumulation::sm100_mxf8f6f4;
  BlockQuantizeOptions quantize_a, quantize_b;  // scale rule (E8M0), rounding (stochastic for gradients), seed
};

// Throws std::invalid_argument saying which scheme the model cannot take and which it can.
void validate(const BlockScaledGemmPolicy& p);

struct BlockScaledGemmCounters {
  BlockCounters a, b;     // the quantization of A and of B (real elements only)
  BlockStats stats_a, stats_b;  // ... its SQNR and scale exponents (block_stats.h; block_scaled_gemm only)
  MmaCounts accumulate;   // every instruction (mma_model.h: terms, truncated, shifted out, roundings, ...)
  std::uint64_t promotions = 0;          // sm90: fused multiply-adds into the fp32 accumulator
  std::uint64_t promotions_inexact = 0;  // ... whose result was rounded

  BlockScaledGemmCounters& operator+=(const BlockScaledGemmCounters& o);
};

// C (m x n, row-major) = op(A) op(B) as above: float A and B in, quantized along K per the policy.
void block_scaled_gemm(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                       std::span<float> c, const BlockScaledGemmPolicy& policy,
                       BlockScaledGemmCounters* counters = nullptr);

// The same from operands already quantized and laid out (quantize_operands; a.k == b.k, a multiple of the
// granule): c is a.rows x b.rows, row-major. alpha (NVFP4's epilogue; 1 leaves the result alone) multiplies
// sm100.mxf4nvf4's results. Throws std::invalid_argument when the operands do not fit the model.
void block_scaled_multiply(const ScaledOperand& a, const ScaledOperand& b, float alpha, BlockScaledAccumulation model,
                           std::span<float> c, BlockScaledGemmCounters* counters = nullptr);

}  // namespace mpverify::emu
