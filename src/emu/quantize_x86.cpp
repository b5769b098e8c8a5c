// fp16 round-to-nearest-even on the F16C conversion instruction, with the
// counters of counters.h computed from masks. Compiled with per-function
// target attributes, so the library still runs on CPUs without these units
// (select_path checks at run time).
#include "emu/cpu_features.h"
#include "emu/quantize_simd.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

// GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized (they start from
// _mm256_undefined_*); the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace mpverify::emu::detail {

namespace {

struct Tally {
  std::uint64_t zeros_in = 0, nonfinite_in = 0, inexact = 0, underflow = 0, underflow_to_zero = 0, subnormal = 0,
                overflow = 0;
  void add_to(Counters& c, std::size_t n) const {
    c.elements += n;
    c.zeros_in += zeros_in;
    c.nonfinite_in += nonfinite_in;
    c.inexact += inexact;
    c.underflow += underflow;
    c.underflow_to_zero += underflow_to_zero;
    c.subnormal += subnormal;
    c.overflow += overflow;
    // fp16 from float never creates a NaN from a non-NaN: nan_created += 0.
  }
};
}  // namespace


bool cpu_has_avx2_f16c() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && cpu_has_f16c() && __builtin_cpu_supports("popcnt");
}

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

__attribute__((target("avx2,f16c,popcnt"))) static inline std::uint64_t count_lanes(__m256 mask) {
  return static_cast<std::uint64_t>(__builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(mask))));
}

template <bool Count>
__attribute__((target("avx2,f16c,popcnt"))) static std::size_t avx2_kernel(const float* in, std::size_t n,
                                                                            float* out_float,
                                                                            std::uint16_t* out_bits,
                                                                            Counters* counters) {
  const std::size_t whole = n - n % 8;
  Tally t;
  const __m256 sign_off = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 zero = _mm256_setzero_ps();
  const __m256 infinity = _mm256_set1_ps(__builtin_inff());
  for (std::size_t i = 0; i < whole; i += 8) {
    const __m256 x = _mm256_loadu_ps(in + i);
    const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
    const __m256 back = _mm256_cvtph_ps(h);
    if (out_bits) _mm_storeu_si128(reinterpret_cast<__m128i*>(out_bits + i), h);
    if (out_float) _mm256_storeu_ps(out_float + i, back);
    if constexpr (Count) {
      // count_lanes, not a lambda: a lambda does not inherit the target attribute, and clang refuses
      // to pass an __m256 by value to a function compiled without AVX.
      const __m256 ax = _mm256_and_ps(x, sign_off);
      const __m256 ab = _mm256_and_ps(back, sign_off);
      const __m256 finite = _mm256_cmp_ps(ax, infinity, _CMP_LT_OQ);  // false for NaN and inf
      const __m256 nonzero = _mm256_cmp_ps(ax, zero, _CMP_NEQ_OQ);
      const __m256 inexact = _mm256_cmp_ps(back, x, _CMP_NEQ_OQ);  // NaN compares equal here
      t.zeros_in += count_lanes(_mm256_cmp_ps(x, zero, _CMP_EQ_OQ));
      t.nonfinite_in += count_lanes(_mm256_cmp_ps(ax, infinity, _CMP_NLT_UQ));
      t.inexact += count_lanes(inexact);
      t.underflow += count_lanes(_mm256_and_ps(inexact, _mm256_cmp_ps(ax, _mm256_set1_ps(kFp16TinyAfterRounding), _CMP_LT_OQ)));
      t.underflow_to_zero += count_lanes(_mm256_and_ps(_mm256_and_ps(finite, nonzero), _mm256_cmp_ps(back, zero, _CMP_EQ_OQ)));
      t.subnormal += count_lanes(_mm256_and_ps(_mm256_cmp_ps(ab, zero, _CMP_NEQ_OQ),
                                               _mm256_cmp_ps(ab, _mm256_set1_ps(kFp16MinNormal), _CMP_LT_OQ)));
      t.overflow += count_lanes(_mm256_and_ps(finite, _mm256_cmp_ps(ab, _mm256_set1_ps(kFp16MaxFinite), _CMP_GT_OQ)));
    }
  }
  if constexpr (Count) t.add_to(*counters, whole);
  return whole;
}

template <bool Count>
__attribute__((target("avx512f,popcnt"))) static std::size_t avx512_kernel(const float* in, std::size_t n,
                                                                            float* out_float,
                                                                            std::uint16_t* out_bits,
                                                                            Counters* counters) {
  const std::size_t whole = n - n % 16;
  Tally t;
  const __m512 zero = _mm512_setzero_ps();
  const __m512 infinity = _mm512_set1_ps(__builtin_inff());
  const __m512 tiny = _mm512_set1_ps(kFp16TinyAfterRounding);
  const __m512 min_normal = _mm512_set1_ps(kFp16MinNormal);
  const __m512 max_finite = _mm512_set1_ps(kFp16MaxFinite);
  for (std::size_t i = 0; i < whole; i += 16) {
    const __m512 x = _mm512_loadu_ps(in + i);
    const __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 back = _mm512_cvtph_ps(h);
    if (out_bits) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_bits + i), h);
    if (out_float) _mm512_storeu_ps(out_float + i, back);
    if constexpr (Count) {
      const auto count = [](__mmask16 m) { return static_cast<std::uint64_t>(__builtin_popcount(m)); };
      const __m512 ax = _mm512_abs_ps(x);
      const __m512 ab = _mm512_abs_ps(back);
      const __mmask16 finite = _mm512_cmp_ps_mask(ax, infinity, _CMP_LT_OQ);
      const __mmask16 nonzero = _mm512_cmp_ps_mask(ax, zero, _CMP_NEQ_OQ);
      const __mmask16 inexact = _mm512_cmp_ps_mask(back, x, _CMP_NEQ_OQ);
      t.zeros_in += count(_mm512_cmp_ps_mask(x, zero, _CMP_EQ_OQ));
      t.nonfinite_in += count(_mm512_cmp_ps_mask(ax, infinity, _CMP_NLT_UQ));
      t.inexact += count(inexact);
      t.underflow += count(_mm512_mask_cmp_ps_mask(inexact, ax, tiny, _CMP_LT_OQ));
      t.underflow_to_zero += count(_mm512_mask_cmp_ps_mask(finite & nonzero, back, zero, _CMP_EQ_OQ));
      t.subnormal += count(_mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(ab, zero, _CMP_NEQ_OQ), ab, min_normal, _CMP_LT_OQ));
      t.overflow += count(_mm512_mask_cmp_ps_mask(finite, ab, max_finite, _CMP_GT_OQ));
    }
  }
  if constexpr (Count) t.add_to(*counters, whole);
  return whole;
}

std::size_t fp16_rne_avx2(const float* in, std::size_t n, float* out_float, std::uint16_t* out_bits,
                          Counters* counters) {
  return counters ? avx2_kernel<true>(in, n, out_float, out_bits, counters)
                  : avx2_kernel<false>(in, n, out_float, out_bits, counters);
}

std::size_t fp16_rne_avx512(const float* in, std::size_t n, float* out_float, std::uint16_t* out_bits,
                            Counters* counters) {
  return counters ? avx512_kernel<true>(in, n, out_float, out_bits, counters)
                  : avx512_kernel<false>(in, n, out_float, out_bits, counters);
}

}  // namespace mpverify::emu::detail

#else  // not x86-64 with GCC/Clang: only the portable path exists

namespace mpverify::emu::detail {
bool cpu_has_avx2_f16c() { return false; }
bool cpu_has_avx512() { return false; }
std::size_t fp16_rne_avx2(const float*, std::size_t, float*, std::uint16_t*, Counters*) { return 0; }
std::size_t fp16_rne_avx512(const float*, std::size_t, float*, std::uint16_t*, Counters*) { return 0; }
}  // namespace mpverify::emu::detail

#endif
