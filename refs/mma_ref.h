// The reference tensor-core GEMM: each output element as a chain of one tensor-core instruction along K,
// computed from the operands' values in FP64 and binary32 arithmetic, apart from the emulator's integer
// implementation (emu/mma_model.cpp), so that `mpverify ops` can hold the emulated GEMM to it bit for bit.
// The rule is the published one (MMA-Sim, arXiv 2511.10909, commit c785138: mmasim/simulator/arithmetic.py
// nv_fused_dot_add):
// every term (each product a_i b_i and c) has the exponent e_a + e_b (c: e_c), where e is floor(log2 |x|)
// but at least the format's minimum normal exponent, and -126 for a zero; with E the largest, each term is
// truncated toward zero to a multiple of 2^(E - F); their exact sum is rounded once to the output.
//
// Layouts and shapes: ops/gemm_shape.h.
#pragma once

#include <span>

#include "formats/format.h"
#include "ops/gemm_shape.h"

namespace mpverify::refs {

// One instruction, as its documentation states it (the emulator's emu::MmaModel carries the same fields).
struct TensorCoreInstruction {
  enum class Output { fp32_toward_zero, e8m13_toward_zero, fp16_nearest_even };
  formats::Format a, b;      // the operands' formats (their minimum normal exponents matter)
  formats::Format c;         // fp32, or fp16 with an fp16 output
  int k = 16;                // products per instruction
  int fraction_bits = 25;    // F
  bool split_halves = false;  // two operations of k/2, the first result the second's c
  bool fp8_through_fp16 = false;  // Hopper's FP8 mma.sync: two fp16 operations from zero over the products
                                  // k mod 4 < 2, then the rest, then an fp32 add of c to nearest-even
  Output output = Output::fp32_toward_zero;
};

// d = c + a . b as a chain of `instruction` along the vectors (their length a multiple of its k), in order of
// increasing index, each result the next one's c; promotion_interval > 0 adds the chain into an fp32
// accumulator that starts at c every that many elements (binary32 addition to nearest-even) and restarts the
// chain at zero. a, b and c hold values of the instruction's formats; d is in its c format, held as float.
float dot_mma_ref(std::span<const float> a, std::span<const float> b, float c, const TensorCoreInstruction& instruction,
                  int promotion_interval = 0);

// C = op(A) op(B) with every element a chain of `instruction` along K (padded with zero products to a multiple
// of its k) from c = +0; promotion_interval > 0 adds the chain into an fp32 accumulator every that many
// elements (binary32 addition to nearest-even) and restarts it at zero. a and b hold values of the
// instruction's a and b formats. The result is in the instruction's c format, held as float.
void gemm_mma_ref(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b, std::span<float> c,
                  const TensorCoreInstruction& instruction, int promotion_interval = 0);

}  // namespace mpverify::refs
