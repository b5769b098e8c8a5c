// The emulated GEMM: C = op(A) op(B) with the inputs rounded to a format,
// products accumulated under a chosen model, and C rounded to an output
// format, counting what every rounding did. Same shape as refs::gemm_ref.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "emu/counters.h"
#include "emu/mma_model.h"
#include "formats/format.h"
#include "formats/rounding.h"
#include "ops/gemm_shape.h"

namespace mpverify::emu {

enum class Accumulation {
  // c <- fl32(c + a*b), one rounding per step (an fp32 FMA), k in order.
  fp32,
  // c <- fl16(c + a*b), one fp16 rounding per step: an fp16-accumulating GEMM
  // built from fused fp16 multiply-adds (HFMA).
  fp16,
  // The tensor-core model of Fasi, Higham, Mikaitis and Pranesh (2021): each
  // block of `block_size` exact products plus the accumulator is aligned to
  // its largest term, every term truncated to 24 + extra_bits bits below that
  // term's leading bit, summed without normalising, and the sum rounded to
  // fp32 (toward zero on the hardware).
  tensor_core,
  // A tensor-core instruction as the hardware computes it (emu/mma_presets.h: an architecture's GEMM
  // instruction or a preset), chained along k in order, each result the next one's c, k padded with zero
  // products to a multiple of the instruction's k; optionally promoted into fp32 every
  // promotion_interval elements (emu/mma_model.h).
  mma,
};
std::string_view to_string(Accumulation a);

struct TensorCoreModel {
  int block_size = 4;   // products per block (V100: 4; A100 fp16: 8)
  int extra_bits = 3;   // alignment bits kept beyond fp32's 24 (carry-out bits included)
  formats::Rounding rounding = formats::Rounding::toward_zero;  // of each block's sum to fp32
};

struct GemmPolicy {
  formats::Format input = formats::parse_format("fp16");  // A's format, and B's unless input_b is set
  std::optional<formats::Format> input_b;                 // B's format (an E4M3 x E5M2 GEMM, ...)
  Accumulation accumulation = Accumulation::fp32;
  formats::Format output = formats::parse_format("fp32");
  TensorCoreModel tensor_core;
  std::optional<MmaModel> mma;  // with Accumulation::mma: the instruction (its a and b formats: A's and B's)
  int promotion_interval = 0;   // with Accumulation::mma: elements of k between fp32 promotions (0: none)
  // Use the AVX-512 tile kernels where the CPU has them (same results and
  // counts as the portable loops, element by element; false forces those).
  bool simd = true;
  // With counters and Accumulation::fp32: count every step's inexact at
  // "gemm.accumulate" too (fl32(c + a*b) != c + a*b), at a cost (see below).
  // Other models count inexact without it (fp16, mma) or nothing (tensor_core).
  bool count_step_inexact = false;

  const formats::Format& b_format() const { return input_b ? *input_b : input; }
};

// Counter sites: "gemm.a" and "gemm.b" (input rounding), "gemm.accumulate"
// (fp16 accumulation: every step; swamping = a lost update of c by a*b,
// emu/lost_update.h; mma: every instruction's terms and rounding, see
// mma_counters_into; fp32: see below), "gemm.c" (output rounding).
//
// fp32 accumulation at "gemm.accumulate", per step (one FMA, c <- fl32(c + a*b)):
// elements, addends_nonzero and swamped (count_update with u = a*b exact),
// overflow (finite a, b, c, infinite result), nan_created (a NaN from non-NaN
// a, b, c: inf * 0, inf - inf) and nonfinite_in (an inf or NaN among a, b, c,
// when the step did not create the NaN). inexact (fl32(c + a*b) != c + a*b,
// overflow included, a NaN created or a non-finite value coming in not: as
// count_rounding) only when policy.count_step_inexact is set, else left 0
// (gemm_emu_simd.h: count_fp32_step). NOT counted, left 0: zeros_in,
// underflow, underflow_to_zero, subnormal. A 0 there does not mean "exact"
// or "no zeros". The cost: counting inexact (two more FMAs per step, with
// directed rounding) makes the counted GEMM about 1.9x the one counted
// without it (1.85-2.1x over 5 runs at 512^3 and 1024^3), about 4.6x the
// uncounted one at 512^3 and 3.7x at 1024^3, against about 2.4x and 1.9x
// without it (bench_gemm, one thread, AVX-512); zeros_in (one more compare)
// was measured at about 3x the uncounted. tensor_core counts nothing there.
void gemm_emu(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b, std::span<float> c,
              const GemmPolicy& policy, CounterSet* counters = nullptr);

// A tensor-core model's counts as a counter site's: elements = instruction roundings, inexact, overflow,
// nan_created; addends_nonzero = non-zero terms aligned, truncated = terms that lost bits to the alignment,
// swamped = terms that lost every bit (a lost update of the sum by that term).
void mma_counters_into(const MmaCounts& from, Counters& to);

// gemm_emu for operands that already hold values of policy.input (rounded
// once by the caller, e.g. copies of a rounded tensor, zeros included) in
// row-major op(A) (m x k) and op(B) (k x n): no transposes (invalid_argument
// otherwise), no second rounding and so no gemm.a / gemm.b sites; the
// results and the gemm.accumulate and gemm.c counts are gemm_emu's, since
// rounding a value of the format changes nothing. For callers that round an
// operand once and multiply many blocks gathered from it (conv2d_emu).
// Operands outside the format are not detected: the products would not be
// those of the format.
void gemm_emu_rounded_inputs(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                             std::span<float> c, const GemmPolicy& policy, CounterSet* counters = nullptr);

}  // namespace mpverify::emu
