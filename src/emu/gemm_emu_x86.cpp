// The fp16-accumulation step of the emulated GEMM on AVX-512, 16 outputs at
// a time: acc[j] = fl16(a * b[j] + acc[j]), one fp16 rounding per step.
//
// Why it is exact: the fp16 result of rounding x = a*b + c equals the fp16
// rounding of x first rounded to float *to odd* (float keeps 24 >= 11 + 2
// bits; Boldo and Melquiond, "Emulation of FMA and correctly rounded sums:
// proved algorithms using rounding to odd", 2008). Round-to-odd comes from
// two FMAs with embedded rounding: rd = RD(x), ru = RU(x); x is exact iff
// rd == ru; RO(x) = RZ(x) with its last bit set when inexact. Products of
// fp16 values are exact in float and every such x is either 0 or at least
// 2^-48, far above float's subnormals, so nothing else rounds.
// Counts mirror accumulate_fp16 in gemm_emu.cpp exactly (a test compares).
#include "emu/gemm_emu_simd.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers

namespace mpverify::emu::detail {

bool cpu_has_avx512_fp16_accumulate() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

__attribute__((target("avx512f,popcnt"))) int fp16_accumulate_row_avx512(float a, const float* b, float* acc, int n,
                                                                          Counters* counters) {
  const int whole = n - n % 16;
  const __m512 va = _mm512_set1_ps(a);
  const __m512 zero = _mm512_setzero_ps();
  const __m512 infinity = _mm512_set1_ps(__builtin_inff());
  const __m512 tiny = _mm512_set1_ps(0x1p-14f - 0x1p-26f);  // see quantize_x86.cpp
  const __m512 min_normal = _mm512_set1_ps(0x1p-14f);
  const __m512i one = _mm512_set1_epi32(1);
  std::uint64_t inexact_n = 0, underflow_n = 0, to_zero_n = 0, subnormal_n = 0, overflow_n = 0, zeros_n = 0,
                nonfinite_n = 0, nan_created_n = 0, addends_n = 0, swamped_n = 0;
  auto count = [](__mmask16 m) { return static_cast<std::uint64_t>(__builtin_popcount(m)); };
  for (int j = 0; j < whole; j += 16) {
    const __m512 vb = _mm512_loadu_ps(b + j);
    const __m512 vc = _mm512_loadu_ps(acc + j);
    const __m512 rd = _mm512_fmadd_round_ps(va, vb, vc, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512 ru = _mm512_fmadd_round_ps(va, vb, vc, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
    const __mmask16 inexact_float = _mm512_cmp_ps_mask(rd, ru, _CMP_NEQ_OQ);
    // Toward zero: rd for inexact positive x, ru otherwise. An exact x takes
    // ru because an exact zero sum is -0 when rounding down but +0 in RNE,
    // and rounding up agrees with RNE there.
    const __mmask16 positive_inexact = inexact_float & _mm512_cmp_ps_mask(rd, zero, _CMP_GE_OQ);
    const __m512 rz = _mm512_mask_blend_ps(positive_inexact, ru, rd);
    const __m512 odd = _mm512_castsi512_ps(
        _mm512_mask_or_epi32(_mm512_castps_si512(rz), inexact_float, _mm512_castps_si512(rz), one));
    const __m256i h = _mm512_cvtps_ph(odd, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 result = _mm512_cvtph_ps(h);
    _mm512_storeu_ps(acc + j, result);
    if (counters) {
      const __m512 ax = _mm512_abs_ps(rd);  // classifies x like the exact value
      const __m512 ar = _mm512_abs_ps(result);
      const __mmask16 finite = _mm512_cmp_ps_mask(ax, infinity, _CMP_LT_OQ);
      const __mmask16 x_nan = _mm512_cmp_ps_mask(rd, rd, _CMP_UNORD_Q);
      const __mmask16 inexact = inexact_float | _mm512_cmp_ps_mask(result, odd, _CMP_NEQ_OQ);
      zeros_n += count(_mm512_cmp_ps_mask(rd, zero, _CMP_EQ_OQ) & _mm512_cmp_ps_mask(ru, zero, _CMP_EQ_OQ));
      nonfinite_n += count(static_cast<__mmask16>(~finite));
      inexact_n += count(inexact);
      underflow_n += count(_mm512_mask_cmp_ps_mask(inexact, _mm512_abs_ps(odd), tiny, _CMP_LT_OQ));
      const __mmask16 x_nonzero = static_cast<__mmask16>(~(_mm512_cmp_ps_mask(rd, zero, _CMP_EQ_OQ) &
                                                           _mm512_cmp_ps_mask(ru, zero, _CMP_EQ_OQ)));
      to_zero_n += count(finite & x_nonzero & _mm512_cmp_ps_mask(result, zero, _CMP_EQ_OQ));
      subnormal_n += count(_mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(ar, zero, _CMP_NEQ_OQ), ar, min_normal, _CMP_LT_OQ));
      overflow_n += count(_mm512_mask_cmp_ps_mask(finite, ar, infinity, _CMP_EQ_OQ));
      nan_created_n += count(static_cast<__mmask16>(~x_nan) & _mm512_cmp_ps_mask(result, result, _CMP_UNORD_Q));
      // Swamping: a*b != 0 (exact in float), a*b and c finite, and the result is c.
      const __m512 product = _mm512_mul_ps(va, vb);
      const __mmask16 addend = _mm512_cmp_ps_mask(product, zero, _CMP_NEQ_OQ) &
                               _mm512_cmp_ps_mask(_mm512_abs_ps(product), infinity, _CMP_LT_OQ) &
                               _mm512_cmp_ps_mask(_mm512_abs_ps(vc), infinity, _CMP_LT_OQ);
      addends_n += count(addend);
      swamped_n += count(_mm512_mask_cmp_ps_mask(addend, result, vc, _CMP_EQ_OQ));
    }
  }
  if (counters) {
    counters->elements += static_cast<std::uint64_t>(whole);
    counters->zeros_in += zeros_n;
    counters->nonfinite_in += nonfinite_n;
    counters->inexact += inexact_n;
    counters->underflow += underflow_n;
    counters->underflow_to_zero += to_zero_n;
    counters->subnormal += subnormal_n;
    counters->overflow += overflow_n;
    counters->nan_created += nan_created_n;
    counters->addends_nonzero += addends_n;
    counters->swamped += swamped_n;
  }
  return whole;
}

}  // namespace mpverify::emu::detail

#else
namespace mpverify::emu::detail {
bool cpu_has_avx512_fp16_accumulate() { return false; }
int fp16_accumulate_row_avx512(float, const float*, float*, int, Counters*) { return 0; }
}  // namespace mpverify::emu::detail
#endif
