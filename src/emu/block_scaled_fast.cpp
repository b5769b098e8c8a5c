// The fast path of block_scaled_multiply (block_scaled_fast.h): the same fused sums as the scalar models
// (mma_model.h steps 1-4, mma_block_scaled.h, mma_terms.h), with every element code and every scale split
// once per GEMM instead of once per instruction, and each instruction's terms aligned, counted and added in
// integer arithmetic. An output element goes to the scalar model (BlockScaledScalar::element, which then counts
// it) where any of its codes is NaN, infinite or wider than its format, any of its scales is NaN or not a
// value of the scale format, or any of its instructions' results leaves fp32's normal range (subnormal, 2^128
// or more, where round_output's special cases begin); the fast path's counts for it are dropped. Why the rest
// gives the scalar model's bits and counts (its rule in brackets):
//
//   an element code is split once through mma_term itself [significand s * 2^23, exponent e: a subnormal
//   keeps its format's minimum normal exponent, a zero gets -126]; the fast path keeps e and the value
//   v = s * 2^e, a float with at most 7 significant bits (formats with |e| <= 31 and at most 6 fraction bits,
//   checked when the table is built; others take the scalar path);
//   E is the maximum over c's exponent and every product's e_a + e_b + offset, zero products and a zero c
//   included [fused_sum's maximum runs over all terms];
//   a product term [magnitude s_a s_b 2^46, aligned: truncated toward zero to units of 2^(E - F)] is
//   trunc(v_a v_b * 2^(F - E + offset)) units: v_a v_b is exact in float, so is the scaling by a power of two
//   where the result is at least 2^-126, the result is below 2^(F + 2), and float -> int32 truncates toward
//   zero; it lost bits iff the truncation is 0 (shifted out) or differs from the float (product_terms);
//   c and kind::mxf4nvf4's group terms are aligned as aligned() does, in uint64 (align_term);
//   the sum (below 2^50) is rounded toward zero to 24 (fp32) or 14 (E8M13) significant bits where the result's
//   exponent lies in [-126, 127], which is what round_output's from_double gives there (round_toward_zero).
// The epilogue (alpha * d) and DeepGEMM's promotion are computed in double where that is exact (a product of
// two floats has at most 48 bits; a sum whose TwoSum error is zero is exact) and converted to float once, to
// nearest-even (the fast path runs only in that rounding mode), with normal operands and results; anything
// else goes to the scalar path's own functions (block_scaled_epilogue, deepgemm_promote).
//
// Speed (experiments/speed/bench_block_scaled_gemm): each model's chain along K is sequential within an
// output element, so over_elements advances four elements together; the products' loop is SSE2 (x86-64's
// baseline), with the same arithmetic in plain C++ elsewhere.
#include "emu/block_scaled_fast.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cfenv>
#include <cmath>
#include <optional>
#include <unordered_map>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "emu/mma_terms.h"
#include "formats/encoding.h"

namespace mpverify::emu::detail {

namespace {

using Accumulation = BlockScaledAccumulation;

// --- decoding, once per GEMM ------------------------------------------------------------------------------

// An element format's codes as the model splits them: value = sig * 2^(exp - m).
struct ElementTable {
  std::vector<float> value;           // sig * 2^(exp - m): the code's value (+0 for both zeros)
  std::vector<std::int16_t> exp;      // the model's exponent (-126 for a zero)
  std::vector<std::uint8_t> special;  // NaN or infinite: the scalar model
  bool usable = false;
};

ElementTable element_table(const formats::Format& f) {
  ElementTable t;
  if (f.width() > 8 || f.mantissa_bits > 6) return t;
  const int shift = 23 - f.mantissa_bits;
  for (std::uint32_t code = 0; code < (1u << f.width()); ++code) {
    const MmaTerm x = mma_term(f, code);
    const bool special = x.nan || x.infinite;
    if (!special && (x.scale != 23 || (x.magnitude & ((std::uint64_t{1} << shift) - 1)) != 0 ||
                     (x.magnitude >> shift) >= (std::uint64_t{1} << (f.mantissa_bits + 1)) ||
                     (x.magnitude != 0 && std::abs(x.exponent) > 31)))
      return t;  // not the split this file assumes: the scalar model for the whole GEMM
    const auto sig = static_cast<int>(special ? 0 : x.magnitude >> shift);
    t.value.push_back(std::ldexp(static_cast<float>(x.negative ? -sig : sig), x.exponent - f.mantissa_bits));
    t.exp.push_back(static_cast<std::int16_t>(special ? 0 : x.exponent));
    t.special.push_back(special);
  }
  t.usable = true;
  return t;
}

// One operand's codes decoded through its table, row by row; rows the fast path cannot take are marked.
struct DecodedCodes {
  std::size_t k = 0;
  std::vector<float> value;
  std::vector<std::int16_t> exp;
  std::vector<std::uint8_t> scalar_row;  // a NaN, infinite or out-of-range code, or (set later) a scale

  DecodedCodes(const ScaledOperand& x, const ElementTable& t) : k(x.k), value(x.codes.size()), exp(x.codes.size()),
                                                                 scalar_row(x.rows, 0) {
    for (std::size_t i = 0; i < x.codes.size(); ++i) {
      const std::uint32_t code = x.codes[i];
      if (code >= t.value.size() || t.special[code]) {
        scalar_row[i / k] = 1;
        continue;
      }
      value[i] = t.value[code];
      exp[i] = t.exp[code];
    }
  }
};

// One operand's scales split (block_scale_term), one entry per `group` elements of K (a scale of a larger
// block repeated); a row with a NaN or invalid scale is marked. The splits are memoised by value: UE4M3's
// check goes through formats::from_float, and a GEMM has few distinct scales.
struct DecodedScales {
  std::vector<std::int16_t> exp;
  std::vector<std::uint16_t> significand8;

  DecodedScales(const ScaledOperand& x, const formats::Format& f, std::size_t group,
                std::vector<std::uint8_t>& scalar_row) {
    const std::size_t per_row = x.k / x.block, repeat = x.block / group, count = x.scales.size() * repeat;
    exp.resize(count);
    significand8.resize(count);
    std::unordered_map<std::uint32_t, BlockScaleTerm> memo;
    for (std::size_t i = 0; i < x.scales.size(); ++i) {
      const auto key = std::bit_cast<std::uint32_t>(x.scales[i]);
      auto at = memo.find(key);
      if (at == memo.end()) at = memo.emplace(key, block_scale_term(f, x.scales[i])).first;
      const BlockScaleTerm& t = at->second;
      if (t.nan || !t.valid) {
        scalar_row[i / per_row] = 1;
        continue;
      }
      for (std::size_t r = 0; r < repeat; ++r) {
        exp[i * repeat + r] = static_cast<std::int16_t>(t.exponent);
        significand8[i * repeat + r] = static_cast<std::uint16_t>(t.significand8);
      }
    }
  }
};

// --- one instruction --------------------------------------------------------------------------------------

// What one instruction's alignment lost, counted in registers and added to MmaCounts once per instruction.
struct TermCounts {
  std::int32_t terms = 0, truncated = 0, shifted_out = 0;

  void add_to(MmaCounts& n) const {
    n.terms += static_cast<std::uint64_t>(terms);
    n.terms_truncated += static_cast<std::uint64_t>(truncated);
    n.terms_shifted_out += static_cast<std::uint64_t>(shifted_out);
  }
};

// A term aligned to 2^(E - F) and truncated toward zero, counted as mma_model.cpp's aligned() counts it;
// shift = the term's scale + E - its exponent - F.
inline std::uint64_t align_term(std::uint64_t magnitude, int shift, TermCounts& k) {
  if (magnitude == 0) return 0;
  ++k.terms;
  if (shift <= 0) return magnitude << -shift;
  const std::uint64_t kept = shift >= 64 ? 0 : magnitude >> shift;
  k.truncated += shift >= 64 || (magnitude & ((std::uint64_t{1} << shift) - 1)) != 0;
  k.shifted_out += kept == 0;
  return kept;
}

// An fp32 accumulator as mma_term splits it (significand * 2^23, exponent; a subnormal or zero: -126).
// The fast path only ever holds zero and normal accumulators.
struct Accumulator {
  bool negative;
  std::uint64_t magnitude;
  int exponent;
};

inline Accumulator split_fp32(std::uint32_t c) {
  const auto field = static_cast<int>((c >> 23) & 0xFFu);
  const std::uint64_t fraction = c & 0x7FFFFFu;
  if (field == 0) return {(c >> 31) != 0, fraction, -126};
  return {(c >> 31) != 0, fraction | 0x800000u, field - 127};
}

inline std::int64_t signed_term(bool negative, std::uint64_t kept) {
  return negative ? -static_cast<std::int64_t>(kept) : static_cast<std::int64_t>(kept);
}

// sum * 2^q toward zero to `precision` significant bits (24: fp32, 14: E8M13) as fp32 bits, counted as
// round_output counts it; false where the result is not zero or a normal fp32 below 2^128.
inline bool round_toward_zero(std::int64_t sum, int q, int precision, std::uint32_t& bits, MmaCounts& n) {
  if (sum == 0) {  // +0 whatever the terms' signs
    bits = 0;
    ++n.roundings;
    return true;
  }
  const std::uint64_t magnitude = sum < 0 ? 0 - static_cast<std::uint64_t>(sum) : static_cast<std::uint64_t>(sum);
  const int length = 64 - std::countl_zero(magnitude);
  const int exponent = q + length - 1;
  if (exponent < -126 || exponent > 127) return false;
  std::uint64_t kept = magnitude << std::max(precision - length, 0);
  bool inexact = false;
  if (length > precision) {
    const int drop = length - precision;
    kept = magnitude >> drop;
    inexact = (magnitude & ((std::uint64_t{1} << drop) - 1)) != 0;
  }
  const auto fraction = static_cast<std::uint32_t>(kept - (std::uint64_t{1} << (precision - 1))) << (24 - precision);
  bits = (sum < 0 ? 0x80000000u : 0u) | static_cast<std::uint32_t>(exponent + 127) << 23 | fraction;
  ++n.roundings;
  n.roundings_inexact += inexact;
  return true;
}

// What a product instruction needs beyond its operands.
struct ProductRule {
  int F;          // fraction bits kept, at most 26 (product_terms' int32 pairs)
  int precision;  // 24 (fp32) or 14 (E8M13)
};

// The aligned product terms of one instruction and what they lost.
struct ProductTerms {
  std::int64_t sum = 0;
  TermCounts counts;
};

// The sum of trunc(va[t] vb[t] * scale) over 32 products, scale = 2^(F - E + offset) clamped to
// [2^-126, 2^127]: each product term aligned to E in units of 2^(E - F) (see the top of the file), and the
// counts. The clamp changes no result: with element exponents in [-31, 31], |va vb| < 2^64, so where the
// scale is below 2^-126 every x = va vb scale is below 2^-62 either way and truncates to 0; a scale above
// 2^127 means E - offset < F - 127 < -62, below every non-zero product's exponent, so every product is zero.
// x is exact where it is at least 2^-126; below, it truncates to 0 whatever it rounded to. A non-zero product
// lost bits iff its truncation is 0 (shifted out) or differs from x. Two terms below 2^(F + 2) sum below
// 2^29 (F <= 26): int32 pairs, widened to int64. SSE2 (every x86-64), else the same in plain C++.
inline ProductTerms product_terms(const float* va, const float* vb, float scale) {
  ProductTerms r;
#if defined(__SSE2__)
  // The three counts share one int32 lane: bits 0-9, 10-19 and 20-29 (each at most 32).
  const __m128 vscale = _mm_set1_ps(scale), zero = _mm_setzero_ps();
  const __m128i izero = _mm_setzero_si128(), lost_one = _mm_set1_epi32(1 << 10), out_one = _mm_set1_epi32(1 << 20);
  __m128i sum = izero, counts = izero;
  for (int t = 0; t < 32; t += 8) {
    __m128i pair = izero;
    for (int h = 0; h < 8; h += 4) {
      const __m128 product = _mm_mul_ps(_mm_loadu_ps(va + t + h), _mm_loadu_ps(vb + t + h));
      const __m128 x = _mm_mul_ps(product, vscale);
      const __m128i kept = _mm_cvttps_epi32(x);  // toward zero
      const __m128i nz = _mm_castps_si128(_mm_cmpneq_ps(product, zero));
      const __m128i out = _mm_and_si128(nz, _mm_cmpeq_epi32(kept, izero));
      const __m128i inexact = _mm_castps_si128(_mm_cmpneq_ps(_mm_cvtepi32_ps(kept), x));
      counts = _mm_sub_epi32(counts, nz);  // a true comparison is -1
      counts = _mm_add_epi32(counts, _mm_and_si128(_mm_or_si128(out, inexact), lost_one));
      counts = _mm_add_epi32(counts, _mm_and_si128(out, out_one));
      pair = _mm_add_epi32(pair, kept);
    }
    const __m128i sign = _mm_srai_epi32(pair, 31);
    sum = _mm_add_epi64(sum, _mm_add_epi64(_mm_unpacklo_epi32(pair, sign), _mm_unpackhi_epi32(pair, sign)));
  }
  counts = _mm_add_epi32(counts, _mm_shuffle_epi32(counts, 0x4E));
  counts = _mm_add_epi32(counts, _mm_shuffle_epi32(counts, 0xB1));
  const auto packed = static_cast<std::uint32_t>(_mm_cvtsi128_si32(counts));
  r.sum = _mm_cvtsi128_si64(_mm_add_epi64(sum, _mm_unpackhi_epi64(sum, sum)));
  r.counts.terms = static_cast<std::int32_t>(packed & 1023);
  r.counts.truncated = static_cast<std::int32_t>((packed >> 10) & 1023);
  r.counts.shifted_out = static_cast<std::int32_t>(packed >> 20);
#else
  for (int t = 0; t < 32; ++t) {
    const float product = va[t] * vb[t], x = product * scale;
    const auto kept = static_cast<std::int32_t>(x);
    const bool out = product != 0 && kept == 0;
    r.sum += kept;
    r.counts.terms += product != 0;
    r.counts.shifted_out += out;
    r.counts.truncated += out || static_cast<float>(kept) != x;
  }
#endif
  return r;
}

// One fused dot-add of 32 products and c (mma_fused_dot_add), every product's exponent raised by offset; c in
// and d out as fp32 bits. va, vb: the elements' values; ea, eb: their exponents as the model splits them.
// false: the result is outside what round_toward_zero holds.
inline bool fused_products(const float* va, const std::int16_t* ea, const float* vb, const std::int16_t* eb,
                           int offset, const ProductRule& r, std::uint32_t& c, MmaCounts& n) {
  std::int16_t largest = -32768;  // int16: SSE2 has the int16 maximum, not the int32 one
  for (int t = 0; t < 32; ++t) largest = std::max(largest, static_cast<std::int16_t>(ea[t] + eb[t]));
  const Accumulator tc = split_fp32(c);
  const int E = std::max(tc.exponent, largest + offset);  // zeros included, as the scalar model's maximum
  const int power = std::clamp(r.F - (E - offset), -126, 127);
  ProductTerms p = product_terms(va, vb, std::bit_cast<float>(static_cast<std::uint32_t>(power + 127) << 23));
  const std::int64_t sum =
      p.sum + signed_term(tc.negative, align_term(tc.magnitude, 23 + E - tc.exponent - r.F, p.counts));
  p.counts.add_to(n);
  return round_toward_zero(sum, E - r.F, r.precision, c, n);
}

// kind::mxf4nvf4's group terms of one output element (mma_block_scaled.cpp mxf4nvf4), all of K at once: per
// group of 16, the exact sum of its products times 4 times its two scales' significands times 8 (below 2^20
// in magnitude: an int32), and the two scales' exponents (kept in E even where the term is zero).
struct GroupTerms {
  std::vector<std::int32_t> value;
  std::vector<std::int16_t> exponent;
};

// Each group of 16's sum of da[t] * db[t] (int16 values below 13 in magnitude: sums below 2^12), for groups
// (a multiple of 4) groups. With SSE2 (every x86-64), four groups at a time: pmaddwd, then a transposing add.
void group_sums(const std::int16_t* da, const std::int16_t* db, std::size_t groups, std::int32_t* sums) {
#if defined(__SSE2__)
  for (std::size_t g = 0; g < groups; g += 4) {
    __m128i acc[4];
    for (std::size_t q = 0; q < 4; ++q) {
      const auto* pa = reinterpret_cast<const __m128i*>(da + (g + q) * 16);
      const auto* pb = reinterpret_cast<const __m128i*>(db + (g + q) * 16);
      acc[q] = _mm_add_epi32(_mm_madd_epi16(_mm_loadu_si128(pa), _mm_loadu_si128(pb)),
                             _mm_madd_epi16(_mm_loadu_si128(pa + 1), _mm_loadu_si128(pb + 1)));
    }
    const __m128i s01 = _mm_add_epi32(_mm_unpacklo_epi32(acc[0], acc[1]), _mm_unpackhi_epi32(acc[0], acc[1]));
    const __m128i s23 = _mm_add_epi32(_mm_unpacklo_epi32(acc[2], acc[3]), _mm_unpackhi_epi32(acc[2], acc[3]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(sums + g),
                     _mm_add_epi32(_mm_unpacklo_epi64(s01, s23), _mm_unpackhi_epi64(s01, s23)));
  }
#else
  for (std::size_t g = 0; g < groups; ++g) {
    std::int32_t s = 0;
    for (int t = 0; t < 16; ++t) s += da[g * 16 + t] * db[g * 16 + t];
    sums[g] = s;
  }
#endif
}

// da, db: 2 x each E2M1 value along K (16 * groups of them); ea, sa and eb, sb: the scales' splits per group.
void group_terms(const std::int16_t* da, const std::int16_t* db, const std::int16_t* ea, const std::uint16_t* sa,
                 const std::int16_t* eb, const std::uint16_t* sb, std::size_t groups, GroupTerms& out) {
  group_sums(da, db, groups, out.value.data());
  for (std::size_t g = 0; g < groups; ++g) {
    out.value[g] *= sa[g] * sb[g];
    out.exponent[g] = static_cast<std::int16_t>(ea[g] + eb[g]);
  }
}

// One kind::mxf4nvf4 instruction on its four group terms (8 fraction bits: 2 of the sum times 4, 3 of each
// significand) and c, F fraction bits. Same contract as fused_products.
inline bool fused_groups(const std::int32_t* value, const std::int16_t* exponent, int F, std::uint32_t& c,
                         MmaCounts& n) {
  const Accumulator tc = split_fp32(c);
  const int E = std::max({tc.exponent, static_cast<int>(exponent[0]), static_cast<int>(exponent[1]),
                          static_cast<int>(exponent[2]), static_cast<int>(exponent[3])});
  TermCounts k;
  std::int64_t sum = signed_term(tc.negative, align_term(tc.magnitude, 23 + E - tc.exponent - F, k));
  for (int g = 0; g < 4; ++g) {
    const std::int32_t v = value[g];
    sum += signed_term(v < 0, align_term(static_cast<std::uint64_t>(v < 0 ? -v : v), 8 + E - exponent[g] - F, k));
  }
  k.add_to(n);
  return round_toward_zero(sum, E - F, 24, c, n);
}

// --- the epilogue and the promotion in double -------------------------------------------------------------

bool normal_or_zero(float x) { return x == 0 || std::isnormal(x); }

std::uint32_t epilogue(float alpha, std::uint32_t d) {
  if (alpha == 1.0f) return d;
  const float v = std::bit_cast<float>(d);
  if (std::isnormal(alpha) && normal_or_zero(v)) {
    const double exact = static_cast<double>(alpha) * v;
    const auto r = static_cast<float>(exact);  // the one rounding, to nearest-even
    if (exact == 0 || std::isnormal(r)) return std::bit_cast<std::uint32_t>(r);
  }
  return block_scaled_epilogue(alpha, d);
}

// final = fma(fl32(scale_a * scale_b), partial, final), counted; deepgemm_promote where this is not exact.
std::uint32_t promote(std::uint32_t final_bits, std::uint32_t partial_bits, float scale_a, float scale_b,
                      BlockScaledGemmCounters& n) {
  const auto s = static_cast<float>(static_cast<double>(scale_a) * scale_b);
  const float partial = std::bit_cast<float>(partial_bits), final_accum = std::bit_cast<float>(final_bits);
  if (std::isnormal(scale_a) && std::isnormal(scale_b) && std::isnormal(s) && normal_or_zero(partial) &&
      normal_or_zero(final_accum)) {
    const double product = static_cast<double>(s) * partial;  // exact
    const double sum = product + final_accum;
    const double back = sum - product;  // TwoSum (Knuth): sum + error = product + final exactly
    const double error = (product - (sum - back)) + (final_accum - back);
    const auto r = static_cast<float>(sum);
    if (error == 0 && (sum == 0 || std::isnormal(r))) {
      ++n.promotions;
      n.promotions_inexact += static_cast<double>(r) != sum;
      return std::bit_cast<std::uint32_t>(r);
    }
  }
  return deepgemm_promote(final_bits, partial_bits, scale_a, scale_b, n);
}

// --- the three models over the GEMM -----------------------------------------------------------------------

// One output element in progress: its accumulator(s) and counts; ok turns false where the fast arithmetic
// cannot hold it (the scalar model then computes the element, and these counts are dropped).
struct Lane {
  std::size_t j = 0;
  std::uint32_t d = 0, final_accum = 0;
  BlockScaledGemmCounters counts;
  bool ok = true;
};

// An element's chain along K is sequential (each result the next one's c, its exponent the next E), so the
// driver advances kLanes elements of a row together, one step each in turn: their independent chains overlap
// in the CPU's pipeline. Model: begin(i, lane, slot) once per element, step(i, p, lane, slot) -> bool for
// p < steps, finish(lane) -> fp32 bits. Rows marked in a_scalar or b_scalar, and elements whose step returned
// false, go to the scalar model. Returns the elements the fast path kept.
constexpr std::size_t kLanes = 4;

template <class Model>
std::size_t over_elements(const BlockScaledScalar& scalar, const std::vector<std::uint8_t>& a_scalar,
                          const std::vector<std::uint8_t>& b_scalar, std::span<float> c, BlockScaledGemmCounters& n,
                          std::size_t steps, Model& model) {
  const std::size_t rows = scalar.a().rows, cols = scalar.b().rows;
  std::size_t fast = 0;
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j0 = 0; j0 < cols; j0 += kLanes) {
      const std::size_t lanes = std::min(kLanes, cols - j0);
      std::array<Lane, kLanes> lane;
      for (std::size_t l = 0; l < lanes; ++l) {
        lane[l].j = j0 + l;
        lane[l].ok = !a_scalar[i] && !b_scalar[j0 + l];
        if (lane[l].ok) model.begin(i, lane[l], l);
      }
      for (std::size_t p = 0; p < steps; ++p)
        for (std::size_t l = 0; l < lanes; ++l)
          if (lane[l].ok) lane[l].ok = model.step(i, p, lane[l], l);
      for (std::size_t l = 0; l < lanes; ++l) {
        std::uint32_t bits = 0;
        if (lane[l].ok) {
          n.accumulate += lane[l].counts.accumulate;
          n.promotions += lane[l].counts.promotions;
          n.promotions_inexact += lane[l].counts.promotions_inexact;
          bits = model.finish(lane[l]);
          ++fast;
        } else {
          bits = scalar.element(i, j0 + l, n);
        }
        c[i * cols + j0 + l] = std::bit_cast<float>(bits);
      }
    }
  return fast;
}

// kind::mxf8f6f4: one step per instruction (32 products, one scale pair), then the epilogue.
struct Mxf8f6f4Model {
  const DecodedCodes& a;
  const DecodedCodes& b;
  const DecodedScales& sa;
  const DecodedScales& sb;
  ProductRule rule;
  float alpha;
  std::size_t instructions;

  void begin(std::size_t, Lane&, std::size_t) const {}
  bool step(std::size_t i, std::size_t p, Lane& x, std::size_t) const {
    const std::size_t at = i * a.k + p * 32, bt = x.j * b.k + p * 32;
    const int offset = sa.exp[i * instructions + p] + sb.exp[x.j * instructions + p];
    return fused_products(&a.value[at], &a.exp[at], &b.value[bt], &b.exp[bt], offset, rule, x.d, x.counts.accumulate);
  }
  std::uint32_t finish(const Lane& x) const { return epilogue(alpha, x.d); }
};

// Each model's fast path: nullopt where it cannot take the GEMM at all (formats or blocks it does not know).
std::optional<std::size_t> mxf8f6f4(const BlockScaledScalar& scalar, std::span<float> c, BlockScaledGemmCounters& n,
                                    int dF) {
  const ScaledOperand &a = scalar.a(), &b = scalar.b();
  const ElementTable ta = element_table(a.element), tb = element_table(b.element);
  if (!ta.usable || !tb.usable || a.block != 32 || b.block != 32) return std::nullopt;
  DecodedCodes da(a, ta), db(b, tb);
  const DecodedScales sa(a, scalar.instruction().scale, 32, da.scalar_row),
      sb(b, scalar.instruction().scale, 32, db.scalar_row);
  const ProductRule rule{scalar.instruction().model.fraction_bits + dF, 24};
  if (rule.F > 26) return std::nullopt;  // product_terms' int32 pairs
  Mxf8f6f4Model model{da, db, sa, sb, rule, scalar.alpha(), a.k / 32};
  return over_elements(scalar, da.scalar_row, db.scalar_row, c, n, a.k / 32, model);
}

// 2 x each code's value for E2M1 (an integer in [-12, 12]), as mma_block_scaled.cpp's fp4_doubled.
std::vector<std::int16_t> doubled_fp4(const ScaledOperand& x, std::vector<std::uint8_t>& scalar_row) {
  std::array<std::int16_t, 16> table{};
  for (std::uint32_t code = 0; code < 16; ++code)
    table[code] = static_cast<std::int16_t>(formats::to_double(x.element, code) * 2);
  std::vector<std::int16_t> v(x.codes.size());
  for (std::size_t i = 0; i < x.codes.size(); ++i) {
    if (x.codes[i] >= 16) scalar_row[i / x.k] = 1;
    else v[i] = table[x.codes[i]];
  }
  return v;
}

// kind::mxf4nvf4: every group term of the element first (group_terms, into the lane's slot), then one step
// per instruction (four groups and c), then the epilogue.
struct Mxf4nvf4Model {
  const std::vector<std::int16_t>& da;
  const std::vector<std::int16_t>& db;
  const DecodedScales& sa;
  const DecodedScales& sb;
  int F;
  float alpha;
  std::size_t k, groups;
  std::array<GroupTerms, kLanes> slots;

  void begin(std::size_t i, Lane& x, std::size_t slot) {
    const std::size_t as = i * groups, bs = x.j * groups;
    group_terms(da.data() + i * k, db.data() + x.j * k, sa.exp.data() + as, sa.significand8.data() + as,
                sb.exp.data() + bs, sb.significand8.data() + bs, groups, slots[slot]);  // data(): K may be 0
  }
  bool step(std::size_t, std::size_t p, Lane& x, std::size_t slot) const {
    return fused_groups(&slots[slot].value[p * 4], &slots[slot].exponent[p * 4], F, x.d, x.counts.accumulate);
  }
  std::uint32_t finish(const Lane& x) const { return epilogue(alpha, x.d); }
};

std::optional<std::size_t> mxf4nvf4(const BlockScaledScalar& scalar, std::span<float> c, BlockScaledGemmCounters& n,
                                    int dF) {
  const ScaledOperand &a = scalar.a(), &b = scalar.b();
  const BlockScaledInstruction& in = scalar.instruction();
  if (a.element.width() != 4 || b.element.width() != 4 || a.block != b.block ||
      a.block != static_cast<std::size_t>(in.block))
    return std::nullopt;
  std::vector<std::uint8_t> a_scalar(a.rows, 0), b_scalar(b.rows, 0);
  const std::vector<std::int16_t> da = doubled_fp4(a, a_scalar), db = doubled_fp4(b, b_scalar);
  const DecodedScales sa(a, in.scale, 16, a_scalar), sb(b, in.scale, 16, b_scalar);
  const std::size_t groups = a.k / 16;
  Mxf4nvf4Model model{da, db, sa, sb, in.model.fraction_bits + dF, scalar.alpha(), a.k, groups, {}};
  for (GroupTerms& g : model.slots) g = {std::vector<std::int32_t>(groups), std::vector<std::int16_t>(groups)};
  return over_elements(scalar, a_scalar, b_scalar, c, n, a.k / 64, model);
}

// sm90.fp8-blockwise: one step per block of 128, four wgmma (F = 13, E8M13) from zero, then the promotion.
struct HopperModel {
  const DecodedCodes& a;
  const DecodedCodes& b;
  const std::vector<float>& scale_a;
  const std::vector<float>& scale_b;
  ProductRule rule;
  std::size_t blocks;

  void begin(std::size_t, Lane&, std::size_t) const {}
  bool step(std::size_t i, std::size_t p, Lane& x, std::size_t) const {
    std::uint32_t partial = 0;
    for (std::size_t q = p * 128; q < p * 128 + 128; q += 32)
      if (!fused_products(&a.value[i * a.k + q], &a.exp[i * a.k + q], &b.value[x.j * b.k + q], &b.exp[x.j * b.k + q],
                              0, rule, partial, x.counts.accumulate))
        return false;
    x.final_accum = promote(x.final_accum, partial, scale_a[i * blocks + p], scale_b[x.j * blocks + p], x.counts);
    return true;
  }
  std::uint32_t finish(const Lane& x) const { return x.final_accum; }
};

std::optional<std::size_t> hopper(const BlockScaledScalar& scalar, std::span<float> c, BlockScaledGemmCounters& n,
                                  int dF) {
  const ScaledOperand &a = scalar.a(), &b = scalar.b();
  const MmaModel& m = scalar.wgmma();
  if (m.k != 32 || m.split_halves || m.fp8_through_fp16 || m.output != MmaOutput::e8m13_toward_zero ||
      a.block != 128 || b.block != 128)
    return std::nullopt;
  const ElementTable ta = element_table(m.a), tb = element_table(m.b);
  if (!ta.usable || !tb.usable) return std::nullopt;
  const DecodedCodes da(a, ta), db(b, tb);
  const ProductRule rule{m.fraction_bits + dF, 14};
  if (rule.F > 26) return std::nullopt;  // product_terms' int32 pairs
  HopperModel model{da, db, a.scales, b.scales, rule, a.k / 128};
  return over_elements(scalar, da.scalar_row, db.scalar_row, c, n, a.k / 128, model);
}

}  // namespace

std::size_t block_scaled_multiply_fast(const BlockScaledScalar& scalar, std::span<float> c, BlockScaledGemmCounters& n,
                                       int fraction_bits_delta) {
  std::optional<std::size_t> fast;
  // The double arithmetic of the epilogue and the promotion assumes the default rounding to nearest.
  if (std::fegetround() == FE_TONEAREST) {
    switch (scalar.model()) {
      case Accumulation::sm100_mxf8f6f4: fast = mxf8f6f4(scalar, c, n, fraction_bits_delta); break;
      case Accumulation::sm100_mxf4nvf4: fast = mxf4nvf4(scalar, c, n, fraction_bits_delta); break;
      case Accumulation::sm90_fp8_blockwise: fast = hopper(scalar, c, n, fraction_bits_delta); break;
    }
  }
  if (fast) return *fast;
  const std::size_t cols = scalar.b().rows;
  for (std::size_t i = 0; i < scalar.a().rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) c[i * cols + j] = std::bit_cast<float>(scalar.element(i, j, n));
  return 0;
}

}  // namespace mpverify::emu::detail
