#pragma once
// One tensor-core instruction, d = c + sum_i a_i * b_i, as the hardware computes each output element: the
// published bit-accurate model (MMA-Sim, Xie et al., arXiv 2511.10909, microsoft/MMA-Sim at commit c785138:
// mmasim/simulator/arithmetic.py nv_fused_dot_add and mmasim/simulator/nv_ptx.py, called functions.py and
// nv.py in older snapshots; Khattak & Mikaitis, arXiv 2512.07004):
//   1. every operand is a significand s and an exponent e (s in [1, 2) for normals; a subnormal keeps its
//      format's minimum normal exponent with s < 1; a zero has s = 0 and e = -126);
//   2. a product is the term (s_a * s_b, e_a + e_b): its exponent is not that of its value; c is one more term;
//   3. with E the largest exponent of all terms, each term is aligned to E and truncated toward zero to F
//      fraction bits: t_i = trunc(s_i * 2^(F + e_i - E)) * 2^-F;
//   4. the t_i are added exactly and the sum times 2^E is rounded once: to fp32 toward zero, to an fp32 that
//      keeps 13 fraction bits (E8M13, FP8 on Ada and Hopper) toward zero, or to fp16 to nearest-even; a result
//      of 2^128 (fp16: 65520) or more is infinite; a zero result is +0;
//   5. a NaN operand, inf * 0 or +inf with -inf gives the canonical NaN (fp32 0x7FFFFFFF, fp16 0x7FFF); another
//      infinite operand gives that infinity.
// Ampere and Ada compute their k = 16 (f16, bf16), k = 8 (tf32) and k = 32 (fp8) instructions as two such
// operations of k/2, the first result being the second's c (split_halves). The presets are in mma_presets.h.
// Hopper has no FP8 mma.sync: ptxas compiles it (k = 32) to conversions of every operand to fp16 (exact),
// two f16 HMMA.16816 (Hopper's rule above) from zero over the products k mod 4 < 2, then k mod 4 >= 2, and
// an fp32 FADD of c to nearest-even (fp8_through_fp16; seen in the SASS of sm_90 and reproduced bit for bit
// on an H200, tests/data/mma_recorded_h200).
#include <cstdint>
#include <span>
#include <string>

#include "formats/format.h"

namespace mpverify::emu {

enum class MmaOutput : std::uint8_t {
  fp32_toward_zero,
  e8m13_toward_zero,  // fp32 bits whose low 10 fraction bits are zero: FP8 instructions of Ada and Hopper
  fp16_nearest_even,
};

// One instruction's arithmetic. c and d share a format: fp32 (fp32_toward_zero, e8m13_toward_zero) or fp16.
struct MmaModel {
  std::string name;           // the preset's name, or "custom"
  formats::Format a, b;       // the operands' formats (tf32 operands are fp32 values with 13 low bits clear)
  formats::Format c;          // the accumulator's and the output's format: fp32 or fp16
  int k = 16;                 // products per instruction (per output element)
  int fraction_bits = 25;     // F: fraction bits kept after alignment, 8..40
  bool split_halves = false;  // two fused operations of k/2 (Ampere, Ada)
  bool fp8_through_fp16 = false;  // Hopper's FP8 mma.sync, as ptxas compiles it (see above)
  MmaOutput output = MmaOutput::fp32_toward_zero;
};

// What one or more instructions lost. A term is a product or c entering a fused operation.
struct MmaCounts {
  std::uint64_t terms = 0;              // non-zero finite terms aligned
  std::uint64_t terms_truncated = 0;    // of those, terms that lost bits to the alignment's truncation
  std::uint64_t terms_shifted_out = 0;  // of those, terms that lost every bit (swamped by the largest term)
  std::uint64_t roundings = 0;          // fused operations' results rounded to the output
  std::uint64_t roundings_inexact = 0;  // of those, results that changed in the rounding
  std::uint64_t overflows = 0;          // results that became infinite although every operand was finite
  std::uint64_t nans = 0;               // NaN results

  MmaCounts& operator+=(const MmaCounts& o);
  friend bool operator==(const MmaCounts&, const MmaCounts&) = default;
};

// Throws std::invalid_argument (what is wrong, and the allowed values) for a model outside the ranges above.
void validate(const MmaModel& m);

// The unit roundoff u of one step of a length-K chain of this instruction, for the a priori bound
// gamma_K(u) * condition + u_out of a GEMM built from it (derivation at the definition).
double mma_unit_roundoff(const MmaModel& m);

// One instruction on one output element: a and b hold m.k operand bits each, c the accumulator's bits;
// returns d's bits in m.c's format. counts (optional) accumulates what was lost.
std::uint32_t mma_dot_add(const MmaModel& m, std::span<const std::uint32_t> a, std::span<const std::uint32_t> b,
                          std::uint32_t c, MmaCounts* counts = nullptr);

// A dot product of any length that is a multiple of m.k: instructions chained in order of increasing K, each
// result the next one's c. promotion_interval > 0 (a multiple of m.k) adds the chain's partial result into an
// fp32 accumulator every promotion_interval elements, by an fp32 addition to nearest-even (a NaN: the GPU's
// canonical 0x7FFFFFFF), and restarts the chain at zero (DeepSeek-V3, arXiv 2412.19437 section 3.3.2:
// N_C = 128); the accumulator starts at c (an fp32 c; promotion needs fp32 outputs) and is the result.
std::uint32_t mma_dot(const MmaModel& m, std::span<const std::uint32_t> a, std::span<const std::uint32_t> b,
                      std::uint32_t c, int promotion_interval = 0, MmaCounts* counts = nullptr);

}  // namespace mpverify::emu
