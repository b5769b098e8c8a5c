#include "record/lost_updates_avx2.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace mpverify::record::detail {

#if defined(__x86_64__) && defined(__GNUC__)

namespace {

__attribute__((target("avx2,popcnt"))) inline __m256i splat(int v) { return _mm256_set1_epi32(v); }

__attribute__((target("avx2,popcnt"))) inline __m256i is_not(__m256i m) {
  return _mm256_xor_si256(m, _mm256_set1_epi32(-1));
}

__attribute__((target("avx2,popcnt"))) inline std::uint64_t lanes(__m256i m) {
  return static_cast<std::uint64_t>(__builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(m)))));
}

}  // namespace

// Line by line the scalar rule (lost_updates.cpp, swamped_by_spacing), each condition a lane mask; every
// value stays below 2^31, so signed compares order them as the scalar unsigned ones.
__attribute__((target("avx2,popcnt"))) SpacingCounts spacing_avx2(const float* w, const float* u, std::size_t n,
                                                                   int precision, int emin, int emax) {
  const __m256i magnitude = splat(0x7fffffff), exponent = splat(0x7f800000), fraction = splat(0x7fffff);
  const __m256i hidden = splat(0x800000), zero = _mm256_setzero_si256(), one = splat(1);
  const __m256i v_emin = splat(emin), v_emax = splat(emax), q_offset = splat(1 - precision);
  SpacingCounts c;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i wb = _mm256_castps_si256(_mm256_loadu_ps(w + i)), ub = _mm256_castps_si256(_mm256_loadu_ps(u + i));
    const __m256i w_abs = _mm256_and_si256(wb, magnitude), u_abs = _mm256_and_si256(ub, magnitude);
    const __m256i field = _mm256_srli_epi32(w_abs, 23);
    const __m256i float_normal = is_not(_mm256_cmpeq_epi32(field, zero));
    const __m256i e = _mm256_blendv_epi8(splat(-127), _mm256_sub_epi32(field, splat(127)), float_normal);
    const __m256i significand =
        _mm256_blendv_epi8(w_abs, _mm256_or_si256(_mm256_and_si256(w_abs, fraction), hidden), float_normal);
    const __m256i q = _mm256_add_epi32(_mm256_max_epi32(e, v_emin), q_offset);
    const __m256i shift =
        _mm256_sub_epi32(q, _mm256_blendv_epi8(splat(-149), _mm256_sub_epi32(e, splat(23)), float_normal));
    const __m256i clamped = _mm256_min_epi32(shift, splat(31));
    const __m256i below = _mm256_sub_epi32(_mm256_sllv_epi32(one, clamped), one);
    const __m256i not_a_value =
        _mm256_or_si256(_mm256_or_si256(_mm256_cmpgt_epi32(e, v_emax), _mm256_cmpgt_epi32(shift, splat(24))),
                        is_not(_mm256_cmpeq_epi32(_mm256_and_si256(significand, below), zero)));
    const __m256i even = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_srlv_epi32(significand, clamped), one), zero);
    const __m256i toward_zero = _mm256_srai_epi32(_mm256_xor_si256(wb, ub), 31);
    const __m256i binade_first =
        _mm256_and_si256(_mm256_cmpeq_epi32(significand, hidden), _mm256_cmpgt_epi32(e, v_emin));
    // h = q - 1, or q - 2 (a mask of -1 added) toward zero from a binade's first value.
    const __m256i h = _mm256_add_epi32(_mm256_sub_epi32(q, one), _mm256_and_si256(toward_zero, binade_first));
    // 2^h as a float pattern: normal for h >= -126, else a subnormal's single bit (a negative shift count is
    // a huge unsigned one, for which the shift gives 0: below 2^-149).
    const __m256i normal_gap = _mm256_slli_epi32(_mm256_add_epi32(h, splat(127)), 23);
    const __m256i subnormal_gap = _mm256_sllv_epi32(one, _mm256_add_epi32(h, splat(149)));
    const __m256i half_gap = _mm256_blendv_epi8(subnormal_gap, normal_gap, _mm256_cmpgt_epi32(h, splat(-127)));
    const __m256i swamped = _mm256_or_si256(_mm256_cmpgt_epi32(half_gap, u_abs),
                                            _mm256_and_si256(_mm256_cmpeq_epi32(u_abs, half_gap), even));
    // emu::is_update on the patterns: u != 0, w and u finite; a lost update needs w != 0.
    const __m256i update = _mm256_andnot_si256(
        _mm256_or_si256(_mm256_cmpeq_epi32(u_abs, zero),
                        _mm256_or_si256(_mm256_cmpeq_epi32(_mm256_and_si256(wb, exponent), exponent),
                                        _mm256_cmpeq_epi32(_mm256_and_si256(ub, exponent), exponent))),
        splat(-1));
    const __m256i counted = _mm256_andnot_si256(_mm256_cmpeq_epi32(w_abs, zero), update);
    c.updates += lanes(update);
    c.lost += lanes(_mm256_and_si256(counted, swamped));
    c.not_a_value += lanes(_mm256_and_si256(counted, not_a_value));
  }
  c.done = i;
  return c;
}

__attribute__((target("avx2,popcnt"))) RatioCounts ratios_avx2(const float* w, const float* u, std::size_t n,
                                                                int precision) {
  const __m256 magnitude = _mm256_castsi256_ps(splat(0x7fffffff)), infinity = _mm256_castsi256_ps(splat(0x7f800000));
  const __m256 needed = _mm256_set1_ps(static_cast<float>(1u << precision));  // precision <= 24: exact
  const __m256 sufficient = _mm256_set1_ps(static_cast<float>(1u << (precision + 1)));
  RatioCounts c;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 w_abs = _mm256_and_ps(_mm256_loadu_ps(w + i), magnitude);
    const __m256 u_abs = _mm256_and_ps(_mm256_loadu_ps(u + i), magnitude);
    // emu::is_update: u != 0 and both finite (ordered compares: false for NaN).
    const __m256 update = _mm256_and_ps(_mm256_cmp_ps(u_abs, _mm256_setzero_ps(), _CMP_GT_OQ),
                                        _mm256_and_ps(_mm256_cmp_ps(u_abs, infinity, _CMP_LT_OQ),
                                                      _mm256_cmp_ps(w_abs, infinity, _CMP_LT_OQ)));
    const __m256 at_needed = _mm256_cmp_ps(w_abs, _mm256_mul_ps(needed, u_abs), _CMP_GE_OQ);
    const __m256 above_sufficient = _mm256_cmp_ps(w_abs, _mm256_mul_ps(sufficient, u_abs), _CMP_GT_OQ);
    c.needed += lanes(_mm256_castps_si256(_mm256_and_ps(update, at_needed)));
    c.sufficient += lanes(_mm256_castps_si256(_mm256_and_ps(update, above_sufficient)));
  }
  c.done = i;
  return c;
}

#else

RatioCounts ratios_avx2(const float*, const float*, std::size_t, int) { return {}; }
SpacingCounts spacing_avx2(const float*, const float*, std::size_t, int, int, int) { return {}; }

#endif

}  // namespace mpverify::record::detail
