#include "emu/gemm_emu.h"
#include "formats/fp_environment.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "emu/gemm_emu_simd.h"
#include "emu/mma_gemm.h"
#include "emu/quantize_simd.h"
#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"

namespace mpverify::emu {

std::string_view to_string(Accumulation a) {
  switch (a) {
    case Accumulation::fp32: return "fp32";
    case Accumulation::fp16: return "fp16";
    case Accumulation::tensor_core: return "tensor-core";
    case Accumulation::mma: return "mma";
  }
  return "?";
}

namespace {

// op(X) gathered into a row-major rows x cols matrix, rounded to the input format.
std::vector<float> rounded_operand(std::span<const float> x, int rows, int cols, bool transposed,
                                   const formats::Format& f, Counters* counters) {
  std::vector<float> out(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      out[static_cast<std::size_t>(r) * cols + c] =
          transposed ? x[static_cast<std::size_t>(c) * rows + r] : x[static_cast<std::size_t>(r) * cols + c];
  quantize(out, out, QuantizeSpec{f}, counters);
  return out;
}

// acc[j] = fl32(a * b[j] + acc[j]) along part of a row: one fp32 FMA per
// element, so each step rounds once. The FMA unit when the CPU has one, libm
// otherwise (same results).
__attribute__((target("avx2,fma"))) void fma_row_hardware(float a, const float* b, float* acc, int n) {
  for (int j = 0; j < n; ++j) acc[j] = __builtin_fmaf(a, b[j], acc[j]);
}
void fma_row_portable(float a, const float* b, float* acc, int n) {
  for (int j = 0; j < n; ++j) acc[j] = std::fma(a, b[j], acc[j]);
}

struct Block {
  int row_begin, row_end, column_begin, column_end;
};

// The SIMD tiles cover rows [0, r) x columns [0, c) of C; these are the two
// blocks left for the portable loops.
std::vector<Block> rest_of(const ops::GemmShape& s, int r, int c) {
  std::vector<Block> rest;
  if (c < s.n && r > 0) rest.push_back({0, r, c, s.n});
  if (r < s.m) rest.push_back({r, s.m, 0, s.n});
  return rest;
}

// The same row, each step counted (detail::count_fp32_step; Inexact: its inexact too).
template <bool Inexact>
void fma_row_counted(float a, const float* b, float* acc, int n, Counters& counters) {
  for (int j = 0; j < n; ++j) {
    const float result = std::fma(a, b[j], acc[j]);
    detail::count_fp32_step(counters, a, b[j], acc[j], result, Inexact);
    acc[j] = result;
  }
}

void accumulate_fp32(const ops::GemmShape& s, std::span<const float> A, std::span<const float> B,
                     std::vector<float>& acc, const GemmPolicy& policy, Counters* counters) {
  __builtin_cpu_init();
  const bool fma_unit = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
  Counters local;
  std::vector<Block> blocks = {{0, s.m, 0, s.n}};
  // The kernel's 32-bit lane counters take at most 2R = 16 per k step per tile: k < 2^28 keeps them exact.
  if (policy.simd && (!counters || s.k < (1 << 28)) && detail::cpu_has_avx512()) {
    const auto cover = detail::fp32_accumulate_tiles_avx512(A.data(), B.data(), acc.data(), s.m, s.n, s.k,
                                                            counters ? &local : nullptr, policy.count_step_inexact);
    blocks = rest_of(s, cover.rows, cover.columns);
  }
  for (const Block& blk : blocks)
    for (int i = blk.row_begin; i < blk.row_end; ++i)
      for (int kk = 0; kk < s.k; ++kk) {
        const float a = A[static_cast<std::size_t>(i) * s.k + kk];
        const float* b = &B[static_cast<std::size_t>(kk) * s.n + blk.column_begin];
        float* c = &acc[static_cast<std::size_t>(i) * s.n + blk.column_begin];
        const int width = blk.column_end - blk.column_begin;
        if (counters && policy.count_step_inexact) fma_row_counted<true>(a, b, c, width, local);
        else if (counters) fma_row_counted<false>(a, b, c, width, local);
        else if (fma_unit) fma_row_hardware(a, b, c, width);
        else fma_row_portable(a, b, c, width);
      }
  if (counters) *counters += local;
}

// The SIMD kernel needs every input to be an fp16 value (so products are
// exact in float): formats no wider than fp16 in precision and range.
bool values_are_fp16(const formats::Format& f) {
  return f.precision() <= 11 && f.emin() - f.mantissa_bits >= -24 && f.max_finite() <= 65504.0;
}

// c <- fl16(c + a*b) per step, a*b exact in double, one rounding.
void accumulate_fp16(const ops::GemmShape& s, std::span<const float> A, std::span<const float> B,
                     std::vector<float>& acc, const GemmPolicy& policy, Counters* counters) {
  static const formats::Format fp16 = formats::parse_format("fp16");
  const formats::RoundingContext rne{};
  Counters local;
  std::vector<Block> blocks = {{0, s.m, 0, s.n}};
  // The kernel's 32-bit lane counters take at most 8k per tile: k < 2^28 keeps them exact.
  if (policy.simd && values_are_fp16(policy.input) && s.k < (1 << 28) && detail::cpu_has_avx512()) {
    const auto cover = detail::fp16_accumulate_tiles_avx512(A.data(), B.data(), acc.data(), s.m, s.n, s.k,
                                                            counters ? &local : nullptr);
    blocks = rest_of(s, cover.rows, cover.columns);
  }
  for (const Block& blk : blocks)
    for (int i = blk.row_begin; i < blk.row_end; ++i)
      for (int kk = 0; kk < s.k; ++kk) {
        const double a = A[static_cast<std::size_t>(i) * s.k + kk];
        for (int j = blk.column_begin; j < blk.column_end; ++j) {
          float& c = acc[static_cast<std::size_t>(i) * s.n + j];
          const double product = a * static_cast<double>(B[static_cast<std::size_t>(kk) * s.n + j]);
          const double before = c;
          formats::Flags flags;
          const std::uint32_t bits = formats::sum_to_format(fp16, product, before, rne, flags);
          c = formats::to_float(fp16, bits, flags);
          if (counters) {
            count_rounding(local, fp16, product + before, bits, flags);
            count_update(local, before, product, c);
          }
        }
      }
  if (counters) *counters += local;
}

// The tensor-core model, one output element at a time.
void accumulate_tensor_core(const ops::GemmShape& s, std::span<const float> A, std::span<const float> B,
                            std::vector<float>& acc, const TensorCoreModel& tc) {
  static const formats::Format fp32 = formats::parse_format("fp32");
  // Each truncated term is below 2^(24 + extra_bits) grid units, so a block's
  // sum of block_size + 1 terms is exact in double while
  // 24 + extra_bits + ceil(log2(block_size + 1)) <= 53.
  int carry_bits = 0;
  while ((1 << carry_bits) < tc.block_size + 1) ++carry_bits;
  if (tc.block_size < 1 || tc.extra_bits < 0 || 24 + tc.extra_bits + carry_bits > 53)
    throw std::invalid_argument("tensor-core model: need block_size >= 1 and 0 <= extra_bits <= " +
                                std::to_string(29 - carry_bits) + " for block_size " + std::to_string(tc.block_size));
  const formats::RoundingContext block_rounding{tc.rounding};
  std::vector<double> terms(static_cast<std::size_t>(tc.block_size) + 1);
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) {
      double c = 0;
      for (int k0 = 0; k0 < s.k; k0 += tc.block_size) {
        const int k1 = std::min(s.k, k0 + tc.block_size);
        std::size_t count = 0;
        terms[count++] = c;
        for (int kk = k0; kk < k1; ++kk)  // exact: significands of <= 24 bits
          terms[count++] = static_cast<double>(A[static_cast<std::size_t>(i) * s.k + kk]) *
                           static_cast<double>(B[static_cast<std::size_t>(kk) * s.n + j]);
        int emax = INT32_MIN;
        bool finite = true;
        for (std::size_t t = 0; t < count; ++t) {
          finite &= std::isfinite(terms[t]);
          if (terms[t] != 0 && std::isfinite(terms[t])) emax = std::max(emax, std::ilogb(terms[t]));
        }
        double sum = 0;
        if (!finite || emax == INT32_MIN) {
          for (std::size_t t = 0; t < count; ++t) sum += terms[t];  // specials, or all zero
        } else {
          // Align to the largest term: keep 24 + extra_bits bits below its
          // leading bit, truncating each term toward zero.
          const int grid_exponent = emax - 23 - tc.extra_bits;
          for (std::size_t t = 0; t < count; ++t)
            sum += std::ldexp(std::trunc(std::ldexp(terms[t], -grid_exponent)), grid_exponent);
        }
        formats::Flags flags;
        c = formats::to_double(fp32, formats::from_double(fp32, sum, block_rounding, flags));
      }
      acc[static_cast<std::size_t>(i) * s.n + j] = static_cast<float>(c);
    }
}

// The instruction model with A's values in fa and B's in fb: the model itself, or with its operands swapped
// when its a and b formats are B's and A's (a dot product does not depend on the order of its factors).
struct MmaOperands {
  const MmaModel* model;
  bool swapped;
};

MmaOperands mma_operands(const GemmPolicy& p) {
  if (!p.mma) throw std::invalid_argument("gemm: accumulate=mma needs the instruction's model (GemmPolicy::mma)");
  const MmaModel& m = *p.mma;
  if (formats::same_values(m.a, p.input) && formats::same_values(m.b, p.b_format())) return {&m, false};
  if (formats::same_values(m.b, p.input) && formats::same_values(m.a, p.b_format())) return {&m, true};
  throw std::invalid_argument("gemm: the tensor-core model " + m.name + " multiplies " + m.a.name + " by " + m.b.name +
                              ", not " + p.input.name + " by " + p.b_format().name);
}

// Each output element as the model's chained instructions over A's row and B's column (mma_gemm.h: a
// vector kernel where the CPU has one, the scalar model elsewhere, the same bits and counts).
void accumulate_mma(const ops::GemmShape& s, std::span<const float> A, std::span<const float> B,
                    std::vector<float>& acc, const GemmPolicy& policy, Counters* counters) {
  const auto [m, swapped] = mma_operands(policy);
  MmaCounts counts;
  mma_gemm(s, A, B, acc, *m, swapped, policy.promotion_interval, policy.simd, counts);
  if (counters) mma_counters_into(counts, *counters);
}

// C = A B from operands in the input format (row-major, op applied),
// accumulated under the policy and rounded to its output format.
void multiply_rounded(const ops::GemmShape& s, std::span<const float> A, std::span<const float> B, std::span<float> c,
                      const GemmPolicy& policy, CounterSet* counters) {
  std::vector<float> acc(s.c_size(), 0.0f);
  switch (policy.accumulation) {
    case Accumulation::fp32: accumulate_fp32(s, A, B, acc, policy, site_counters(counters, "gemm.accumulate")); break;
    case Accumulation::fp16: accumulate_fp16(s, A, B, acc, policy, site_counters(counters, "gemm.accumulate")); break;
    case Accumulation::tensor_core: accumulate_tensor_core(s, A, B, acc, policy.tensor_core); break;
    case Accumulation::mma: accumulate_mma(s, A, B, acc, policy, site_counters(counters, "gemm.accumulate")); break;
  }
  quantize(acc, c, QuantizeSpec{policy.output}, site_counters(counters, "gemm.c"));
}

}  // namespace

void mma_counters_into(const MmaCounts& from, Counters& to) {
  to.elements += from.roundings;
  to.inexact += from.roundings_inexact;
  to.overflow += from.overflows;
  to.nan_created += from.nans;
  to.addends_nonzero += from.terms;
  to.truncated += from.terms_truncated;
  to.swamped += from.terms_shifted_out;
}

void gemm_emu(const ops::GemmShape& s, std::span<const float> a, std::span<const float> b, std::span<float> c,
              const GemmPolicy& policy, CounterSet* counters) {
  formats::check_fp_environment("emu::gemm_emu");
  s.check(a.size(), b.size(), c.size());
  const std::vector<float> A = rounded_operand(a, s.m, s.k, s.transpose_a, policy.input, site_counters(counters, "gemm.a"));
  const std::vector<float> B =
      rounded_operand(b, s.k, s.n, s.transpose_b, policy.b_format(), site_counters(counters, "gemm.b"));
  multiply_rounded(s, A, B, c, policy, counters);
}

void gemm_emu_rounded_inputs(const ops::GemmShape& s, std::span<const float> a, std::span<const float> b,
                             std::span<float> c, const GemmPolicy& policy, CounterSet* counters) {
  formats::check_fp_environment("emu::gemm_emu_rounded_inputs");
  s.check(a.size(), b.size(), c.size());
  if (s.transpose_a || s.transpose_b)
    throw std::invalid_argument("gemm_emu_rounded_inputs: operands must be row-major op(A) and op(B), not transposed");
  multiply_rounded(s, a, b, c, policy, counters);
}

}  // namespace mpverify::emu
