// The emulated GEMM under a tensor-core instruction model (Accumulation::mma): every output element is
// mma_dot (mma_model.h) over A's row and B's column, with the same bits and the same counts. A vector path
// computes most elements, promotion included, chosen at run time: AVX-512 F and BW (mma_gemm_x86.cpp), else
// AVX2 with FMA and F16C (mma_gemm_avx2.cpp); the scalar model itself computes the rest and stays the single
// definition of the semantics.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "emu/mma_model.h"
#include "ops/gemm_shape.h"

namespace mpverify::emu {

// acc (m x n) = the model's chained instructions over A (m x k, row-major, values of A's format) and B
// (k x n, row-major, values of B's format), k padded with zero products to a multiple of m.k. swapped: the
// model's a operand is B's (mma_operands in gemm_emu.cpp). counts accumulates every instruction's counts.
// simd = false forces the scalar model for every element. Returns how many elements the vector kernel gave
// (0 without AVX-512 or AVX2 or where its conditions do not hold), for tests that must see it run.
std::size_t mma_gemm(const ops::GemmShape& s, std::span<const float> A, std::span<const float> B, std::span<float> acc,
              const MmaModel& m, bool swapped, int promotion_interval, bool simd, MmaCounts& counts);

}  // namespace mpverify::emu
