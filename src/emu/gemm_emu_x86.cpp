// The accumulation kernels of the emulated GEMM on AVX-512.
//
// Both keep a tile of C in registers for the whole k loop (4 rows x 32
// columns for fp32, 2 x 32 for fp16), so each element is still accumulated
// in k order, one rounding per step, exactly as the portable loops do: the
// tiling changes where the accumulators live, not the arithmetic.
//
// fp16 accumulation, acc = fl16(a*b + acc): the fp16 rounding of x = a*b + c
// equals the fp16 rounding of x first rounded to float *to odd* (float keeps
// 24 >= 11 + 2 bits; Boldo and Melquiond, "Emulation of FMA and correctly
// rounded sums: proved algorithms using rounding to odd", 2008). Round-to-odd
// comes from two FMAs with embedded rounding: rd = RD(x), ru = RU(x); x is
// exact iff rd == ru; RO(x) = RZ(x) with its last bit set when inexact.
// Products of fp16 values are exact in float and every such x is 0 or at
// least 2^-48, far above float's subnormals, so nothing else rounds.
// Counts mirror accumulate_fp16 in gemm_emu.cpp exactly (a test compares).
#include "emu/gemm_emu_simd.h"
#include "emu/quantize_simd.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers

namespace mpverify::emu::detail {

namespace {

// One counter per lane per field, summed once at the end.
struct LaneCounts {
  __m512i zeros, nonfinite, inexact, underflow, to_zero, subnormal, overflow, nan_created, addends, swamped;
};

__attribute__((target("avx512f"))) inline void clear(LaneCounts& c) {
  const __m512i z = _mm512_setzero_si512();
  c = {z, z, z, z, z, z, z, z, z, z};
}

__attribute__((target("avx512f"))) inline void bump(__m512i& counter, __mmask16 m) {
  counter = _mm512_mask_add_epi32(counter, m, counter, _mm512_set1_epi32(1));
}

// acc <- fl16(a*b + acc) for 16 lanes; counts when Count.
template <bool Count>
__attribute__((target("avx512f"))) inline __m512 fp16_step(__m512 va, __m512 vb, __m512 vc, LaneCounts& n) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512 rd = _mm512_fmadd_round_ps(va, vb, vc, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __m512 ru = _mm512_fmadd_round_ps(va, vb, vc, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
  const __mmask16 inexact_float = _mm512_cmp_ps_mask(rd, ru, _CMP_NEQ_OQ);
  // Toward zero: rd for inexact positive x, ru otherwise. An exact x takes ru
  // because an exact zero sum is -0 when rounding down but +0 in RNE, and
  // rounding up agrees with RNE there.
  const __mmask16 positive_inexact = inexact_float & _mm512_cmp_ps_mask(rd, zero, _CMP_GE_OQ);
  const __m512 rz = _mm512_mask_blend_ps(positive_inexact, ru, rd);
  const __m512 odd = _mm512_castsi512_ps(
      _mm512_mask_or_epi32(_mm512_castps_si512(rz), inexact_float, _mm512_castps_si512(rz), _mm512_set1_epi32(1)));
  const __m512 result = _mm512_cvtph_ps(_mm512_cvtps_ph(odd, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  if constexpr (Count) {
    const __m512 infinity = _mm512_set1_ps(__builtin_inff());
    const __mmask16 inexact = inexact_float | _mm512_cmp_ps_mask(result, odd, _CMP_NEQ_OQ);
    bump(n.inexact, inexact);
    // Swamping: a*b != 0 (exact in float), a*b and c finite, and the result is c.
    const __m512 product = _mm512_mul_ps(va, vb);
    const __mmask16 addend = _mm512_cmp_ps_mask(product, zero, _CMP_NEQ_OQ) &
                             _mm512_cmp_ps_mask(_mm512_abs_ps(product), infinity, _CMP_LT_OQ) &
                             _mm512_cmp_ps_mask(_mm512_abs_ps(vc), infinity, _CMP_LT_OQ);
    bump(n.addends, addend);
    bump(n.swamped, _mm512_mask_cmp_ps_mask(addend, result, vc, _CMP_EQ_OQ));
    // Every other count needs x or the result outside [2^-14, 65504] or a
    // NaN (zeros, tiny, subnormal, overflow, non-finite): one range test per
    // vector, and the full classification only when a lane is out of range.
    const __m512 ar = _mm512_abs_ps(result);
    const __m512 ax = _mm512_abs_ps(rd);  // classifies x like the exact value
    const __mmask16 in_range = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(kFp16MinNormal), _CMP_GE_OQ) &
                               _mm512_cmp_ps_mask(ar, _mm512_set1_ps(kFp16MinNormal), _CMP_GE_OQ) &
                               _mm512_cmp_ps_mask(ar, _mm512_set1_ps(kFp16MaxFinite), _CMP_LE_OQ);
    if (in_range != 0xffff) {
      const __mmask16 finite = _mm512_cmp_ps_mask(ax, infinity, _CMP_LT_OQ);
      const __mmask16 x_zero = _mm512_cmp_ps_mask(rd, zero, _CMP_EQ_OQ) & _mm512_cmp_ps_mask(ru, zero, _CMP_EQ_OQ);
      bump(n.zeros, x_zero);
      bump(n.nonfinite, static_cast<__mmask16>(~finite));
      // tininess after rounding (quantize_simd.h); odd lies on the same side of the bound as x
      bump(n.underflow, _mm512_mask_cmp_ps_mask(inexact, _mm512_abs_ps(odd), _mm512_set1_ps(kFp16TinyAfterRounding), _CMP_LT_OQ));
      bump(n.to_zero, _mm512_mask_cmp_ps_mask(finite & static_cast<__mmask16>(~x_zero), result, zero, _CMP_EQ_OQ));
      bump(n.subnormal, _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(ar, zero, _CMP_NEQ_OQ), ar, _mm512_set1_ps(kFp16MinNormal), _CMP_LT_OQ));
      bump(n.overflow, _mm512_mask_cmp_ps_mask(finite, ar, infinity, _CMP_EQ_OQ));
      bump(n.nan_created, _mm512_cmp_ps_mask(rd, rd, _CMP_ORD_Q) & _mm512_cmp_ps_mask(result, result, _CMP_UNORD_Q));
    }
  }
  return result;
}

__attribute__((target("avx512f"))) inline std::uint64_t sum(__m512i v) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(_mm512_reduce_add_epi32(v)));
}

__attribute__((target("avx512f"))) void add_lanes(const LaneCounts& n, std::uint64_t elements, Counters& c) {
  c.elements += elements;
  c.zeros_in += sum(n.zeros);
  c.nonfinite_in += sum(n.nonfinite);
  c.inexact += sum(n.inexact);
  c.underflow += sum(n.underflow);
  c.underflow_to_zero += sum(n.to_zero);
  c.subnormal += sum(n.subnormal);
  c.overflow += sum(n.overflow);
  c.nan_created += sum(n.nan_created);
  c.addends_nonzero += sum(n.addends);
  c.swamped += sum(n.swamped);
}

// Tiles of R rows x 32 columns over [0, m) x [0, n_whole): accumulators in
// registers for the whole k loop. Lane counters are flushed per tile; a tile
// adds at most 2R * k to a lane, so the caller keeps k < 2^28.
template <bool Count, int R>
__attribute__((target("avx512f"))) void fp16_tiles(const float* A, const float* B, float* acc, int m, int n_whole,
                                                   int n, int k, int row_begin, Counters* counters) {
  for (int i0 = row_begin; i0 + R <= m; i0 += R)
    for (int j0 = 0; j0 < n_whole; j0 += 32) {
      LaneCounts lanes;
      clear(lanes);
      __m512 c[R][2];
      for (int r = 0; r < R; ++r) c[r][0] = c[r][1] = _mm512_setzero_ps();
      for (int kk = 0; kk < k; ++kk) {
        const __m512 b0 = _mm512_loadu_ps(B + static_cast<std::size_t>(kk) * n + j0);
        const __m512 b1 = _mm512_loadu_ps(B + static_cast<std::size_t>(kk) * n + j0 + 16);
        for (int r = 0; r < R; ++r) {
          const __m512 a = _mm512_set1_ps(A[static_cast<std::size_t>(i0 + r) * k + kk]);
          c[r][0] = fp16_step<Count>(a, b0, c[r][0], lanes);
          c[r][1] = fp16_step<Count>(a, b1, c[r][1], lanes);
        }
      }
      for (int r = 0; r < R; ++r) {
        _mm512_storeu_ps(acc + static_cast<std::size_t>(i0 + r) * n + j0, c[r][0]);
        _mm512_storeu_ps(acc + static_cast<std::size_t>(i0 + r) * n + j0 + 16, c[r][1]);
      }
      if constexpr (Count) add_lanes(lanes, static_cast<std::uint64_t>(R) * 32 * static_cast<std::uint64_t>(k), *counters);
    }
}

template <int R>
__attribute__((target("avx512f"))) void fp32_tiles(const float* A, const float* B, float* acc, int m, int n_whole,
                                                   int n, int k) {
  for (int i0 = 0; i0 + R <= m; i0 += R)
    for (int j0 = 0; j0 < n_whole; j0 += 32) {
      __m512 c[R][2];
      for (int r = 0; r < R; ++r) c[r][0] = c[r][1] = _mm512_setzero_ps();
      for (int kk = 0; kk < k; ++kk) {
        const __m512 b0 = _mm512_loadu_ps(B + static_cast<std::size_t>(kk) * n + j0);
        const __m512 b1 = _mm512_loadu_ps(B + static_cast<std::size_t>(kk) * n + j0 + 16);
        for (int r = 0; r < R; ++r) {
          const __m512 a = _mm512_set1_ps(A[static_cast<std::size_t>(i0 + r) * k + kk]);
          c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);  // one rounding per step: an fp32 FMA
          c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
        }
      }
      for (int r = 0; r < R; ++r) {
        _mm512_storeu_ps(acc + static_cast<std::size_t>(i0 + r) * n + j0, c[r][0]);
        _mm512_storeu_ps(acc + static_cast<std::size_t>(i0 + r) * n + j0 + 16, c[r][1]);
      }
    }
}

}  // namespace

TileCover fp16_accumulate_tiles_avx512(const float* A, const float* B, float* acc, int m, int n, int k,
                                       Counters* counters) {
  constexpr int R = 2;  // 4 spills registers (measured: slower)
  const int n_whole = n - n % 32, m_whole = m - m % R;
  if (counters) fp16_tiles<true, R>(A, B, acc, m, n_whole, n, k, 0, counters);
  else fp16_tiles<false, R>(A, B, acc, m, n_whole, n, k, 0, counters);
  return {m_whole, n_whole};
}

TileCover fp32_accumulate_tiles_avx512(const float* A, const float* B, float* acc, int m, int n, int k) {
  constexpr int R = 4;
  const int n_whole = n - n % 32, m_whole = m - m % R;
  fp32_tiles<R>(A, B, acc, m, n_whole, n, k);
  return {m_whole, n_whole};
}

}  // namespace mpverify::emu::detail

#else
namespace mpverify::emu::detail {
TileCover fp16_accumulate_tiles_avx512(const float*, const float*, float*, int, int, int, Counters*) { return {0, 0}; }
TileCover fp32_accumulate_tiles_avx512(const float*, const float*, float*, int, int, int) { return {0, 0}; }
}  // namespace mpverify::emu::detail
#endif
