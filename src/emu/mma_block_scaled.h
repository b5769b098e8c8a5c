#pragma once
// Blackwell's block-scaled tensor-core instructions (tcgen05.mma ... .block_scale) on one output element, as
// MMA-Sim models them (microsoft/MMA-Sim at c785138, mmasim/simulator/nv_ptx.py lines 220-264,
// class tcgen05mma_block_scale: F = 35 for k = 64, else 25 (line 223); arithmetic.py lines 132-156
// fused_dot_add and 196-224 nv_fused_dot_add_with_block_scale):
//
// kind::mxf8f6f4 (k = 32, one UE8M0 scale per 32 elements of A's row and of B's column, so one pair per
//   instruction): mma_model.h's fused dot-add with F = 25 and an fp32 output toward zero, every product's
//   term exponent being e_a + e_b + log2(X_a) + log2(X_b) (arithmetic.py line 155); c keeps its own exponent.
//   A NaN scale (E8M0 0xFF) gives the canonical NaN, as MMA-Sim's FP64 probe of the scaled products does.
//   MMA-Sim runs this path for E4M3 and E5M2 (its E2M1 operands arrive as uint8 codes its decoder does not
//   take; E3M2 and E2M3 are a TODO in mmasim/isa/nv_ptx/nv_tcgen05mma.py line 56): FP6 and FP4 operands
//   here follow the same rule with their own formats' minimum normal exponents (mma_terms.h).
// kind::mxf4nvf4 (k = 64, E2M1 operands; UE8M0 scales per 32 or 16 elements, or UE4M3 per 16): each group of
//   16 products is summed exactly (FP4 products are multiples of 2^-2 below 36: the sum is exact), times the
//   significands of its two scales, one term whose exponent is the two scales' exponents alone (lines 215-220:
//   the group sum is not normalised; a UE4M3 scale keeps E4M3's minimum normal exponent -6, a zero scale
//   gets -126); c is one more term; F = 35; the sum rounded to fp32 toward zero. A NaN among the
//   instruction's scales or in c gives the canonical NaN (line 204). An infinite c gives that infinity (the
//   fused dot-add's rule 5, mma_model.h; MMA-Sim would raise on math.trunc(inf)). A result of 2^128 or
//   more is infinite.
#include <cstdint>
#include <span>
#include <string_view>

#include "emu/mma_model.h"

namespace mpverify::emu {

struct BlockScaledInstruction {
  enum class Kind : std::uint8_t { mxf8f6f4, mxf4nvf4 };
  Kind kind = Kind::mxf8f6f4;
  MmaModel model;          // a, b: the element formats; c fp32; k = 32 or 64; F = 25 or 35; fp32 toward zero
  formats::Format scale;   // e8m0 or ue4m3
  int block = 32;          // elements of K per scale: 32 (mxf8f6f4; mxf4nvf4 with UE8M0), or 16
};

// kind::mxf8f6f4 for A's and B's element formats (FP8, FP6 or FP4, at most 8 bits, signed); throws
// std::invalid_argument otherwise.
BlockScaledInstruction mxf8f6f4_instruction(const formats::Format& a, const formats::Format& b);

// kind::mxf4nvf4 with these scales: e8m0 with block 32 (MXFP4) or 16, or ue4m3 with block 16 (NVFP4);
// throws std::invalid_argument otherwise.
BlockScaledInstruction mxf4nvf4_instruction(const formats::Format& scale, int block);

// One instruction on one output element: a and b hold k element codes each (A's row, B's column), scale_a and
// scale_b the k / block scales of those elements as values (a power of two for E8M0, a UE4M3 value; NaN for
// the NaN code), c the fp32 accumulator's bits; returns d's fp32 bits. counts accumulates what was lost.
// Throws std::invalid_argument for wrong lengths or a scale the format cannot hold.
std::uint32_t block_scaled_dot_add(const BlockScaledInstruction& in, std::span<const std::uint32_t> a,
                                   std::span<const std::uint32_t> b, std::span<const float> scale_a,
                                   std::span<const float> scale_b, std::uint32_t c, MmaCounts* counts = nullptr);

namespace detail {

// A scale as the instructions split it (MMA-Sim's extract_significand_exponent): the significand times 8 (an
// integer: UE4M3 has 3 fraction bits, E8M0 none) and the exponent, at least E4M3's -6 for UE4M3 (its
// subnormals keep -6); a zero (UE4M3 only) has exponent -126. valid is false for a value the format cannot
// hold (block_scaled_dot_add throws on it). Internal: the fast path (block_scaled_fast.h) splits each block's
// scale once with it.
struct BlockScaleTerm {
  std::uint64_t significand8 = 8;
  int exponent = 0;
  bool nan = false;
  bool valid = true;
};
BlockScaleTerm block_scale_term(const formats::Format& scale_format, float v);

}  // namespace detail

}  // namespace mpverify::emu
