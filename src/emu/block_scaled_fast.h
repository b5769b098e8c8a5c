// Internal: the two paths of block_scaled_multiply (block_scaled_gemm.h). The scalar path runs the instruction
// models (mma_block_scaled.h, mma_model.h) and DeepGEMM's promotion one output element at a time and is the
// definition of the semantics (block_scaled_gemm.cpp); the fast path (block_scaled_fast.cpp) decodes every
// element code and every scale once per GEMM and does each instruction's fused sum in integer arithmetic,
// handing an output element to the scalar path wherever it cannot guarantee the same bits and counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "emu/block_scaled_gemm.h"
#include "emu/mma_block_scaled.h"

namespace mpverify::emu::detail {

// The scalar model of one GEMM's output elements. Constructing it checks that the operands fit the model
// (throws std::invalid_argument as block_scaled_multiply does); the operands must outlive it.
class BlockScaledScalar {
 public:
  BlockScaledScalar(const ScaledOperand& a, const ScaledOperand& b, float alpha, BlockScaledAccumulation model);

  // C[i][j]'s fp32 bits, every instruction's (and promotion's) counts added to n.
  std::uint32_t element(std::size_t i, std::size_t j, BlockScaledGemmCounters& n) const;

  const ScaledOperand& a() const { return a_; }
  const ScaledOperand& b() const { return b_; }
  float alpha() const { return alpha_; }
  BlockScaledAccumulation model() const { return model_; }
  const BlockScaledInstruction& instruction() const { return in_; }  // Blackwell's models
  const MmaModel& wgmma() const { return *wgmma_; }                  // sm90: sm90.wgmma.k32.f32.e4m3

 private:
  const ScaledOperand& a_;
  const ScaledOperand& b_;
  float alpha_;
  BlockScaledAccumulation model_;
  BlockScaledInstruction in_;
  const MmaModel* wgmma_ = nullptr;
};

// The scalar path's steps that the fast path reuses where its own arithmetic does not hold: the epilogue
// d = fl32(alpha * d) to nearest-even (NaN canonical), and DeepGEMM's promotion of one block's partial sum,
// s = fl32(scale_a * scale_b), final = fma(s, partial, final), counted in n.promotions(_inexact).
std::uint32_t block_scaled_epilogue(float alpha, std::uint32_t d);
std::uint32_t deepgemm_promote(std::uint32_t final_accum, std::uint32_t partial, float scale_a, float scale_b,
                               BlockScaledGemmCounters& n);

// block_scaled_multiply on either path (fast = false: every element by the scalar model); checks the operands
// as block_scaled_multiply does. Returns how many elements the fast path computed itself (0 when fast is
// false), so that a test can see it run.
std::size_t block_scaled_multiply_path(const ScaledOperand& a, const ScaledOperand& b, float alpha,
                                       BlockScaledAccumulation model, std::span<float> c, BlockScaledGemmCounters& n,
                                       bool fast);

// The fast path over every element of c (a.rows x b.rows), each element it does not hold by scalar.element;
// returns how many it computed itself. fraction_bits_delta != 0 runs the fast arithmetic with F off by that
// much (never in the emulator: the twin test shows that such a fast path is caught).
std::size_t block_scaled_multiply_fast(const BlockScaledScalar& scalar, std::span<float> c, BlockScaledGemmCounters& n,
                                       int fraction_bits_delta = 0);

}  // namespace mpverify::emu::detail
