// The vector kernel of mma_gemm (mma_gemm_simd.h) on AVX-512: 4 rows x 16 columns of C at a time, each lane
// one output element's chain of fused operations (mma_model.h), in float and int32 lanes.
//
// Why float lanes give the scalar model's bits exactly, under the conditions mma_gemm.cpp checks first
// (operand precisions summing to at most 24; products and aligned terms normal floats or at least 2^-149;
// F + 2 <= 29 and half a fused operation's terms fitting an int32):
//   - a product a*b is exact in float, and so is x = a*b * 2^(F - E) (scalef: a power of two); x is the
//     scalar model's s_a s_b 2^(F + e_a + e_b - E) since a value is its significand times 2^(its exponent),
//     subnormals included;
//   - truncating x toward zero (cvtt) is the alignment: |x| < 2^(F + 2) fits an int32, and trunc(x) keeps a
//     prefix of x's bits, so it converts back to float exactly: the term lost bits iff that differs from x;
//   - the terms go to two int32 sums (c and the even products, the odd products), each below 2^31, and
//     their sum times 2^(E - F) is exact in double; rounding that double toward zero to float is the fp32
//     output, and clearing the low 10 bits of it the E8M13 output (truncations compose); the fp16 output is
//     the double rounded to odd in float (toward zero, the last bit set when inexact), then to fp16 to
//     nearest-even: float keeps 24 >= 11 + 2 bits and the value is a normal float (Boldo and Melquiond 2008);
//   - the c term x = c * 2^(F - E) may underflow (c far below the products): it then truncates to 0 and has
//     lost its bits, which the kernel says so even when x underflowed to 0 itself.
// A lane whose result overflows is dropped (its element goes to the scalar model, which owns inf and NaN).
// Zero products are counted by mma_gemm from the operands' zero patterns, not here: this kernel counts the
// products that align to zero, zeros included, and the caller subtracts the zero products.
#include "emu/mma_gemm_simd.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdint>

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mpverify::emu::detail {

namespace {

#define MMA_TARGET __attribute__((target("avx512f")))

constexpr int R = kMmaRows;

// Per-lane counts of one row of a tile: at most depth terms per lane (mma_gemm.cpp keeps depth < 2^26).
struct LaneCounts {
  __m512i c_terms, c_truncated, c_shifted_out, truncated, aligned_to_zero, inexact;
};

MMA_TARGET inline __m512i bump(__m512i counter, __mmask16 lanes) {
  return _mm512_mask_sub_epi32(counter, lanes, counter, _mm512_set1_epi32(-1));
}

// c's exponent in the model: its float's exponent, at least the accumulator's minimum normal exponent
// (fp32's field 0 gives -127 there), and -126 for a zero.
MMA_TARGET inline __m512i c_exponent(__m512 c, int c_emin) {
  const __m512i field = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(c), 23), _mm512_set1_epi32(0xFF));
  const __m512i e = _mm512_max_epi32(_mm512_sub_epi32(field, _mm512_set1_epi32(127)), _mm512_set1_epi32(c_emin));
  return _mm512_mask_mov_epi32(e, _mm512_cmp_ps_mask(c, _mm512_setzero_ps(), _CMP_EQ_OQ), _mm512_set1_epi32(-126));
}

MMA_TARGET inline __m256 high_half(__m512 x) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
}

// The lanes where float f differs from the double value (lo: lanes 0..7, hi: 8..15).
MMA_TARGET inline __mmask16 differs(__m512 f, __m512d lo, __m512d hi) {
  const unsigned l = _mm512_cmp_pd_mask(_mm512_cvtps_pd(_mm512_castps512_ps256(f)), lo, _CMP_NEQ_UQ);
  const unsigned h = _mm512_cmp_pd_mask(_mm512_cvtps_pd(high_half(f)), hi, _CMP_NEQ_UQ);
  return static_cast<__mmask16>(l | (h << 8));
}

struct Rounded {
  __m512 d;
  __mmask16 inexact, infinite;
};

// The exact result (lo, hi) rounded once to the output; an exact or underflowed zero is +0.
MMA_TARGET inline Rounded round_output(__m512d lo, __m512d hi, MmaOutput output) {
  const __m256 zlo = _mm512_cvt_roundpd_ps(lo, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 zhi = _mm512_cvt_roundpd_ps(hi, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  __m512 f = _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(zlo)), _mm256_castps_pd(zhi), 1));
  Rounded r{};
  if (output == MmaOutput::fp16_nearest_even) {
    const __mmask16 inexact = differs(f, lo, hi);
    const __m512i bits = _mm512_castps_si512(f);
    const __m512 odd = _mm512_castsi512_ps(_mm512_mask_or_epi32(bits, inexact, bits, _mm512_set1_epi32(1)));
    f = _mm512_cvtph_ps(_mm512_cvtps_ph(odd, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    r.inexact = inexact | _mm512_cmp_ps_mask(f, odd, _CMP_NEQ_UQ);
    r.infinite = _mm512_cmp_ps_mask(_mm512_abs_ps(f), _mm512_set1_ps(__builtin_inff()), _CMP_EQ_OQ);
  } else {
    if (output == MmaOutput::e8m13_toward_zero)
      f = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(f), _mm512_set1_epi32(~0x3FF)));
    r.inexact = differs(f, lo, hi);
    const __m512d overflow = _mm512_set1_pd(0x1p128);  // toward zero: 2^128 and above is infinite
    const unsigned l = _mm512_cmp_pd_mask(_mm512_abs_pd(lo), overflow, _CMP_GE_OQ);
    const unsigned h = _mm512_cmp_pd_mask(_mm512_abs_pd(hi), overflow, _CMP_GE_OQ);
    r.infinite = static_cast<__mmask16>(l | (h << 8));
  }
  r.d = _mm512_mask_mov_ps(f, _mm512_cmp_ps_mask(f, _mm512_setzero_ps(), _CMP_EQ_OQ), _mm512_setzero_ps());
  return r;
}

// (sum0 + sum1) * 2^scale, exact in double, as two halves.
MMA_TARGET inline void exact_value(__m512i sum0, __m512i sum1, __m512i scale, __m512d& lo, __m512d& hi) {
  const __m512d s_lo = _mm512_cvtepi32_pd(_mm512_castsi512_si256(scale));
  const __m512d s_hi = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(scale, 1));
  lo = _mm512_scalef_pd(_mm512_add_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(sum0)),
                                      _mm512_cvtepi32_pd(_mm512_castsi512_si256(sum1))), s_lo);
  hi = _mm512_scalef_pd(_mm512_add_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(sum0, 1)),
                                      _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(sum1, 1))), s_hi);
}

// One product per row, aligned and added to sum; what it lost counted.
MMA_TARGET inline void add_products(__m512 b, const float* a, int depth, const __m512 scale[R], __m512i sum[R],
                                    __m512i truncated[R], __m512i aligned_to_zero[R]) {
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const __m512 x = _mm512_scalef_ps(_mm512_mul_ps(b, _mm512_set1_ps(a[r * depth])), scale[r]);
    const __m512i t = _mm512_cvttps_epi32(x);
    sum[r] = _mm512_add_epi32(sum[r], t);
    truncated[r] = bump(truncated[r], _mm512_cmp_ps_mask(_mm512_cvtepi32_ps(t), x, _CMP_NEQ_UQ));
    aligned_to_zero[r] = bump(aligned_to_zero[r], _mm512_cmpeq_epi32_mask(t, _mm512_setzero_si512()));
  }
}

// The largest exponent E of each row's terms over products [k0, k1) and c.
MMA_TARGET inline void largest_exponents(const MmaPanels& p, int row, int column, int k0, int k1, int c_emin,
                                         const __m512 c[R], __m512i E[R]) {
  const std::int32_t* ae = &p.a_exponent[static_cast<std::size_t>(row) * p.depth];
  for (int r = 0; r < R; ++r) E[r] = c_exponent(c[r], c_emin);
  for (int kk = k0; kk < k1; ++kk) {
    const __m512i eb = _mm512_loadu_si512(&p.b_exponent[p.b_at(kk, column)]);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      E[r] = _mm512_max_epi32(E[r], _mm512_add_epi32(eb, _mm512_set1_epi32(ae[static_cast<std::size_t>(r) * p.depth + kk])));
  }
}

// One fused operation over products [k0, k1) for every row: c <- the rounded c + sum of products.
MMA_TARGET void fused_operation(const MmaPanels& p, const MmaKernelModel& m, int row, int column, int k0, int k1,
                                __m512 c[R], __mmask16 infinite[R], LaneCounts n[R]) {
  __m512i E[R];
  largest_exponents(p, row, column, k0, k1, m.c_emin, c, E);
  const __m512i F = _mm512_set1_epi32(m.fraction_bits), zero = _mm512_setzero_si512();
  __m512 scale[R];
  __m512i sum0[R], sum1[R], truncated[R], aligned_to_zero[R];
  for (int r = 0; r < R; ++r) {
    scale[r] = _mm512_cvtepi32_ps(_mm512_sub_epi32(F, E[r]));
    const __m512 x = _mm512_scalef_ps(c[r], scale[r]);
    const __m512i t = _mm512_cvttps_epi32(x);
    const __mmask16 nonzero = _mm512_cmp_ps_mask(c[r], _mm512_setzero_ps(), _CMP_NEQ_UQ);
    const __mmask16 t_zero = _mm512_cmpeq_epi32_mask(t, zero);
    const __mmask16 lost = _mm512_cmp_ps_mask(_mm512_cvtepi32_ps(t), x, _CMP_NEQ_UQ) |
                           _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ);  // x underflowed to 0
    n[r].c_terms = bump(n[r].c_terms, nonzero);
    n[r].c_truncated = bump(n[r].c_truncated, nonzero & lost);
    n[r].c_shifted_out = bump(n[r].c_shifted_out, nonzero & t_zero);
    sum0[r] = t;
    sum1[r] = truncated[r] = aligned_to_zero[r] = zero;
  }
  const float* a = &p.a_value[static_cast<std::size_t>(row) * p.depth];
  const float* b = &p.b_value[p.b_at(0, column)];
  const std::size_t stride = kMmaLanes;
  int kk = k0;
  for (; kk + 1 < k1; kk += 2) {  // two sums, each below 2^31 (mma_gemm.cpp checks)
    add_products(_mm512_loadu_ps(b + kk * stride), a + kk, p.depth, scale, sum0, truncated, aligned_to_zero);
    add_products(_mm512_loadu_ps(b + (kk + 1) * stride), a + kk + 1, p.depth, scale, sum1, truncated,
                 aligned_to_zero);
  }
  if (kk < k1) add_products(_mm512_loadu_ps(b + kk * stride), a + kk, p.depth, scale, sum0, truncated, aligned_to_zero);
  for (int r = 0; r < R; ++r) {
    __m512d lo, hi;
    exact_value(sum0[r], sum1[r], _mm512_sub_epi32(E[r], F), lo, hi);
    const Rounded d = round_output(lo, hi, m.output);
    c[r] = d.d;
    infinite[r] |= d.infinite;
    n[r].inexact = bump(n[r].inexact, d.inexact);
    n[r].truncated = _mm512_add_epi32(n[r].truncated, truncated[r]);
    n[r].aligned_to_zero = _mm512_add_epi32(n[r].aligned_to_zero, aligned_to_zero[r]);
  }
}

MMA_TARGET inline std::uint64_t total(__mmask16 lanes, __m512i v) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(_mm512_mask_reduce_add_epi32(lanes, v)));
}

}  // namespace

bool cpu_has_avx512_mma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

MMA_TARGET void mma_tile_avx512(const MmaPanels& p, const MmaKernelModel& m, int row, int tile, float* d,
                                std::uint16_t* keep, MmaKernelCounts& counts) {
  const int tiles = p.columns / kMmaLanes, column = tile * kMmaLanes;
  __m512 c[R];
  __mmask16 infinite[R];
  LaneCounts n[R];
  for (int r = 0; r < R; ++r) {
    c[r] = _mm512_setzero_ps();
    infinite[r] = 0;
    const __m512i z = _mm512_setzero_si512();
    n[r] = {z, z, z, z, z, z};
  }
  for (int k0 = 0; k0 < p.depth; k0 += m.fused_k) fused_operation(p, m, row, column, k0, k0 + m.fused_k, c, infinite, n);
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(d + static_cast<std::size_t>(row + r) * p.columns + column, c[r]);
    std::uint16_t& kept = keep[static_cast<std::size_t>(row + r) * tiles + tile];
    kept = static_cast<std::uint16_t>(kept & ~infinite[r]);
    counts.c_terms += total(kept, n[r].c_terms);
    counts.c_truncated += total(kept, n[r].c_truncated);
    counts.c_shifted_out += total(kept, n[r].c_shifted_out);
    counts.products_truncated += total(kept, n[r].truncated);
    counts.products_aligned_to_zero += total(kept, n[r].aligned_to_zero);
    counts.inexact += total(kept, n[r].inexact);
  }
}

}  // namespace mpverify::emu::detail

#else

namespace mpverify::emu::detail {
bool cpu_has_avx512_mma() { return false; }
void mma_tile_avx512(const MmaPanels&, const MmaKernelModel&, int, int, float*, std::uint16_t*, MmaKernelCounts&) {}
}  // namespace mpverify::emu::detail

#endif
