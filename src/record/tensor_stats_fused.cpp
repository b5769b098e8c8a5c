#include "record/tensor_stats_fused.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "emu/quantize.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
// GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized and -Wuninitialized (they start from
// _mm256_undefined_*): the warnings are about the headers, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace mpverify::record::detail {

namespace {

constexpr std::uint32_t kMagnitude = 0x7fffffffu;

// --- the classifier, found by asking the definition -------------------------------------------------

// What the definition (emu::quantize with counters, the path tensor_stats always took) counts for x.
emu::Counters probe(const formats::Format& f, float x) {
  emu::Counters c;
  float out = 0;
  emu::quantize(std::span<const float>(&x, 1), std::span<float>(&out, 1), emu::QuantizeSpec{f}, &c);
  return c;
}

float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }

// The last u in [lo, hi] where `holds` is true, for a predicate true up to some u and false after it;
// lo - 1 when it is false everywhere.
template <class Holds>
std::uint32_t last_true(std::uint32_t lo, std::uint32_t hi, Holds holds) {
  if (!holds(lo)) return lo - 1;
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo + 1) / 2;
    if (holds(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

std::uint32_t inexact_mask(int low_bits, int subnormal_shift, std::uint32_t field) {
  const int k = std::max(low_bits, subnormal_shift - static_cast<int>(std::max(field, 1u)));
  if (k >= 24) return kMagnitude;  // even the binade's power of two is below the quantum
  return k <= 0 ? 0u : (1u << k) - 1;
}

// The first field whose every value is at least t.
std::uint32_t field_from(std::uint32_t t) { return (t + 0x7fffffu) >> 23; }

// The plain fields (tensor_stats_fused.h): from the first field above the tiny, subnormal and float
// subnormal values whose quantum mask is the normal one, up to (not into) the field of the first value
// that overflows, gives a NaN or exceeds finite_max.
void find_plain_fields(RoundingClassifier& c) {
  const int normal_mask_from = c.subnormal_shift - c.low_bits;  // k = low_bits from this field up
  const std::uint32_t lo = std::max({field_from(c.normal_min), field_from(c.tiny_max + 1), 1u,
                                     static_cast<std::uint32_t>(std::max(normal_mask_from, 1))});
  const std::uint32_t hi = std::min({c.overflow_min >> 23, c.nan_min >> 23, (c.finite_max + 1) >> 23, 255u});
  if (lo >= hi || c.low_bits >= 24) return;  // none: the kernel's full path takes every vector
  c.plain_field_lo = lo;
  c.plain_field_hi = hi;
  c.plain_mask = (1u << c.low_bits) - 1;
}

void find_thresholds(const formats::Format& f, RoundingClassifier& c) {
  constexpr std::uint32_t top = kInfinityBits - 1;  // the largest finite magnitude
  c.zero_max = last_true(1, top, [&](std::uint32_t u) { return probe(f, from_bits(u)).underflow_to_zero == 1; });
  c.normal_min = last_true(1, top, [&](std::uint32_t u) {
                   const emu::Counters p = probe(f, from_bits(u));
                   return p.underflow_to_zero + p.subnormal > 0;
                 }) + 1;
  c.overflow_min = last_true(1, top, [&](std::uint32_t u) { return probe(f, from_bits(u)).overflow == 0; }) + 1;
  c.nan_min = last_true(1, top, [&](std::uint32_t u) { return probe(f, from_bits(u)).nan_created == 0; }) + 1;
  c.finite_max = last_true(0, top, [&](std::uint32_t u) { return static_cast<double>(from_bits(u)) <= f.max_finite(); });
  // Tiny after rounding (QuantizeSpec's default): |x| rounded to p bits with an unbounded exponent is below
  // the smallest normal, i.e. |x| < min_normal (1 - 2^-(p+1)), the midpoint below it (the tie goes up).
  const double tiny_below = f.min_normal() * (1 - std::ldexp(1.0, -(f.precision() + 1)));
  c.tiny_max = last_true(0, top, [&](std::uint32_t u) { return static_cast<double>(from_bits(u)) < tiny_below; });
  c.low_bits = std::max(0, 23 - f.mantissa_bits);
  // Below the normal range the quantum is the smallest subnormal 2^(emin - m); a float of field e has the
  // ulp 2^(max(e, 1) - 150): the bits below the quantum are (emin - m + 150) - max(e, 1).
  c.subnormal_shift = f.emin() - f.mantissa_bits + 150;
  for (std::uint32_t field = 0; field < 256; ++field)
    c.inexact_mask[field] = inexact_mask(c.low_bits, c.subnormal_shift, field);
  c.infinity = probe(f, from_bits(kInfinityBits));
  c.nan = probe(f, from_bits(0x7fc00000u));
  find_plain_fields(c);
}

// The magnitudes the classifier is checked on, both signs: every exponent field with mantissas that set
// each bit, its neighbours and patterns, every threshold with its neighbours, infinity and NaNs.
std::vector<std::uint32_t> check_points(const RoundingClassifier& c) {
  std::vector<std::uint32_t> mantissas = {0, 3, 5, 0x555555, 0x2aaaaa, 0x7fffff, 0x400001, 0x7ffffe};
  for (int b = 0; b < 23; ++b)
    for (std::uint32_t m : {1u << b, (1u << b) - 1, (1u << b) + 1}) mantissas.push_back(m & 0x7fffffu);
  std::vector<std::uint32_t> points;
  for (std::uint32_t field = 0; field < 255; ++field)
    for (std::uint32_t m : mantissas) points.push_back(field << 23 | m);
  for (std::uint32_t t : {c.zero_max, c.normal_min, c.overflow_min, c.nan_min, c.tiny_max, c.finite_max})
    for (std::uint32_t d = 0; d <= 16; ++d)
      for (std::uint32_t u : {t - d, t + d})
        if (u < kInfinityBits) points.push_back(u);
  for (std::uint32_t u : {kInfinityBits, 0x7f800001u, 0x7fa00000u, 0x7fc00000u, 0x7fffffffu}) points.push_back(u);
  return points;
}

// What the AVX2 kernel counts for a plain value: inexact or nothing (elements and the other counters that
// rounding one value leaves as they are, kept from the definition).
bool plain_rule_holds(const RoundingClassifier& c, const emu::Counters& definition, std::uint32_t u) {
  emu::Counters plain = definition;
  plain.zeros_in = plain.nonfinite_in = 0;
  plain.underflow = plain.underflow_to_zero = plain.subnormal = plain.overflow = plain.nan_created = 0;
  plain.inexact = (u & c.plain_mask) != 0;
  return definition == plain;
}

bool agrees_with_definition(const formats::Format& f, RoundingClassifier& c) {
  for (const std::uint32_t u : check_points(c))
    for (const std::uint32_t sign : {0u, 0x80000000u}) {
      const float x = from_bits(u | sign);
      const emu::Counters definition = probe(f, x);
      if (!(classify_one(c, x) == definition)) return false;
      const std::uint32_t field = u >> 23;
      if (field >= c.plain_field_lo && field < c.plain_field_hi && !plain_rule_holds(c, definition, u))
        c.plain_field_lo = c.plain_field_hi = 0;  // the plain shortcut is off; the classifier still stands
    }
  return true;
}

RoundingClassifier build_classifier(const formats::Format& f) {
  RoundingClassifier c;
  // Unsigned formats read the sign, formats without a zero or subnormals flush or clamp: the separate
  // passes count those.
  if (!f.is_signed || !f.has_zero || !f.subnormals || f.mantissa_bits > 23) return c;
  find_thresholds(f, c);
  c.usable = true;
  c.usable = agrees_with_definition(f, c);
  return c;
}

// --- the pass --------------------------------------------------------------------------------------

struct Tally {
  std::uint64_t zeros = 0, nonfinite = 0, nans = 0, to_zero = 0, subnormal = 0, overflow = 0, nan_created = 0,
                inexact = 0, underflow = 0, float_subnormals = 0;
};

struct PassState {
  std::array<std::array<std::uint64_t, 256>, 4> by_field{};  // four tables: repeats do not wait on a store
  Tally tally;
  std::uint32_t max_bits = 0;
  std::array<double, 8> sums{};  // the norm's partial sums: element i goes to sums[i % 8]
};

// The norm's term: non-finite values add 0 (|v| <= FLT_MAX is false for infinities and NaN).
double square(float v) {
  const double d = std::fabs(v) <= std::numeric_limits<float>::max() ? static_cast<double>(v) : 0.0;
  return d * d;
}

inline void count_one(PassState& s, const RoundingClassifier& c, std::size_t table, float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x) & kMagnitude;
  const std::uint32_t field = u >> 23;
  ++s.by_field[table][field];
  const bool finite = u < kInfinityBits;
  s.max_bits = std::max(s.max_bits, finite ? u : 0u);
  Tally& t = s.tally;
  t.zeros += u == 0;
  t.nonfinite += !finite;
  t.nans += u > kInfinityBits;
  // Unsigned differences: u - lo < hi - lo is lo <= u < hi in one comparison.
  t.to_zero += u - 1u < c.zero_max;
  t.subnormal += u - (c.zero_max + 1) < c.normal_min - (c.zero_max + 1);
  t.overflow += u - c.overflow_min < kInfinityBits - c.overflow_min;
  t.nan_created += u - c.nan_min < kInfinityBits - c.nan_min;
  const bool inexact = finite && ((u & c.inexact_mask[field]) != 0 || u > c.finite_max);
  t.inexact += inexact;
  t.underflow += inexact && u <= c.tiny_max;
  t.float_subnormals += u - 1u < 0x007fffffu;
}

// From `begin` (a multiple of 8) to the end: blocks of 8 feed the eight partial sums, the tail sums[0].
void portable_range(PassState& s, std::span<const float> x, const RoundingClassifier& c, std::size_t begin) {
  std::size_t i = begin;
  for (; i + 8 <= x.size(); i += 8)
    for (std::size_t j = 0; j < 8; ++j) {
      count_one(s, c, j & 3, x[i + j]);
      s.sums[j] += square(x[i + j]);
    }
  for (; i < x.size(); ++i) {
    count_one(s, c, 0, x[i]);
    s.sums[0] += square(x[i]);
  }
}

void add_times(emu::Counters& into, const emu::Counters& one, std::uint64_t k) {
  into.inexact += k * one.inexact;
  into.underflow += k * one.underflow;
  into.underflow_to_zero += k * one.underflow_to_zero;
  into.subnormal += k * one.subnormal;
  into.overflow += k * one.overflow;
  into.nan_created += k * one.nan_created;
}

FusedResult finish(const PassState& s, std::span<const float> x, const RoundingClassifier& c) {
  FusedResult r;
  const Tally& t = s.tally;
  emu::Counters& k = r.counters;
  k.elements = x.size();
  k.zeros_in = t.zeros;
  k.nonfinite_in = t.nonfinite;
  k.inexact = t.inexact;
  k.underflow = t.underflow;
  k.underflow_to_zero = t.to_zero;
  k.subnormal = t.subnormal;
  k.overflow = t.overflow;
  k.nan_created = t.nan_created;
  add_times(k, c.infinity, t.nonfinite - t.nans);
  add_times(k, c.nan, t.nans);

  emu::ExponentHistogram& h = r.histogram;
  constexpr int offset = -127 - emu::ExponentHistogram::min_exponent;
  for (std::size_t field = 1; field < 255; ++field)
    h.bins[field + offset] = s.by_field[0][field] + s.by_field[1][field] + s.by_field[2][field] + s.by_field[3][field];
  h.zeros = t.zeros;
  h.nans = t.nans;
  h.infinities = t.nonfinite - t.nans;
  if (t.float_subnormals > 0)  // rare: binned by their leading bit, in a second look
    for (const float v : x) {
      const std::uint32_t u = std::bit_cast<std::uint32_t>(v) & kMagnitude;
      if (u != 0 && u < 0x00800000u)
        ++h.bins[static_cast<std::size_t>(std::bit_width(u) - 1 - 149 - emu::ExponentHistogram::min_exponent)];
    }
  r.max_abs = from_bits(s.max_bits);
  const auto& p = s.sums;
  r.norm = std::sqrt(((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7])));
  return r;
}

#if defined(__x86_64__) && defined(__GNUC__)

__attribute__((target("avx512f,popcnt"))) inline std::uint64_t lanes(__mmask16 m) {
  return static_cast<std::uint64_t>(__builtin_popcount(static_cast<unsigned>(m)));
}

// Whole vectors of 16 from the start; returns how many elements it took (a multiple of 16). The eight
// partial sums of the norm are one vector of doubles: elements i..i+7 then i+8..i+15 add to lanes 0..7 in
// the portable order, each lane one IEEE multiply and add (no contraction: -ffp-contract=off).
__attribute__((target("avx512f,popcnt"))) std::size_t avx512_range(PassState& s, std::span<const float> x,
                                                                   const RoundingClassifier& c) {
  const __m512i magnitude = _mm512_set1_epi32(static_cast<int>(kMagnitude));
  const __m512i infinity = _mm512_set1_epi32(static_cast<int>(kInfinityBits));
  const __m512i one = _mm512_set1_epi32(1), zero = _mm512_setzero_si512(), all = _mm512_set1_epi32(-1);
  const __m512i zero_max = _mm512_set1_epi32(static_cast<int>(c.zero_max));
  const __m512i sub_lo = _mm512_set1_epi32(static_cast<int>(c.zero_max + 1));
  const __m512i sub_width = _mm512_set1_epi32(static_cast<int>(c.normal_min - (c.zero_max + 1)));
  const __m512i ovf_lo = _mm512_set1_epi32(static_cast<int>(c.overflow_min));
  const __m512i ovf_width = _mm512_set1_epi32(static_cast<int>(kInfinityBits - c.overflow_min));
  const __m512i nan_lo = _mm512_set1_epi32(static_cast<int>(c.nan_min));
  const __m512i nan_width = _mm512_set1_epi32(static_cast<int>(kInfinityBits - c.nan_min));
  const __m512i finite_max = _mm512_set1_epi32(static_cast<int>(c.finite_max));
  const __m512i tiny_max = _mm512_set1_epi32(static_cast<int>(c.tiny_max));
  const __m512i float_sub = _mm512_set1_epi32(0x007fffff);
  const __m512i low_bits = _mm512_set1_epi32(c.low_bits), subnormal_shift = _mm512_set1_epi32(c.subnormal_shift);
  const __m512i whole = _mm512_set1_epi32(24);
  __m512i vmax = zero;
  __m512d sum = _mm512_loadu_pd(s.sums.data());
  Tally& t = s.tally;
  alignas(64) std::uint32_t fields[16];
  std::size_t i = 0;
  for (; i + 16 <= x.size(); i += 16) {
    const __m512 v = _mm512_loadu_ps(x.data() + i);
    const __m512i u = _mm512_and_si512(_mm512_castps_si512(v), magnitude);
    const __mmask16 finite = _mm512_cmplt_epu32_mask(u, infinity);
    vmax = _mm512_mask_max_epu32(vmax, finite, vmax, u);
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    lo = _mm512_maskz_mov_pd(static_cast<__mmask8>(finite), lo);
    hi = _mm512_maskz_mov_pd(static_cast<__mmask8>(finite >> 8), hi);
    sum = _mm512_add_pd(sum, _mm512_mul_pd(lo, lo));
    sum = _mm512_add_pd(sum, _mm512_mul_pd(hi, hi));
    t.zeros += lanes(_mm512_cmpeq_epi32_mask(u, zero));
    t.nonfinite += lanes(static_cast<__mmask16>(~finite));
    t.nans += lanes(_mm512_cmpgt_epu32_mask(u, infinity));
    t.to_zero += lanes(_mm512_cmplt_epu32_mask(_mm512_sub_epi32(u, one), zero_max));
    t.subnormal += lanes(_mm512_cmplt_epu32_mask(_mm512_sub_epi32(u, sub_lo), sub_width));
    t.overflow += lanes(_mm512_cmplt_epu32_mask(_mm512_sub_epi32(u, ovf_lo), ovf_width));
    t.nan_created += lanes(_mm512_cmplt_epu32_mask(_mm512_sub_epi32(u, nan_lo), nan_width));
    const __m512i field = _mm512_srli_epi32(u, 23);
    const __m512i k = _mm512_max_epi32(low_bits, _mm512_sub_epi32(subnormal_shift, _mm512_max_epi32(field, one)));
    __m512i mask = _mm512_sub_epi32(_mm512_sllv_epi32(one, k), one);  // k >= 32: sllv gives 0, mask all ones
    mask = _mm512_mask_mov_epi32(mask, _mm512_cmpge_epi32_mask(k, whole), all);
    const __mmask16 inexact =
        finite & (_mm512_test_epi32_mask(u, mask) | _mm512_cmpgt_epu32_mask(u, finite_max));
    t.inexact += lanes(inexact);
    t.underflow += lanes(inexact & _mm512_cmple_epu32_mask(u, tiny_max));
    t.float_subnormals += lanes(_mm512_cmplt_epu32_mask(_mm512_sub_epi32(u, one), float_sub));
    _mm512_store_si512(fields, field);
    for (std::size_t j = 0; j < 16; ++j) ++s.by_field[j & 3][fields[j]];
  }
  s.max_bits = std::max(s.max_bits, _mm512_reduce_max_epu32(vmax));
  _mm512_storeu_pd(s.sums.data(), sum);
  return i;
}

// AVX2 has no unsigned compares and no mask registers: unsigned a < b is a signed compare with both
// sign bits flipped, and a lane count is the popcount of the compare's sign bits.
__attribute__((target("avx2,popcnt"))) inline __m256i less_unsigned(__m256i a, __m256i b) {
  const __m256i flip = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  return _mm256_cmpgt_epi32(_mm256_xor_si256(b, flip), _mm256_xor_si256(a, flip));
}

__attribute__((target("avx2,popcnt"))) inline std::uint64_t lanes(__m256i m) {
  return static_cast<std::uint64_t>(__builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(m)))));
}

__attribute__((target("avx2,popcnt"))) inline __m256i splat(std::uint32_t v) {
  return _mm256_set1_epi32(static_cast<int>(v));
}

// u - lo < width (unsigned): lo <= u < lo + width, as count_one.
__attribute__((target("avx2,popcnt"))) inline __m256i in_range(__m256i u, __m256i lo, __m256i width) {
  return less_unsigned(_mm256_sub_epi32(u, lo), width);
}

// The AVX-512 kernel's twin for 8 lanes: elements i..i+3 add to partial sums 0..3 and i+4..i+7 to 4..7,
// the portable order.
__attribute__((target("avx2,popcnt"))) std::size_t avx2_range(PassState& s, std::span<const float> x,
                                                               const RoundingClassifier& c) {
  const __m256i magnitude = splat(kMagnitude), infinity = splat(kInfinityBits), one = splat(1);
  const __m256i zero_max = splat(c.zero_max), sub_lo = splat(c.zero_max + 1);
  const __m256i sub_width = splat(c.normal_min - (c.zero_max + 1));
  const __m256i ovf_lo = splat(c.overflow_min), ovf_width = splat(kInfinityBits - c.overflow_min);
  const __m256i nan_lo = splat(c.nan_min), nan_width = splat(kInfinityBits - c.nan_min);
  const __m256i finite_max = splat(c.finite_max), tiny_max = splat(c.tiny_max), float_sub = splat(0x007fffffu);
  const __m256i low_bits = splat(static_cast<std::uint32_t>(c.low_bits));
  const __m256i subnormal_shift = splat(static_cast<std::uint32_t>(c.subnormal_shift));
  const __m256i below_whole = splat(23), zero = _mm256_setzero_si256();
  const __m256i plain_lo = splat(c.plain_field_lo), plain_width = splat(c.plain_field_hi - c.plain_field_lo);
  const __m256i plain_mask = splat(c.plain_mask);
  __m256i vmax = zero;
  __m256d sum_lo = _mm256_loadu_pd(s.sums.data()), sum_hi = _mm256_loadu_pd(s.sums.data() + 4);
  Tally& t = s.tally;
  alignas(32) std::uint32_t fields[8];
  std::size_t i = 0;
  for (; i + 8 <= x.size(); i += 8) {
    const __m256 v = _mm256_loadu_ps(x.data() + i);
    const __m256i u = _mm256_and_si256(_mm256_castps_si256(v), magnitude);
    const __m256i finite = _mm256_cmpgt_epi32(infinity, u);  // u <= 0x7fffffff: signed is unsigned here
    vmax = _mm256_max_epu32(vmax, _mm256_and_si256(u, finite));
    const __m256 v_finite = _mm256_and_ps(v, _mm256_castsi256_ps(finite));
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v_finite));
    const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v_finite, 1));
    sum_lo = _mm256_add_pd(sum_lo, _mm256_mul_pd(lo, lo));
    sum_hi = _mm256_add_pd(sum_hi, _mm256_mul_pd(hi, hi));
    const __m256i field = _mm256_srli_epi32(u, 23);
    const __m256i is_zero = _mm256_cmpeq_epi32(u, zero);
    t.zeros += lanes(is_zero);
    _mm256_store_si256(reinterpret_cast<__m256i*>(fields), field);
    for (std::size_t j = 0; j < 8; ++j) ++s.by_field[j & 3][fields[j]];
    // Activations are mostly plain: then inexactness is the only count (tensor_stats_fused.h).
    if (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(is_zero, in_range(field, plain_lo, plain_width)))) ==
        0xff) {
      t.inexact += 8 - lanes(_mm256_cmpeq_epi32(_mm256_and_si256(u, plain_mask), zero));
      continue;
    }
    t.nonfinite += 8 - lanes(finite);
    t.nans += lanes(_mm256_cmpgt_epi32(u, infinity));
    t.to_zero += lanes(less_unsigned(_mm256_sub_epi32(u, one), zero_max));
    t.subnormal += lanes(in_range(u, sub_lo, sub_width));
    t.overflow += lanes(in_range(u, ovf_lo, ovf_width));
    t.nan_created += lanes(in_range(u, nan_lo, nan_width));
    const __m256i k = _mm256_max_epi32(low_bits, _mm256_sub_epi32(subnormal_shift, _mm256_max_epi32(field, one)));
    __m256i mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, k), one);  // k >= 32: sllv gives 0, mask all ones
    mask = _mm256_or_si256(mask, _mm256_cmpgt_epi32(k, below_whole));  // k >= 24: every bit
    const __m256i has_low = _mm256_xor_si256(_mm256_cmpeq_epi32(_mm256_and_si256(u, mask), zero), splat(~0u));
    const __m256i inexact = _mm256_and_si256(finite, _mm256_or_si256(has_low, less_unsigned(finite_max, u)));
    t.inexact += lanes(inexact);
    t.underflow += lanes(_mm256_andnot_si256(less_unsigned(tiny_max, u), inexact));
    t.float_subnormals += lanes(less_unsigned(_mm256_sub_epi32(u, one), float_sub));
  }
  alignas(32) std::uint32_t maxima[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(maxima), vmax);
  for (const std::uint32_t m : maxima) s.max_bits = std::max(s.max_bits, m);
  _mm256_storeu_pd(s.sums.data(), sum_lo);
  _mm256_storeu_pd(s.sums.data() + 4, sum_hi);
  return i;
}

bool cpu_has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
}

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("popcnt");
}

#else

std::size_t avx512_range(PassState&, std::span<const float>, const RoundingClassifier&) { return 0; }
bool cpu_has_avx512() { return false; }
std::size_t avx2_range(PassState&, std::span<const float>, const RoundingClassifier&) { return 0; }
bool cpu_has_avx2() { return false; }

#endif

}  // namespace

emu::Counters classify_one(const RoundingClassifier& c, float x) {
  PassState s;
  portable_range(s, std::span<const float>(&x, 1), c, 0);
  return finish(s, std::span<const float>(&x, 1), c).counters;
}

const RoundingClassifier& rounding_classifier(const formats::Format& f) {
  // Few formats per process (a run's study format and its tensors' own); each is built once, about a
  // millisecond of probing. unique_ptr: the references handed out stay valid as the list grows.
  static std::mutex mutex;
  static std::vector<std::pair<formats::Format, std::unique_ptr<RoundingClassifier>>> built;
  const std::lock_guard<std::mutex> lock(mutex);
  for (const auto& [format, classifier] : built)
    if (format == f) return *classifier;
  built.emplace_back(f, std::make_unique<RoundingClassifier>(build_classifier(f)));
  return *built.back().second;
}

bool fused_avx512_available() {
  static const bool available = cpu_has_avx512();
  return available;
}

bool fused_avx2_available() {
  static const bool available = cpu_has_avx2();
  return available;
}

FusedKernel fastest_fused_kernel() {
  if (fused_avx512_available()) return FusedKernel::avx512;
  return fused_avx2_available() ? FusedKernel::avx2 : FusedKernel::portable;
}

FusedResult fused_pass(std::span<const float> x, const RoundingClassifier& c, FusedKernel kernel) {
  auto s = std::make_unique<PassState>();  // 8 KB of tables: off the stack
  std::size_t done = 0;
  if (kernel == FusedKernel::avx512) done = avx512_range(*s, x, c);
  if (kernel == FusedKernel::avx2) done = avx2_range(*s, x, c);
  portable_range(*s, x, c, done);
  return finish(*s, x, c);
}

}  // namespace mpverify::record::detail
