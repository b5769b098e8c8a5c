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
// With promotion (fp32 output), the chain's result is added into an fp32 accumulator by an addition to
// nearest-even (embedded rounding, whatever MXCSR says) and the chain restarts at zero; kept lanes are
// finite, so the accumulator is never NaN (an overflow there gives the infinity mma_dot gives).
// The counts, cheaply: a product is truncated iff l16_a + l16_b < E - F (lowest-bit exponents, MmaPanels),
// tested in int16 lanes of two rows at once, like the largest exponent E; a product is shifted out only where
// the block's least value exponents allow it (MmaPanels::vmin), and only such blocks count them one by one.
// Zero products are counted by mma_gemm from the operands' zero patterns, not here.
#include "emu/mma_gemm_simd.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdint>

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mpverify::emu::detail {

namespace {

#define MMA_TARGET __attribute__((target("avx512f,avx512bw")))

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
    // Toward zero, 2^128 and above is infinite; such a value gives |f| >= 2^127, rare enough to test the
    // double only then.
    r.infinite = 0;
    if (_mm512_cmp_ps_mask(_mm512_abs_ps(f), _mm512_set1_ps(0x1p127f), _CMP_GE_OQ) != 0) {
      const __m512d overflow = _mm512_set1_pd(0x1p128);
      const unsigned l = _mm512_cmp_pd_mask(_mm512_abs_pd(lo), overflow, _CMP_GE_OQ);
      const unsigned h = _mm512_cmp_pd_mask(_mm512_abs_pd(hi), overflow, _CMP_GE_OQ);
      r.infinite = static_cast<__mmask16>(l | (h << 8));
    }
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

// The register state of a tile (4 rows x 16 columns) across its chain of fused operations.
struct TileState {
  __m512 c[R];               // each row's chain value (the last fused operation's result)
  __m512 accumulator[R];     // promotion: the fp32 accumulator
  __mmask16 infinite[R];     // lanes whose result overflowed
  LaneCounts n[R];
  __m512i truncated16[R / 2];  // products truncated, int16 lanes of a row pair (flushed into n)
  int pending = 0;             // products counted in truncated16 per lane since the last flush
};

MMA_TARGET inline __m512i broadcast_pair(const std::int16_t* at) {
  std::int32_t pair;
  __builtin_memcpy(&pair, at, sizeof pair);
  return _mm512_set1_epi32(pair);
}

// A row pair's int16 lanes (lane 2j + r: row r, column j) as two int32 vectors, signed.
MMA_TARGET inline __m512i low_row(__m512i pair) { return _mm512_srai_epi32(_mm512_slli_epi32(pair, 16), 16); }
MMA_TARGET inline __m512i high_row(__m512i pair) { return _mm512_srai_epi32(pair, 16); }
MMA_TARGET inline __m512i pack_rows(__m512i low, __m512i high) {
  return _mm512_or_si512(_mm512_and_si512(low, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(high, 16));
}

// The truncation counts of the int16 lanes added into the int32 counters (before they could overflow).
MMA_TARGET inline void flush_truncated(TileState& s) {
#pragma GCC unroll 2
  for (int q = 0; q < R / 2; ++q) {
    const __m512i t = s.truncated16[q];
    s.n[2 * q].truncated = _mm512_add_epi32(s.n[2 * q].truncated, _mm512_and_si512(t, _mm512_set1_epi32(0xFFFF)));
    s.n[2 * q + 1].truncated = _mm512_add_epi32(s.n[2 * q + 1].truncated, _mm512_srli_epi32(t, 16));
    s.truncated16[q] = _mm512_setzero_si512();
  }
  s.pending = 0;
}

// The largest exponent E of each row's terms over products [k0, k1) and c: the products' exponents in int16
// lanes of row pairs (one add and one max per two rows and 16 columns).
MMA_TARGET inline void largest_exponents(const MmaPanels& p, int row, int column, int k0, int k1, int c_emin,
                                         const __m512 c[R], __m512i E[R]) {
  const std::int16_t* ae = &p.a_e16[p.a16_at(row, 0)];
  const std::int16_t* be = &p.b_e16[2 * p.b_at(0, column)];
  const std::size_t pair_stride = 2 * static_cast<std::size_t>(p.depth);
  __m512i pair[R / 2];
  for (int q = 0; q < R / 2; ++q) pair[q] = _mm512_set1_epi16(-32768);
  for (int kk = k0; kk < k1; ++kk) {
    const __m512i eb = _mm512_loadu_si512(be + 2 * kMmaLanes * kk);
#pragma GCC unroll 2
    for (int q = 0; q < R / 2; ++q)
      pair[q] = _mm512_max_epi16(pair[q], _mm512_add_epi16(eb, broadcast_pair(ae + q * pair_stride + 2 * kk)));
  }
#pragma GCC unroll 2
  for (int q = 0; q < R / 2; ++q) {
    E[2 * q] = _mm512_max_epi32(low_row(pair[q]), c_exponent(c[2 * q], c_emin));
    E[2 * q + 1] = _mm512_max_epi32(high_row(pair[q]), c_exponent(c[2 * q + 1], c_emin));
  }
}

// Whether a product of [k0, k1) may be shifted out (aligned to zero) in some lane: only then are the
// kernel's products counted one by one (see MmaPanels::vmin).
MMA_TARGET inline bool may_shift_out(const MmaPanels& p, int row, int tile, int block, const __m512i E[R],
                                     __m512i F) {
  const __m512i bmin = _mm512_loadu_si512(&p.b_vmin[(static_cast<std::size_t>(tile) * p.blocks() + block) * kMmaLanes]);
  __mmask16 any = 0;
  for (int r = 0; r < R; ++r) {
    const __m512i lowest = _mm512_add_epi32(bmin, _mm512_set1_epi32(p.a_vmin[static_cast<std::size_t>(row + r) * p.blocks() + block]));
    any |= _mm512_cmplt_epi32_mask(lowest, _mm512_sub_epi32(E[r], F));
  }
  return any != 0;
}

// The c term of every row: aligned, the first of the even sum; what it lost counted.
MMA_TARGET inline __m512i c_term(__m512 c, __m512 scale, LaneCounts& n) {
  const __m512 x = _mm512_scalef_ps(c, scale);
  const __m512i t = _mm512_cvttps_epi32(x);
  const __mmask16 nonzero = _mm512_cmp_ps_mask(c, _mm512_setzero_ps(), _CMP_NEQ_UQ);
  const __mmask16 lost = _mm512_cmp_ps_mask(_mm512_cvtepi32_ps(t), x, _CMP_NEQ_UQ) |
                         _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ);  // x underflowed to 0
  n.c_terms = bump(n.c_terms, nonzero);
  n.c_truncated = bump(n.c_truncated, nonzero & lost);
  n.c_shifted_out = bump(n.c_shifted_out, _mm512_mask_cmpeq_epi32_mask(nonzero, t, _mm512_setzero_si512()));
  return t;
}

// The products [k0, k1) of every row aligned and added into the two sums; the truncated ones counted in
// int16 lanes from the lowest-bit exponents (one add, compare and masked add per two rows), the shifted-out
// ones (only where may_shift_out) from the aligned values. Everything stays in registers: the loop body is
// 4 rows x (multiply, scale, truncate, add) plus 2 x (add, compare, count).
template <bool kCountShiftedOut>
MMA_TARGET __attribute__((always_inline)) inline void add_products(const MmaPanels& p, int row, int column, int k0,
                                                                   int k1, const __m512 scale[R], const __m512i E[R],
                                                                   __m512i F, __m512i sum0[R], __m512i sum1[R],
                                                                   TileState& s) {
  const float* a = &p.a_value[static_cast<std::size_t>(row) * p.depth];
  const float* b = &p.b_value[p.b_at(0, column)];
  const std::int16_t* al = &p.a_l16[p.a16_at(row, 0)];
  const std::int16_t* bl = &p.b_l16[2 * p.b_at(0, column)];
  const std::size_t pair_stride = 2 * static_cast<std::size_t>(p.depth);
  __m512i limit[R / 2], shifted[R];
  for (int q = 0; q < R / 2; ++q)
    limit[q] = pack_rows(_mm512_sub_epi32(E[2 * q], F), _mm512_sub_epi32(E[2 * q + 1], F));
  for (int r = 0; r < R; ++r) shifted[r] = _mm512_setzero_si512();
  const __m512i one16 = _mm512_set1_epi16(1);
  auto step = [&](int kk, __m512i sum[R]) MMA_TARGET __attribute__((always_inline)) {
    const __m512 bv = _mm512_loadu_ps(b + kMmaLanes * kk);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_scalef_ps(_mm512_mul_ps(bv, _mm512_set1_ps(a[static_cast<std::size_t>(r) * p.depth + kk])), scale[r]);
      const __m512i t = _mm512_cvttps_epi32(x);
      sum[r] = _mm512_add_epi32(sum[r], t);
      if constexpr (kCountShiftedOut)
        shifted[r] = bump(shifted[r], _mm512_mask_cmpeq_epi32_mask(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NEQ_UQ),
                                                                   t, _mm512_setzero_si512()));
    }
    const __m512i lb = _mm512_loadu_si512(bl + 2 * kMmaLanes * kk);
#pragma GCC unroll 2
    for (int q = 0; q < R / 2; ++q) {
      const __mmask32 lost = _mm512_cmplt_epi16_mask(_mm512_add_epi16(lb, broadcast_pair(al + q * pair_stride + 2 * kk)), limit[q]);
      s.truncated16[q] = _mm512_mask_add_epi16(s.truncated16[q], lost, s.truncated16[q], one16);
    }
  };
  int kk = k0;
  for (; kk + 1 < k1; kk += 2) {  // two sums, each below 2^31 (mma_gemm.cpp checks)
    step(kk, sum0);
    step(kk + 1, sum1);
  }
  if (kk < k1) step(kk, sum0);
  if constexpr (kCountShiftedOut)
    for (int r = 0; r < R; ++r) s.n[r].aligned_to_zero = _mm512_add_epi32(s.n[r].aligned_to_zero, shifted[r]);
}

// One fused operation over products [k0, k1) (block `block`) for every row: c <- the rounded c + sum.
MMA_TARGET __attribute__((always_inline)) inline void fused_operation(const MmaPanels& p, const MmaKernelModel& m,
                                                                      int row, int tile, int block, TileState& s) {
  const int column = tile * kMmaLanes, k0 = block * m.fused_k, k1 = k0 + m.fused_k;
  __m512i E[R];
  largest_exponents(p, row, column, k0, k1, m.c_emin, s.c, E);
  const __m512i F = _mm512_set1_epi32(m.fraction_bits);
  __m512 scale[R];
  __m512i sum0[R], sum1[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    scale[r] = _mm512_cvtepi32_ps(_mm512_sub_epi32(F, E[r]));
    sum0[r] = c_term(s.c[r], scale[r], s.n[r]);
    sum1[r] = _mm512_setzero_si512();
  }
  if (s.pending + m.fused_k > 32767) flush_truncated(s);
  s.pending += m.fused_k;
  if (may_shift_out(p, row, tile, block, E, F))
    add_products<true>(p, row, column, k0, k1, scale, E, F, sum0, sum1, s);
  else
    add_products<false>(p, row, column, k0, k1, scale, E, F, sum0, sum1, s);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    __m512d lo, hi;
    exact_value(sum0[r], sum1[r], _mm512_sub_epi32(E[r], F), lo, hi);
    const Rounded d = round_output(lo, hi, m.output);
    s.c[r] = d.d;
    s.infinite[r] |= d.infinite;
    s.n[r].inexact = bump(s.n[r].inexact, d.inexact);
  }
  // Promotion (fp32 output): the chain's result into the accumulator by an fp32 addition to nearest-even,
  // and the chain restarts at zero. Kept lanes are finite, so no NaN arises.
  if (m.promotion > 0 && (k1 % m.promotion == 0 || k1 == p.depth))
    for (int r = 0; r < R; ++r) {
      s.accumulator[r] = _mm512_add_round_ps(s.accumulator[r], s.c[r], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      s.c[r] = _mm512_setzero_ps();
    }
}

MMA_TARGET inline std::uint64_t total(__mmask16 lanes, __m512i v) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(_mm512_mask_reduce_add_epi32(lanes, v)));
}

}  // namespace

bool cpu_has_avx512_mma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}

MMA_TARGET void mma_tile_avx512(const MmaPanels& p, const MmaKernelModel& m, int row, int tile, float* d,
                                std::uint16_t* keep, MmaKernelCounts& counts) {
  const int tiles = p.columns / kMmaLanes;
  TileState s;
  const __m512i z = _mm512_setzero_si512();
  for (int r = 0; r < R; ++r) {
    s.c[r] = s.accumulator[r] = _mm512_setzero_ps();
    s.infinite[r] = 0;
    s.n[r] = {z, z, z, z, z, z};
  }
  for (int q = 0; q < R / 2; ++q) s.truncated16[q] = z;
  for (int block = 0; block < p.blocks(); ++block) fused_operation(p, m, row, tile, block, s);
  flush_truncated(s);
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(d + static_cast<std::size_t>(row + r) * p.columns + tile * kMmaLanes,
                     m.promotion > 0 ? s.accumulator[r] : s.c[r]);
    std::uint16_t& kept = keep[static_cast<std::size_t>(row + r) * tiles + tile];
    kept = static_cast<std::uint16_t>(kept & ~s.infinite[r]);
    counts.c_terms += total(kept, s.n[r].c_terms);
    counts.c_truncated += total(kept, s.n[r].c_truncated);
    counts.c_shifted_out += total(kept, s.n[r].c_shifted_out);
    counts.products_truncated += total(kept, s.n[r].truncated);
    counts.products_shifted_out += total(kept, s.n[r].aligned_to_zero);
    counts.inexact += total(kept, s.n[r].inexact);
  }
}

}  // namespace mpverify::emu::detail

#else

namespace mpverify::emu::detail {
bool cpu_has_avx512_mma() { return false; }
void mma_tile_avx512(const MmaPanels&, const MmaKernelModel&, int, int, float*, std::uint16_t*, MmaKernelCounts&) {}
}  // namespace mpverify::emu::detail

#endif
