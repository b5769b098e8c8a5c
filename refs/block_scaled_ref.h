// The reference block-scaled GEMM: the published accumulation rules of Blackwell's block-scaled tcgen05.mma and
// of DeepGEMM's Hopper FP8 GEMM, computed from element and scale values in FP64 and binary32 arithmetic, apart
// from the emulator (emu/block_scaled_gemm.h, emu/mma_block_scaled.h: integer terms), so that tests and
// `mpverify ops --op block-gemm` can hold the emulator to it bit for bit. It starts from operands already
// quantized (the quantization is block_quantize's, tested on its own).
//
// mxf8f6f4 (MMA-Sim, microsoft/MMA-Sim at c785138, mmasim/simulator/arithmetic.py lines 132-193): per
//   instruction of 32 products, every term truncated toward zero to a multiple of 2^(E - 25), where a product's
//   exponent is e(a) + e(b) + log2 X_a + log2 X_b (e(x) = floor(log2 |x|), at least the element format's
//   minimum normal exponent, -126 for a zero) and c's is e(c); E the largest; the exact sum rounded toward zero
//   to fp32. NaN from the FP64 sum of the scaled products and c (or a NaN scale): 0x7FFFFFFF; infinite: that
//   infinity.
// mxf4nvf4 (arithmetic.py lines 196-224): per instruction of 64, each group of 16 products summed exactly, times
//   its scales' significands, with the scales' exponents alone (UE4M3: at least -6; a zero scale -126); with c,
//   truncated to multiples of 2^(E - 35), summed, rounded toward zero to fp32. A NaN scale or c: 0x7FFFFFFF;
//   an infinite c: that infinity. Then fl32(alpha * d) when alpha is not 1 (NVFP4's epilogue).
// Hopper FP8 blockwise (deepseek-ai/DeepGEMM at 54e2261, deep_gemm/include/deep_gemm/impls/
//   sm90_fp8_gemm_1d2d.cuh lines 315, 333, 343): per block of 128, refs::dot_mma_ref of the wgmma k32 E4M3
//   instruction (F = 13, E8M13) from zero, then final = fmaf(fl32(X_a * X_b), partial, final) from +0.
// Each chain runs along K in order, from c = +0, each result the next one's c.
#pragma once

#include <cstddef>
#include <span>

#include "formats/format.h"

namespace mpverify::refs {

enum class BlockScaledRule { mxf8f6f4, mxf4nvf4, hopper_fp8_blockwise };

// One operand: `rows` vectors (A's rows, B's columns) of k element values, k a multiple of the rule's
// instruction (32, 64, 128), and rows x (k / block) scale values, both row-major.
struct BlockScaledOperandRef {
  formats::Format element;     // its minimum normal exponent matters (mxf8f6f4)
  enum class Scale { e8m0, ue4m3, fp32 } scale = Scale::e8m0;
  std::size_t rows = 0, k = 0, block = 32;
  std::span<const float> values;
  std::span<const float> scales;
};

// c (a.rows x b.rows, row-major) under the rule; alpha multiplies mxf4nvf4's results (1: left alone).
// Throws std::invalid_argument for operands that do not fit.
void block_scaled_gemm_ref(const BlockScaledOperandRef& a, const BlockScaledOperandRef& b, BlockScaledRule rule,
                           float alpha, std::span<float> c);

}  // namespace mpverify::refs
