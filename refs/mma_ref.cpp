// The reference tensor-core GEMM of mma_ref.h. Every step is exact in FP64 until the one rounding:
// a product of two operands of at most 24 significant bits has at most 48 and an exponent within
// [-300, 256]; a term scaled by 2^(F - E) has magnitude below 2^(F + 2) <= 2^42, so trunc() of it is its
// truncation to F fraction bits; at most 257 such integers add to below 2^51. The rounding to the output is
// done by the hardware's own conversions (binary32 and _Float16 casts) rather than the library's formats
// code, which the emulator uses.
#include "refs/mma_ref.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace mpverify::refs {

namespace {

using Output = TensorCoreInstruction::Output;

// e of the rule: floor(log2 |x|), at least the format's minimum normal exponent; -126 for a zero.
int term_exponent(float x, const formats::Format& f) {
  if (x == 0.0f) return -126;
  return std::max(std::ilogb(x), f.emin());
}

float canonical_nan(const formats::Format& c) {
  // fp32 0x7FFFFFFF; the fp16 output's 0x7FFF, whose float is the quiet NaN with payload 0x3FF << 13
  return std::bit_cast<float>(c.exponent_bits == 8 ? 0x7FFFFFFFu : 0x7FFFE000u);
}

// The exact value, rounded once to the instruction's output; overflow gives infinity even toward zero.
float round_output(double exact, const TensorCoreInstruction& in) {
  if (exact == 0.0) return 0.0f;  // an exact zero is +0 whatever the terms' signs
  float r = 0;
  if (in.output == Output::fp16_nearest_even) {
    r = static_cast<float>(static_cast<_Float16>(exact));  // one rounding to nearest-even; >= 65520 gives inf
  } else {
    if (std::fabs(exact) >= 0x1p128) return exact > 0 ? INFINITY : -INFINITY;
    r = static_cast<float>(exact);                                        // to nearest ...
    if (std::fabs(static_cast<double>(r)) > std::fabs(exact)) r = std::nextafter(r, 0.0f);  // ... then toward zero
    if (in.output == Output::e8m13_toward_zero)  // 13 fraction bits: drop fp32's low 10 toward zero
      r = std::bit_cast<float>(std::bit_cast<std::uint32_t>(r) & ~0x3FFu);
  }
  return r == 0.0f ? 0.0f : r;  // an underflow to zero is +0 too
}

// One fused operation d = c + sum a_i b_i of the rule.
float fused(std::span<const float> a, std::span<const float> b, float c, const TensorCoreInstruction& in) {
  // NaN and infinity as the FP64 sum of the exact products and c says (inf * 0 and inf - inf give NaN).
  double probe = c;
  for (std::size_t i = 0; i < a.size(); ++i) probe += static_cast<double>(a[i]) * b[i];
  if (std::isnan(probe)) return canonical_nan(in.c);
  if (std::isinf(probe)) return static_cast<float>(probe);
  int E = term_exponent(c, in.c);
  for (std::size_t i = 0; i < a.size(); ++i) E = std::max(E, term_exponent(a[i], in.a) + term_exponent(b[i], in.b));
  const int F = in.fraction_bits;
  double sum = std::trunc(std::ldexp(static_cast<double>(c), F - E));
  for (std::size_t i = 0; i < a.size(); ++i)
    sum += std::trunc(std::ldexp(static_cast<double>(a[i]) * b[i], F - E));
  return round_output(std::ldexp(sum, E - F), in);
}

// One instruction on k products: fused once, as two halves, or Hopper's FP8 schedule.
float instruction(std::span<const float> a, std::span<const float> b, float c, const TensorCoreInstruction& in) {
  if (in.fp8_through_fp16) {
    // Every FP8 value is an fp16 value, so only the fp16 format's exponent range changes the alignment.
    TensorCoreInstruction hmma{formats::parse_format("fp16"), formats::parse_format("fp16"), in.c, 16, in.fraction_bits,
                               false, false, Output::fp32_toward_zero};
    std::vector<float> a0, b0, a1, b1;
    for (std::size_t i = 0; i < a.size(); ++i) {
      (i % 4 < 2 ? a0 : a1).push_back(a[i]);
      (i % 4 < 2 ? b0 : b1).push_back(b[i]);
    }
    const float partial = fused(a1, b1, fused(a0, b0, 0.0f, hmma), hmma);
    const float d = c + partial;  // binary32 addition, to nearest-even
    return std::isnan(d) ? canonical_nan(in.c) : d;
  }
  if (!in.split_halves) return fused(a, b, c, in);
  const std::size_t h = a.size() / 2;
  return fused(a.subspan(h), b.subspan(h), fused(a.first(h), b.first(h), c, in), in);
}

}  // namespace

float dot_mma_ref(std::span<const float> a, std::span<const float> b, float c, const TensorCoreInstruction& in,
                  int promotion_interval) {
  const std::size_t k = static_cast<std::size_t>(in.k);
  if (in.k < 1 || a.size() != b.size() || a.size() % k != 0 ||
      (promotion_interval > 0 && promotion_interval % in.k != 0))
    throw std::invalid_argument("dot_mma_ref: a and b need the same length, a multiple of k, and the promotion "
                                "interval a multiple of k");
  float accumulator = c, d = promotion_interval > 0 ? 0.0f : c;
  for (std::size_t i = 0; i < a.size(); i += k) {
    d = instruction(a.subspan(i, k), b.subspan(i, k), d, in);
    const bool promote = promotion_interval > 0 &&
                         ((i + k) % static_cast<std::size_t>(promotion_interval) == 0 || i + k == a.size());
    if (promote) {
      accumulator = accumulator + d;  // the CUDA cores' binary32 addition, whose NaN is the canonical one
      if (std::isnan(accumulator)) accumulator = canonical_nan(in.c);
      d = 0.0f;
    }
  }
  return promotion_interval > 0 ? accumulator : d;
}

void gemm_mma_ref(const ops::GemmShape& s, std::span<const float> a, std::span<const float> b, std::span<float> c,
                  const TensorCoreInstruction& in, int promotion_interval) {
  s.check(a.size(), b.size(), c.size());
  if (in.k < 1) throw std::invalid_argument("gemm_mma_ref: k must be positive");
  const std::size_t K = (static_cast<std::size_t>(s.k) + in.k - 1) / in.k * in.k;
  std::vector<float> row(K, 0.0f), column(K, 0.0f);
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) {
      for (int p = 0; p < s.k; ++p) {
        row[p] = s.transpose_a ? a[static_cast<std::size_t>(p) * s.m + i] : a[static_cast<std::size_t>(i) * s.k + p];
        column[p] = s.transpose_b ? b[static_cast<std::size_t>(j) * s.k + p] : b[static_cast<std::size_t>(p) * s.n + j];
      }
      c[static_cast<std::size_t>(i) * s.n + j] = dot_mma_ref(row, column, 0.0f, in, promotion_interval);
    }
}

}  // namespace mpverify::refs
