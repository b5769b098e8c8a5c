// add_lanes (accumulate.h) on AVX-512: eight running sums advanced at a time,
// each lane exactly sum_natively's steps (native_rounding.h): TwoSum, the
// sum rounded to odd in double, then the format's rounding (for binary16:
// to odd in float, then to nearest-even at bit 13 on the bits). A vector
// with any lane outside the native domain (non-finite, tiny, overflowing)
// is redone lane by lane with add_in_format, so results and counts never
// depend on the path. Batch-norm statistics and bias gradients (block_sum)
// spend most of an emulated training step's reductions here.
#include "emu/accumulate.h"
#include "emu/quantize.h"
#include "emu/quantize_simd.h"
#include "formats/two_sum_avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdint>

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers

namespace mpverify::emu::detail {

namespace {

struct LaneCounts {
  std::uint64_t elements = 0, zeros = 0, inexact = 0, addends = 0, swamped = 0;
};

#define MPVERIFY_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,popcnt")))

MPVERIFY_TARGET inline std::uint64_t count(__mmask8 m) {
  return static_cast<std::uint64_t>(__builtin_popcount(static_cast<unsigned>(m)));
}

// One vector of 8 lanes: s + t rounded to the format into `value`; returns
// the lanes inside the native domain (all others must be redone).
template <bool Binary16>
MPVERIFY_TARGET inline __mmask8 step(__m512d s, __m512d t, __m512d& value, __mmask8& inexact_out) {
  const __m512d zero = _mm512_setzero_pd(), infinity = _mm512_set1_pd(__builtin_inf());
  const __m512i one = _mm512_set1_epi64(1);
  const __m512d r = _mm512_add_pd(s, t);
  const __m512d e = formats::two_sum_error_avx512(s, t, r);  // r + e == s + t exactly
  const __mmask8 finite = _mm512_cmp_pd_mask(_mm512_abs_pd(r), infinity, _CMP_LT_OQ) &
                          _mm512_cmp_pd_mask(_mm512_abs_pd(s), infinity, _CMP_LT_OQ) &
                          _mm512_cmp_pd_mask(_mm512_abs_pd(t), infinity, _CMP_LT_OQ);
  // Round to odd in double: one ulp toward zero where r was rounded away from it, last bit set.
  const __mmask8 inexact = _mm512_cmp_pd_mask(e, zero, _CMP_NEQ_OQ);
  const __mmask8 away = inexact & (_mm512_cmp_pd_mask(r, zero, _CMP_GT_OQ) ^ _mm512_cmp_pd_mask(e, zero, _CMP_GT_OQ));
  __m512i ro_bits = _mm512_mask_sub_epi64(_mm512_castpd_si512(r), away, _mm512_castpd_si512(r), one);
  ro_bits = _mm512_mask_or_epi64(ro_bits, inexact, ro_bits, one);
  const __m512d ro = _mm512_castsi512_pd(ro_bits);
  const __mmask8 ro_zero = _mm512_cmp_pd_mask(ro, zero, _CMP_EQ_OQ);

  const __m256 f = _mm512_cvtpd_ps(ro);  // RNE (the MXCSR default): binary32's one rounding
  const __m512d fd = _mm512_cvtps_pd(f);
  const __mmask8 f_inexact = _mm512_cmp_pd_mask(fd, ro, _CMP_NEQ_OQ);
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i f_bits = _mm256_castps_si256(f);
  const __m256i magnitude = _mm256_and_si256(f_bits, magnitude_mask);
  // strictly above the smallest normal and finite
  __mmask8 domain = finite & (ro_zero | (_mm256_cmpgt_epu32_mask(magnitude, _mm256_set1_epi32(0x00800000)) &
                                         _mm256_cmplt_epu32_mask(magnitude, _mm256_set1_epi32(0x7f800000))));
  if constexpr (!Binary16) {
    value = fd;
    inexact_out = inexact | f_inexact;
  } else {
    // to odd in float: one ulp toward zero where f was rounded away from ro, last bit set
    const __mmask8 f_away = f_inexact & _mm512_cmp_pd_mask(_mm512_abs_pd(fd), _mm512_abs_pd(ro), _CMP_GT_OQ);
    const __m256i one32 = _mm256_set1_epi32(1);
    __m256i odd = _mm256_mask_sub_epi32(f_bits, f_away, f_bits, one32);
    odd = _mm256_mask_or_epi32(odd, f_inexact, odd, one32);
    const __m256i u = _mm256_and_si256(odd, magnitude_mask);
    const __m256i rounded = _mm256_and_si256(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x0fff)),
                         _mm256_and_si256(_mm256_srli_epi32(u, 13), one32)),
        _mm256_set1_epi32(~0x1fff));
    domain = static_cast<__mmask8>(domain & (ro_zero | (_mm256_cmpgt_epu32_mask(u, _mm256_set1_epi32(0x38800000)) &
                                                        _mm256_cmple_epu32_mask(rounded, _mm256_set1_epi32(0x477fe000)))));
    const __m256i h = _mm256_or_si256(rounded, _mm256_andnot_si256(magnitude_mask, odd));
    value = _mm512_cvtps_pd(_mm256_castsi256_ps(h));
    inexact_out = inexact | f_inexact | _mm256_cmpneq_epi32_mask(rounded, u);
  }
  return domain;
}

// Round: lanes[i] = round_value(lanes[i]) instead (terms unused): x + (-0)
// is x for every x, -0 included, so the sum's rounding is x's rounding, and
// -0 is no addend (addends and swamped stay untouched, as round_value's counts).
template <bool Binary16, bool Count, bool Round>
MPVERIFY_TARGET std::size_t lanes_kernel(const formats::Format& format, NativeFormat native, double* lanes,
                                         const double* terms, std::size_t n, Counters* counters) {
  LaneCounts c;
  const __m512d zero = _mm512_setzero_pd();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d s = _mm512_loadu_pd(lanes + i);
    const __m512d t = Round ? _mm512_set1_pd(-0.0) : _mm512_loadu_pd(terms + i);
    __m512d value;
    __mmask8 inexact;
    if (step<Binary16>(s, t, value, inexact) != 0xff) [[unlikely]] {
      for (std::size_t j = i; j < i + 8; ++j)
        lanes[j] = Round ? round_value(format, lanes[j], counters)
                         : add_in_format(format, native, lanes[j], terms[j], counters);
      continue;
    }
    if constexpr (Count) {
      // count_update (counters.h) on masks: every lane here is finite, so an update is t != 0,
      // and a lost one leaves a non-zero s unchanged.
      const __mmask8 addend = _mm512_cmp_pd_mask(t, zero, _CMP_NEQ_OQ);
      const __mmask8 lost_candidates = addend & _mm512_cmp_pd_mask(s, zero, _CMP_NEQ_OQ);
      c.elements += 8;
      c.zeros += count(_mm512_cmp_pd_mask(_mm512_add_pd(s, t), zero, _CMP_EQ_OQ));
      c.inexact += count(inexact);
      c.addends += count(addend);
      c.swamped += count(_mm512_mask_cmp_pd_mask(lost_candidates, value, s, _CMP_EQ_OQ));
    }
    _mm512_storeu_pd(lanes + i, value);
  }
  if constexpr (Count) {
    counters->elements += c.elements;
    counters->zeros_in += c.zeros;
    counters->inexact += c.inexact;
    counters->addends_nonzero += c.addends;
    counters->swamped += c.swamped;
  }
  return i;
}

bool cpu_has_avx512_lanes() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("popcnt");
}

template <bool Round>
std::size_t dispatch(const formats::Format& format, NativeFormat native, double* lanes, const double* terms,
                     std::size_t n, Counters* counters) {
  static const bool available = cpu_has_avx512_lanes();
  if (!available || native == NativeFormat::none) return 0;
  const bool binary16 = native == NativeFormat::binary16;
  if (counters)
    return binary16 ? lanes_kernel<true, true, Round>(format, native, lanes, terms, n, counters)
                    : lanes_kernel<false, true, Round>(format, native, lanes, terms, n, counters);
  return binary16 ? lanes_kernel<true, false, Round>(format, native, lanes, terms, n, counters)
                  : lanes_kernel<false, false, Round>(format, native, lanes, terms, n, counters);
}

}  // namespace

std::size_t add_lanes_avx512(const formats::Format& format, NativeFormat native, double* lanes, const double* terms,
                             std::size_t n, Counters* counters) {
  return dispatch<false>(format, native, lanes, terms, n, counters);
}

std::size_t round_lanes_avx512(const formats::Format& format, NativeFormat native, double* values, std::size_t n,
                               Counters* counters) {
  return dispatch<true>(format, native, values, nullptr, n, counters);
}

}  // namespace mpverify::emu::detail

#else  // not x86-64 with GCC/Clang: the portable loop does everything

namespace mpverify::emu::detail {
std::size_t add_lanes_avx512(const formats::Format&, NativeFormat, double*, const double*, std::size_t, Counters*) {
  return 0;
}
std::size_t round_lanes_avx512(const formats::Format&, NativeFormat, double*, std::size_t, Counters*) { return 0; }
}  // namespace mpverify::emu::detail

#endif
