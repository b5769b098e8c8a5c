// Internal: the operands of mma_gemm decoded for its vector kernels (AVX-512: mma_gemm_x86.cpp, AVX2:
// mma_gemm_avx2.cpp), and what the kernels count. The kernels' arithmetic and the conditions under which it
// equals the scalar model are in mma_gemm_x86.cpp (the AVX2 kernel's differences in mma_gemm_avx2.cpp);
// mma_gemm.cpp checks those conditions before calling either.
#pragma once

#include <cstdint>
#include <vector>

#include "emu/mma_model.h"

namespace mpverify::emu::detail {

// Rows of a kernel call and lanes of a column tile.
inline constexpr int kMmaRows = 4;
inline constexpr int kMmaLanes = 16;

// The "lowest bit" exponent of a zero operand: far above any E - F, so a product with a zero factor never
// counts as truncated (mma_gemm.cpp keeps E - F below 200; sums of two stay inside int16).
inline constexpr std::int16_t kZeroLowBit = 1000;
// The value exponent of a zero operand in the per-block minima: a zero product is never shifted out.
inline constexpr std::int32_t kZeroValueExponent = 1000;

// A and B decoded. Rows padded to a multiple of kMmaRows, columns to a multiple of kMmaLanes and k to a
// multiple of the instruction's k, all with zeros; a NaN or infinite operand is stored as a zero too (its
// elements go to the scalar model). Per operand:
//   value: the exact float;
//   e16: the model's exponent (mma_model.h step 1: a subnormal has its format's minimum normal exponent, a
//        zero -126), as int16;
//   l16: the exponent of its lowest set bit (value = odd integer * 2^l16; kZeroLowBit for a zero): a
//        product lost bits in the alignment to E iff l16_a + l16_b < E - F (an odd times an odd is odd);
//   vmin: per fused operation (block of fused_k products), the least ilogb of the block's non-zero
//        operands (kZeroValueExponent if none): |a b| >= 2^(vmin_a + vmin_b), so no product of the block
//        is shifted out where vmin_a + vmin_b >= E - F.
// The int16 panels interleave row pairs (A) or duplicate columns (B) so that one 32-lane int16 vector holds
// two rows x 16 columns: lane 2j + r of a row pair's vector is (row r of the pair, column j).
struct MmaPanels {
  int rows = 0, columns = 0, depth = 0, fused_k = 1;
  std::vector<float> a_value;           // [row * depth + kk]
  std::vector<std::int16_t> a_e16;      // [a16_at(row, kk)]
  std::vector<std::int16_t> a_l16;      // likewise
  std::vector<std::int32_t> a_vmin;     // [row * blocks() + block]
  std::vector<float> b_value;           // [b_at(kk, column)]: tile by tile, so a tile's panel is contiguous
  std::vector<std::int16_t> b_e16;      // [2 * b_at(kk, column) + {0, 1}]: each column twice
  std::vector<std::int16_t> b_l16;      // likewise
  std::vector<std::int32_t> b_vmin;     // [(tile * blocks() + block) * kMmaLanes + lane]

  int blocks() const { return depth / fused_k; }
  std::size_t a16_at(int row, int kk) const {
    return (static_cast<std::size_t>(row / 2) * depth + kk) * 2 + row % 2;
  }
  std::size_t b_at(int kk, int column) const {
    return (static_cast<std::size_t>(column / kMmaLanes) * depth + kk) * kMmaLanes + column % kMmaLanes;
  }
};

// The instruction as the kernel runs it: a chain of fused operations of `fused_k` products each (an
// instruction split into halves is two such, the first's result the second's c), F fraction bits, the
// output rounding; c_emin is the accumulator's minimum normal exponent (-126 for fp32, -14 for fp16).
// promotion > 0 (fp32 output only): every `promotion` products the chain's result is added into an fp32
// accumulator (to nearest-even) and the chain restarts at zero (mma_dot in mma_model.cpp).
struct MmaKernelModel {
  int fused_k = 16, fraction_bits = 25, c_emin = -126, promotion = 0;
  MmaOutput output = MmaOutput::fp32_toward_zero;
};

// Per-lane counts over the lanes kept to the end (see mma_tile_avx512).
struct MmaKernelCounts {
  std::uint64_t c_terms = 0, c_truncated = 0, c_shifted_out = 0;  // the c term of every fused operation
  std::uint64_t products_truncated = 0;    // non-zero products that lost bits to the alignment
  std::uint64_t products_shifted_out = 0;  // non-zero products that are 0 after alignment
  std::uint64_t inexact = 0;               // roundings that changed the result
};

bool cpu_has_avx512_mma();
// AVX2, FMA and F16C, and MXCSR at its default (to nearest, no flush to zero, no denormals-are-zero): the
// AVX2 kernel has no embedded rounding and relies on it.
bool cpu_has_avx2_mma();

// Which kernel mma_gemm runs. automatic: AVX-512 where the CPU has it, else AVX2, else the scalar model.
// The others force a path for tests and benchmarks (a forced path the CPU lacks gives the scalar model).
enum class MmaPath : std::uint8_t { automatic, scalar, avx2, avx512 };
bool mma_path_available(MmaPath path);
// The path of every later mma_gemm call in the process (GemmPolicy::simd = false still forces the scalar
// model); returns the previous one. Not for concurrent use with mma_gemm: tests and benchmarks only.
MmaPath force_mma_path(MmaPath path);

// Rows [row, row + kMmaRows) x columns [tile * kMmaLanes, (tile + 1) * kMmaLanes) of C:
// d[i * p.columns + j] = the chained result of element (i, j) as a float. keep[i * (p.columns / kMmaLanes) +
// tile]: on entry the lanes whose element the kernel is to give; on return a lane is cleared where a fused
// operation's result became infinite (overflow: the scalar model takes it over). Counts cover the lanes
// still kept.
void mma_tile_avx512(const MmaPanels& p, const MmaKernelModel& m, int row, int tile, float* d, std::uint16_t* keep,
                     MmaKernelCounts& counts);
// The same tile, bits and counts, on AVX2 (two halves of 8 columns).
void mma_tile_avx2(const MmaPanels& p, const MmaKernelModel& m, int row, int tile, float* d, std::uint16_t* keep,
                   MmaKernelCounts& counts);

}  // namespace mpverify::emu::detail
