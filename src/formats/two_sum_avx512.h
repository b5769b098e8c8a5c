// two_sum_error (two_sum.h) on eight lanes: the same six operations in the
// same order, so every lane equals the scalar definition bit for bit
// (tests/two_sum_test.cpp holds them together). Include only from code built
// for AVX-512 or marked with its target attribute.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace mpverify::formats {

__attribute__((target("avx512f"))) inline __m512d two_sum_error_avx512(__m512d a, __m512d b, __m512d s) {
  const __m512d b_virtual = _mm512_sub_pd(s, a);
  const __m512d a_virtual = _mm512_sub_pd(s, b_virtual);
  return _mm512_add_pd(_mm512_sub_pd(a, a_virtual), _mm512_sub_pd(b, b_virtual));
}

}  // namespace mpverify::formats

#endif
