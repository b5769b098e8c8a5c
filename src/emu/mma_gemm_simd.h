// Internal: the operands of mma_gemm decoded for its vector kernel (mma_gemm_x86.cpp), and what the kernel
// counts. The kernel's arithmetic and the conditions under which it equals the scalar model are in
// mma_gemm_x86.cpp; mma_gemm.cpp checks those conditions before calling it.
#pragma once

#include <cstdint>
#include <vector>

#include "emu/mma_model.h"

namespace mpverify::emu::detail {

// Rows of a kernel call and lanes of a column tile.
inline constexpr int kMmaRows = 4;
inline constexpr int kMmaLanes = 16;

// A and B as values (exact floats) and the model's exponents (mma_model.h step 1: a subnormal has its
// format's minimum normal exponent, a zero -126). Rows padded to a multiple of kMmaRows, columns to a
// multiple of kMmaLanes and k to a multiple of the instruction's k, all with zeros; a NaN or infinite
// operand is stored as a zero too (its elements go to the scalar model).
struct MmaPanels {
  int rows = 0, columns = 0, depth = 0;
  std::vector<float> a_value;            // [row * depth + kk]
  std::vector<std::int32_t> a_exponent;  // likewise
  std::vector<float> b_value;            // [b_at(kk, column)]: tile by tile, so a tile's panel is contiguous
  std::vector<std::int32_t> b_exponent;  // likewise

  std::size_t b_at(int kk, int column) const {
    return (static_cast<std::size_t>(column / kMmaLanes) * depth + kk) * kMmaLanes + column % kMmaLanes;
  }
};

// The instruction as the kernel runs it: a chain of fused operations of `fused_k` products each (an
// instruction split into halves is two such, the first's result the second's c), F fraction bits, the
// output rounding; c_emin is the accumulator's minimum normal exponent (-126 for fp32, -14 for fp16).
struct MmaKernelModel {
  int fused_k = 16, fraction_bits = 25, c_emin = -126;
  MmaOutput output = MmaOutput::fp32_toward_zero;
};

// Per-lane counts over the lanes kept to the end (see mma_tile_avx512).
struct MmaKernelCounts {
  std::uint64_t c_terms = 0, c_truncated = 0, c_shifted_out = 0;  // the c term of every fused operation
  std::uint64_t products_truncated = 0;       // products that lost bits to the alignment
  std::uint64_t products_aligned_to_zero = 0;  // products that are 0 after alignment, zero products included
  std::uint64_t inexact = 0;                  // roundings that changed the result
};

bool cpu_has_avx512_mma();

// Rows [row, row + kMmaRows) x columns [tile * kMmaLanes, (tile + 1) * kMmaLanes) of C:
// d[i * p.columns + j] = the chained result of element (i, j) as a float. keep[i * (p.columns / kMmaLanes) +
// tile]: on entry the lanes whose element the kernel is to give; on return a lane is cleared where the
// element's result became infinite (overflow: the scalar model takes it over). Counts cover the lanes still
// kept.
void mma_tile_avx512(const MmaPanels& p, const MmaKernelModel& m, int row, int tile, float* d, std::uint16_t* keep,
                     MmaKernelCounts& counts);

}  // namespace mpverify::emu::detail
