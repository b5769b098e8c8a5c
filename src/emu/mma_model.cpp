// The tensor-core model of mma_model.h, in exact integer arithmetic: every aligned term is an integer
// multiple of 2^(E - F), and the sum of at most 257 terms below 2^(F + 2) <= 2^42 fits an int64 and,
// times 2^(E - F), a double exactly; the one rounding to the output is then formats::from_double's.
#include "emu/mma_model.h"
#include "emu/mma_terms.h"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <tuple>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "formats/arithmetic.h"
#include "formats/encoding.h"

namespace mpverify::emu {

namespace {

const formats::Format& e8m13() {
  static const formats::Format f = formats::custom_format(8, 13);
  return f;
}

bool is_fp32(const formats::Format& f) { return f.exponent_bits == 8 && f.mantissa_bits == 23; }
bool is_fp16(const formats::Format& f) { return f.exponent_bits == 5 && f.mantissa_bits == 10 && f.bias == 15; }

using Term = detail::MmaTerm;  // mma_terms.h

// An operand's significand (times 2^23, so every format of at most 24 bits of precision gives an integer)
// and exponent, as MMA-Sim's extract_significand_exponent: a subnormal keeps the format's minimum normal
// exponent, a zero gets exponent -126 whatever its format.
Term split(const formats::Format& f, std::uint32_t bits) {
  Term t;
  t.negative = formats::sign_bit(f, bits);
  t.scale = 23;
  t.nan = formats::is_nan(f, bits);
  t.infinite = formats::is_infinity(f, bits);
  const double v = formats::to_double(f, bits);
  if (t.nan || t.infinite) return t;
  if (v == 0.0) {
    t.exponent = -126;
    return t;
  }
  int e = 0;
  double s = std::frexp(std::fabs(v), &e) * 2.0;  // [1, 2)
  e -= 1;
  if (e < f.emin()) {
    s = std::ldexp(s, e - f.emin());
    e = f.emin();
  }
  t.magnitude = static_cast<std::uint64_t>(std::ldexp(s, 23));
  t.exponent = e;
  return t;
}

// split() of every encoding of a format of at most 16 bits, built once per format: a GEMM decodes each
// operand once per output element it feeds. nullptr for wider formats (split() then).
const Term* split_table(const formats::Format& f) {
  if (f.width() > 16) return nullptr;
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int, bool, int, bool, bool>, std::vector<Term>> tables;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& table = tables[{f.exponent_bits, f.mantissa_bits, f.bias, f.subnormals, static_cast<int>(f.encoding),
                        f.is_signed, f.has_zero}];
  if (table.empty())
    for (std::uint32_t bits = 0; bits < (1u << f.width()); ++bits) table.push_back(split(f, bits));
  return table.data();
}

// The decoders of one model's three operands.
struct Decoders {
  const Term* a;
  const Term* b;
  const Term* c;

  explicit Decoders(const MmaModel& m) : a(split_table(m.a)), b(split_table(m.b)), c(split_table(m.c)) {}
  static Term of(const Term* table, const formats::Format& f, std::uint32_t bits) {
    return table ? table[bits] : split(f, bits);
  }
};

enum class Special : std::uint8_t { none, nan, positive_infinity, negative_infinity };

// NaN and infinity as MMA-Sim decides them: from the FP64 sum of the exact products and c (a product of
// finite operands is finite in FP64).
Special special_of(std::span<const Term> a, std::span<const Term> b, const Term& c) {
  bool nan = false, plus = false, minus = false;
  auto infinite_term = [&](bool negative) { (negative ? minus : plus) = true; };
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].nan || b[i].nan) nan = true;
    else if (a[i].infinite || b[i].infinite) {
      if (a[i].zero() || b[i].zero()) nan = true;  // inf * 0
      else infinite_term(a[i].negative != b[i].negative);
    }
  }
  if (c.nan) nan = true;
  else if (c.infinite) infinite_term(c.negative);
  if (nan || (plus && minus)) return Special::nan;
  if (plus) return Special::positive_infinity;
  if (minus) return Special::negative_infinity;
  return Special::none;
}

std::uint32_t special_bits(const formats::Format& c, Special s) {
  if (s == Special::nan) return is_fp16(c) ? 0x7FFFu : 0x7FFFFFFFu;  // the canonical NaN, not c's quiet NaN
  return c.positive_infinity_bits() | (s == Special::negative_infinity ? c.sign_mask() : 0u);
}

// Aligns the term to E with F fraction bits, truncating toward zero; counts what it loses.
std::int64_t aligned(const Term& t, int E, int F, MmaCounts& counts) {
  if (t.magnitude == 0) return 0;
  const int shift = t.scale + (E - t.exponent) - F;
  std::uint64_t kept = 0;
  bool lost = false;
  if (shift <= 0) {
    // c, by at most F - 23 <= 17 bits (below 2^41); a block-scaled group term of mma_block_scaled.cpp, by at
    // most F - 8 = 27 bits (below 2^47)
    kept = t.magnitude << -shift;
  } else if (shift >= 64) {
    lost = true;
  } else {
    kept = t.magnitude >> shift;
    lost = (t.magnitude & ((std::uint64_t{1} << shift) - 1)) != 0;
  }
  ++counts.terms;
  if (lost) ++counts.terms_truncated;
  if (kept == 0) ++counts.terms_shifted_out;
  return t.negative ? -static_cast<std::int64_t>(kept) : static_cast<std::int64_t>(kept);
}

// The exact sum times 2^exponent, rounded once to the output.
std::uint32_t round_output(const MmaModel& m, std::int64_t sum, int exponent, MmaCounts& counts) {
  ++counts.roundings;
  if (sum == 0) return 0;  // an exact zero is +0 whatever the signs of the terms
  const double value = std::ldexp(static_cast<double>(sum), exponent);  // exact: |sum| < 2^53
  formats::Flags flags;
  std::uint32_t bits = 0;
  const formats::RoundingContext toward_zero{formats::Rounding::toward_zero};
  switch (m.output) {
    case MmaOutput::fp32_toward_zero:
      bits = formats::from_double(formats::fp32(), value, toward_zero, flags);
      break;
    case MmaOutput::e8m13_toward_zero: {
      formats::Flags exact;
      bits = formats::convert(e8m13(), formats::from_double(e8m13(), value, toward_zero, flags), formats::fp32(), {}, exact);
      break;
    }
    case MmaOutput::fp16_nearest_even:
      bits = formats::from_double(m.c, value, {}, flags);
      break;
  }
  if (flags.has(formats::Flags::inexact)) ++counts.roundings_inexact;
  if (flags.has(formats::Flags::overflow)) {  // toward zero would keep the largest finite value: not here
    ++counts.overflows;
    return special_bits(m.c, value < 0 ? Special::negative_infinity : Special::positive_infinity);
  }
  if (formats::is_zero(m.c, bits)) return 0;  // underflow to zero gives +0 too
  return bits;
}

// The exact sum of the aligned terms, rounded once (mma_terms.h: mma_fused_sum).
std::uint32_t fused_sum(const MmaModel& m, std::span<const Term> terms, MmaCounts& counts) {
  int E = terms[0].exponent;
  for (const Term& t : terms) E = std::max(E, t.exponent);
  std::int64_t sum = 0;
  for (const Term& t : terms) sum += aligned(t, E, m.fraction_bits, counts);
  return round_output(m, sum, E - m.fraction_bits, counts);
}

// One fused dot-add over a.size() (at most 256) products and c; every product's exponent raised by
// product_exponent_offset (Blackwell's block scales, mma_block_scaled.cpp; 0 otherwise).
std::uint32_t fused_dot_add(const MmaModel& m, const Decoders& d, std::span<const std::uint32_t> a,
                            std::span<const std::uint32_t> b, std::uint32_t c, MmaCounts& counts,
                            int product_exponent_offset = 0) {
  std::array<Term, 256> ta, tb;
  const std::size_t n = a.size();
  for (std::size_t i = 0; i < n; ++i) {
    ta[i] = Decoders::of(d.a, m.a, a[i]);
    tb[i] = Decoders::of(d.b, m.b, b[i]);
  }
  const Term tc = Decoders::of(d.c, m.c, c);
  if (const Special s = special_of(std::span(ta).first(n), std::span(tb).first(n), tc); s != Special::none) {
    ++counts.roundings;
    if (s == Special::nan) ++counts.nans;
    return special_bits(m.c, s);
  }
  std::array<Term, 257> terms;
  terms[0] = tc;
  for (std::size_t i = 0; i < n; ++i)
    terms[i + 1] = {ta[i].negative != tb[i].negative, ta[i].magnitude * tb[i].magnitude, 46,
                    ta[i].exponent + tb[i].exponent + product_exponent_offset};
  return fused_sum(m, std::span<const Term>(terms).first(n + 1), counts);
}

// Hopper's FP8 mma.sync as ptxas compiles it for sm_90 (HMMA.16816.F32 twice, then FADD): the operands
// become fp16 (exactly: every E4M3 and E5M2 value is an fp16), so their alignment follows fp16's exponents.
std::uint32_t fp8_through_fp16(const MmaModel& m, std::span<const std::uint32_t> a, std::span<const std::uint32_t> b,
                               std::uint32_t c, MmaCounts& counts) {
  static const formats::Format fp16 = formats::parse_format("fp16");
  const MmaModel hmma{m.name, fp16, fp16, formats::fp32(), 16, m.fraction_bits, false, false, MmaOutput::fp32_toward_zero};
  static const Decoders fp16_decoders(hmma);  // tables of fp16 (and none for fp32): the same for every F
  std::array<std::uint32_t, 16> a16[2], b16[2];  // validate(): k = 32, so 16 per group
  std::size_t size[2] = {0, 0};
  formats::Flags exact;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::size_t group = i % 4 < 2 ? 0 : 1;  // the UNPACK_B of each register's low, then high, half
    a16[group][size[group]] = formats::convert(m.a, a[i], fp16, {}, exact);
    b16[group][size[group]++] = formats::convert(m.b, b[i], fp16, {}, exact);
  }
  const auto half = [&](int g, std::array<std::uint32_t, 16>& v) { return std::span<const std::uint32_t>(v).first(size[g]); };
  const std::uint32_t first = fused_dot_add(hmma, fp16_decoders, half(0, a16[0]), half(0, b16[0]), 0, counts);
  const std::uint32_t partial = fused_dot_add(hmma, fp16_decoders, half(1, a16[1]), half(1, b16[1]), first, counts);
  formats::Flags flags;
  const std::uint32_t d = formats::add(formats::fp32(), c, partial, {}, flags);  // FADD: to nearest-even
  ++counts.roundings;
  if (flags.has(formats::Flags::inexact)) ++counts.roundings_inexact;
  if (flags.has(formats::Flags::overflow)) ++counts.overflows;
  if (formats::is_nan(formats::fp32(), d)) {
    ++counts.nans;
    return 0x7FFFFFFFu;  // the GPU's canonical NaN
  }
  return d;
}

}  // namespace

MmaCounts& MmaCounts::operator+=(const MmaCounts& o) {
  terms += o.terms;
  terms_truncated += o.terms_truncated;
  terms_shifted_out += o.terms_shifted_out;
  roundings += o.roundings;
  roundings_inexact += o.roundings_inexact;
  overflows += o.overflows;
  nans += o.nans;
  return *this;
}

void validate(const MmaModel& m) {
  auto fail = [&](const std::string& what) { throw std::invalid_argument("tensor-core model " + m.name + ": " + what); };
  if (m.fraction_bits < 8 || m.fraction_bits > 40) fail("F (fraction bits) must be 8..40");
  if (m.k < 1 || m.k > 256) fail("k must be 1..256");
  if (m.split_halves && m.k % 2 != 0) fail("splitting into halves needs an even k");
  for (const formats::Format* f : {&m.a, &m.b})
    if (f->precision() > 24 || f->exponent_bits > 8) fail(f->name + " is wider than an fp32 operand");
  if (m.fp8_through_fp16 && (m.k != 32 || m.split_halves || m.output != MmaOutput::fp32_toward_zero ||
                             m.a.width() != 8 || m.b.width() != 8))
    fail("the FP8-through-fp16 schedule is Hopper's m16n8k32 FP8 mma.sync: k = 32, FP8 operands, fp32 output");
  const bool fp16_out = m.output == MmaOutput::fp16_nearest_even;
  if (fp16_out ? !is_fp16(m.c) : !is_fp32(m.c)) fail("the accumulator must be fp16 with fp16 output, else fp32");
}

// A fused operation's error is below (k + 1) terms' truncations of at most 2^(E - F) each, where 2^E is at
// most the largest term's magnitude, plus the output rounding toward zero (below one ulp: 2^-23 relative for
// fp32, 2^-13 for E8M13) or to nearest (2^-11 for fp16). Spread over the k steps of gamma_k, per step:
// 2^-F (k + 1) / k <= 2^(1 - F), plus the output's share; the larger of the two, doubled, bounds both.
double mma_unit_roundoff(const MmaModel& m) {
  const double out = m.output == MmaOutput::fp16_nearest_even   ? 0x1p-11
                     : m.output == MmaOutput::e8m13_toward_zero ? 0x1p-13
                                                                     : 0x1p-23;
  return 2 * std::max(std::ldexp(1.0, 1 - m.fraction_bits), out);
}

namespace {

// One instruction with its operands' decoders already looked up (a chain looks them up once).
std::uint32_t instruction(const MmaModel& m, const Decoders& d, std::span<const std::uint32_t> a,
                          std::span<const std::uint32_t> b, std::uint32_t c, MmaCounts& n) {
  if (m.fp8_through_fp16) return fp8_through_fp16(m, a, b, c, n);
  if (!m.split_halves) return fused_dot_add(m, d, a, b, c, n);
  const std::size_t h = a.size() / 2;
  const std::uint32_t first = fused_dot_add(m, d, a.first(h), b.first(h), c, n);
  return fused_dot_add(m, d, a.subspan(h), b.subspan(h), first, n);
}

}  // namespace

std::uint32_t mma_dot_add(const MmaModel& m, std::span<const std::uint32_t> a, std::span<const std::uint32_t> b,
                          std::uint32_t c, MmaCounts* counts) {
  if (a.size() != static_cast<std::size_t>(m.k) || b.size() != a.size())
    throw std::invalid_argument("mma_dot_add: " + m.name + " takes k = " + std::to_string(m.k) + " products");
  MmaCounts local;
  return instruction(m, Decoders(m), a, b, c, counts ? *counts : local);
}

std::uint32_t mma_dot(const MmaModel& m, std::span<const std::uint32_t> a, std::span<const std::uint32_t> b,
                      std::uint32_t c, int promotion_interval, MmaCounts* counts) {
  const std::size_t k = static_cast<std::size_t>(m.k);
  if (a.size() != b.size() || a.empty() || a.size() % k != 0)
    throw std::invalid_argument("mma_dot: " + m.name + " needs a positive multiple of k = " + std::to_string(m.k) +
                                " products, equal in a and b");
  if (promotion_interval < 0 || (promotion_interval > 0 && (promotion_interval % m.k != 0 || !is_fp32(m.c))))
    throw std::invalid_argument("mma_dot: the promotion interval must be a multiple of k = " +
                                std::to_string(m.k) + " with an fp32 output");
  const Decoders decoders(m);
  MmaCounts local;
  MmaCounts& n = counts ? *counts : local;
  if (promotion_interval == 0) {
    std::uint32_t d = c;
    for (std::size_t i = 0; i < a.size(); i += k) d = instruction(m, decoders, a.subspan(i, k), b.subspan(i, k), d, n);
    return d;
  }
  std::uint32_t accumulator = c, partial = 0;
  formats::Flags flags;
  for (std::size_t i = 0; i < a.size(); i += k) {
    partial = instruction(m, decoders, a.subspan(i, k), b.subspan(i, k), partial, n);
    if ((i + k) % static_cast<std::size_t>(promotion_interval) == 0 || i + k == a.size()) {
      accumulator = formats::add(formats::fp32(), accumulator, partial, {}, flags);  // the CUDA cores' fp32 add,
      if (formats::is_nan(formats::fp32(), accumulator)) accumulator = 0x7FFFFFFFu;  // whose NaN is the canonical one
      partial = 0;
    }
  }
  return accumulator;
}

namespace detail {

MmaTerm mma_term(const formats::Format& f, std::uint32_t bits) { return Decoders::of(split_table(f), f, bits); }

std::uint32_t mma_fused_sum(const MmaModel& m, std::span<const MmaTerm> terms, MmaCounts& counts) {
  return fused_sum(m, terms, counts);
}

std::uint32_t mma_nan_bits(const MmaModel& m) { return special_bits(m.c, Special::nan); }

std::uint32_t mma_infinity_bits(const MmaModel& m, bool negative) {
  return special_bits(m.c, negative ? Special::negative_infinity : Special::positive_infinity);
}

std::uint32_t mma_fused_dot_add(const MmaModel& m, std::span<const std::uint32_t> a, std::span<const std::uint32_t> b,
                                std::uint32_t c, int product_exponent_offset, MmaCounts& counts) {
  if (a.size() != b.size() || a.size() > 256)
    throw std::invalid_argument("mma_fused_dot_add: a and b need the same length, at most 256");
  return fused_dot_add(m, Decoders(m), a, b, c, counts, product_exponent_offset);
}

}  // namespace detail

}  // namespace mpverify::emu
