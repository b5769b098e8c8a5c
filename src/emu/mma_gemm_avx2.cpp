// The vector kernel of mma_gemm (mma_gemm_simd.h) on AVX2 (with FMA and F16C), for CPUs without AVX-512:
// the same chain of fused operations as mma_gemm_x86.cpp, on the same panels, in 8 float and int32 lanes
// (a tile's 16 columns as two halves of 8) and 16 int16 lanes (a row pair x 8 columns: the low or high half
// of the AVX-512 kernel's 32-lane vector, as the panels store it). Bits and counts are the scalar model's
// for the same reasons as there (mma_gemm_x86.cpp, under the conditions mma_gemm.cpp checks); what AVX2
// lacks is done as follows, each step still exact where the result depends on it:
//   - no scalef: x = a*b * 2^(F - E) is a multiplication by the float 2^(F - E). E >= -126 (c's exponent
//     is at least that) and E <= 128, so F - E lies in [-120, 153]; above 127 the power is not a float and
//     x = (a*b * 2^s1) * 2^s2 with s1 + s2 = F - E, both powers normal. Where |x| >= 2^-126 either form is
//     exact (a*b and c normal or, for a subnormal c scaled up, with at most 24 significant bits; the
//     intermediate lies between the factor and x); below, x may round, but |x| < 1 truncates to 0 either
//     way, and a product is then shifted out iff a*b != 0 (tested on a*b, not on x). For c, lost bits are
//     "t != x or x == 0", true for any non-zero c with |x| < 1 whatever x rounded to;
//   - no rounding modes on conversions: the double is converted to nearest (MXCSR, checked at the
//     kernel's choice), and where that went away from zero (|f| > |d|) the float's bits are decremented,
//     which is the next float toward zero (also at a binade's bottom, toward a subnormal or to zero);
//     to-nearest and toward-zero are inexact on the same values, so the inexact count compares f to d
//     once. The promotion's addition is the MXCSR's to nearest-even;
//   - no mask registers: a comparison's lanes are all ones (-1) where true, and a counter subtracts them.
// Overflow: a result of 2^128 or more is found on the double (fp32, E8M13) or as fp16's infinity; its lane
// is dropped and its element goes to the scalar model, as in the AVX-512 kernel.
#include "emu/cpu_features.h"
#include "emu/mma_gemm_simd.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdint>

namespace mpverify::emu::detail {

namespace {

#define MMA2_TARGET __attribute__((target("avx2,fma,f16c")))

constexpr int R = kMmaRows;
constexpr int W = 8;  // float lanes of a vector: a tile's kMmaLanes columns are two halves

// Per-lane counts of one row of a half tile (at most depth < 2^26 terms per lane: mma_gemm.cpp).
struct LaneCounts {
  __m256i c_terms, c_truncated, c_shifted_out, truncated, aligned_to_zero, inexact;
};

// lanes: -1 where true, 0 elsewhere (an AVX2 comparison's result).
MMA2_TARGET inline __m256i bump(__m256i counter, __m256i lanes) { return _mm256_sub_epi32(counter, lanes); }
MMA2_TARGET inline __m256i as_int(__m256 x) { return _mm256_castps_si256(x); }
MMA2_TARGET inline __m256i equal(__m256 x, __m256 y) { return as_int(_mm256_cmp_ps(x, y, _CMP_EQ_OQ)); }
MMA2_TARGET inline __m256i not_equal(__m256 x, __m256 y) { return as_int(_mm256_cmp_ps(x, y, _CMP_NEQ_UQ)); }

// 2^e for int32 lanes e in [-126, 127].
MMA2_TARGET inline __m256 pow2_ps(__m256i e) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
}

// 2^e as doubles for four int32 lanes e in the double's normal range.
MMA2_TARGET inline __m256d pow2_pd(__m128i e) {
  const __m256i biased = _mm256_add_epi64(_mm256_cvtepi32_epi64(e), _mm256_set1_epi64x(1023));
  return _mm256_castsi256_pd(_mm256_slli_epi64(biased, 52));
}

// c's exponent in the model: its float's exponent, at least the accumulator's minimum normal exponent,
// and -126 for a zero.
MMA2_TARGET inline __m256i c_exponent(__m256 c, int c_emin) {
  const __m256i field = _mm256_and_si256(_mm256_srli_epi32(as_int(c), 23), _mm256_set1_epi32(0xFF));
  const __m256i e = _mm256_max_epi32(_mm256_sub_epi32(field, _mm256_set1_epi32(127)), _mm256_set1_epi32(c_emin));
  return _mm256_blendv_epi8(e, _mm256_set1_epi32(-126), equal(c, _mm256_setzero_ps()));
}

// Two vectors of four 64-bit masks (lanes 0..3, 4..7) as one of eight 32-bit masks.
MMA2_TARGET inline __m256i narrow(__m256d lo, __m256d hi) {
  const __m256 halves = _mm256_shuffle_ps(_mm256_castpd_ps(lo), _mm256_castpd_ps(hi), 0x88);  // lo0 lo1 hi0 hi1 | ...
  return _mm256_castpd_si256(_mm256_permute4x64_pd(_mm256_castps_pd(halves), 0xD8));
}

// The lanes where float f differs from the double value (lo: lanes 0..3, hi: 4..7).
MMA2_TARGET inline __m256i differs(__m256 f, __m256d lo, __m256d hi) {
  const __m256d flo = _mm256_cvtps_pd(_mm256_castps256_ps128(f)), fhi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
  return narrow(_mm256_cmp_pd(flo, lo, _CMP_NEQ_UQ), _mm256_cmp_pd(fhi, hi, _CMP_NEQ_UQ));
}

struct Rounded {
  __m256 d;
  __m256i inexact, infinite;
};

// (lo, hi) rounded toward zero to float: to nearest, then one float toward zero where that went away.
MMA2_TARGET inline __m256 toward_zero(__m256d lo, __m256d hi, __m256i& inexact) {
  const __m256 nearest = _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
  const __m256d flo = _mm256_cvtps_pd(_mm256_castps256_ps128(nearest));
  const __m256d fhi = _mm256_cvtps_pd(_mm256_extractf128_ps(nearest, 1));
  const __m256d magnitude = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFF));
  const __m256i away = narrow(_mm256_cmp_pd(_mm256_and_pd(flo, magnitude), _mm256_and_pd(lo, magnitude), _CMP_GT_OQ),
                              _mm256_cmp_pd(_mm256_and_pd(fhi, magnitude), _mm256_and_pd(hi, magnitude), _CMP_GT_OQ));
  inexact = narrow(_mm256_cmp_pd(flo, lo, _CMP_NEQ_UQ), _mm256_cmp_pd(fhi, hi, _CMP_NEQ_UQ));
  return _mm256_castsi256_ps(_mm256_add_epi32(as_int(nearest), away));
}

// The exact result (lo, hi) rounded once to the output; an exact or underflowed zero is +0.
MMA2_TARGET inline Rounded round_output(__m256d lo, __m256d hi, MmaOutput output) {
  Rounded r{};
  __m256i inexact;
  __m256 f = toward_zero(lo, hi, inexact);
  const __m256 infinity = _mm256_set1_ps(__builtin_inff());
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  if (output == MmaOutput::fp16_nearest_even) {
    // Rounded to odd in float (the last bit set where inexact), then to fp16 to nearest-even.
    const __m256 odd = _mm256_castsi256_ps(_mm256_or_si256(as_int(f), _mm256_srli_epi32(inexact, 31)));
    f = _mm256_cvtph_ps(_mm256_cvtps_ph(odd, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    r.inexact = _mm256_or_si256(inexact, not_equal(f, odd));
    r.infinite = equal(_mm256_and_ps(f, magnitude), infinity);
  } else {
    if (output == MmaOutput::e8m13_toward_zero) {
      f = _mm256_castsi256_ps(_mm256_and_si256(as_int(f), _mm256_set1_epi32(~0x3FF)));
      inexact = differs(f, lo, hi);
    }
    r.inexact = inexact;
    // Toward zero, 2^128 and above is infinite; such a value gives |f| >= 2^127, rare enough to test the
    // double only then.
    r.infinite = _mm256_setzero_si256();
    const __m256 big = _mm256_cmp_ps(_mm256_and_ps(f, magnitude), _mm256_set1_ps(0x1p127f), _CMP_GE_OQ);
    if (_mm256_movemask_ps(big) != 0) {
      const __m256d overflow = _mm256_set1_pd(0x1p128);
      const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFF));
      r.infinite = narrow(_mm256_cmp_pd(_mm256_and_pd(lo, abs_mask), overflow, _CMP_GE_OQ),
                          _mm256_cmp_pd(_mm256_and_pd(hi, abs_mask), overflow, _CMP_GE_OQ));
    }
  }
  r.d = _mm256_andnot_ps(_mm256_cmp_ps(f, _mm256_setzero_ps(), _CMP_EQ_OQ), f);  // -0 -> +0
  return r;
}

// (sum0 + sum1) * 2^scale, exact in double, as two halves.
MMA2_TARGET inline void exact_value(__m256i sum0, __m256i sum1, __m256i scale, __m256d& lo, __m256d& hi) {
  lo = _mm256_mul_pd(_mm256_add_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(sum0)),
                                   _mm256_cvtepi32_pd(_mm256_castsi256_si128(sum1))),
                     pow2_pd(_mm256_castsi256_si128(scale)));
  hi = _mm256_mul_pd(_mm256_add_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(sum0, 1)),
                                   _mm256_cvtepi32_pd(_mm256_extracti128_si256(sum1, 1))),
                     pow2_pd(_mm256_extracti128_si256(scale, 1)));
}

// The alignment's factor 2^(F - E) of each row: one power (first) where every lane's F - E <= 127, else
// two (first * second) with both normal.
struct Scale {
  __m256 first[R], second[R];
  bool split = false;
};

MMA2_TARGET inline Scale scales(const __m256i E[R], __m256i F) {
  Scale s;
  __m256i shift[R];
  int above = 0;
  for (int r = 0; r < R; ++r) {
    shift[r] = _mm256_sub_epi32(F, E[r]);
    above |= _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(shift[r], _mm256_set1_epi32(127))));
  }
  s.split = above != 0;
  for (int r = 0; r < R; ++r) {
    const __m256i half = s.split ? _mm256_srai_epi32(shift[r], 1) : shift[r];
    s.first[r] = pow2_ps(half);
    s.second[r] = pow2_ps(_mm256_sub_epi32(shift[r], half));  // 2^0 where not split
  }
  return s;
}

template <bool kSplit>
MMA2_TARGET __attribute__((always_inline)) inline __m256 scaled(__m256 v, const Scale& s, int r) {
  const __m256 x = _mm256_mul_ps(v, s.first[r]);
  if constexpr (kSplit) return _mm256_mul_ps(x, s.second[r]);
  return x;
}

// The register state of a half tile (4 rows x 8 columns) across its chain of fused operations.
struct HalfState {
  __m256 c[R];                 // each row's chain value (the last fused operation's result)
  __m256 accumulator[R];       // promotion: the fp32 accumulator
  __m256i infinite[R];         // lanes whose result overflowed
  LaneCounts n[R];
  __m256i truncated16[R / 2];  // products truncated, int16 lanes of a row pair (flushed into n)
  int pending = 0;             // products counted in truncated16 per lane since the last flush
};

MMA2_TARGET inline __m256i broadcast_pair(const std::int16_t* at) {
  std::int32_t pair;
  __builtin_memcpy(&pair, at, sizeof pair);
  return _mm256_set1_epi32(pair);
}

// A row pair's int16 lanes (lane 2j + r: row r, column j) as two int32 vectors, signed.
MMA2_TARGET inline __m256i low_row(__m256i pair) { return _mm256_srai_epi32(_mm256_slli_epi32(pair, 16), 16); }
MMA2_TARGET inline __m256i high_row(__m256i pair) { return _mm256_srai_epi32(pair, 16); }
MMA2_TARGET inline __m256i pack_rows(__m256i low, __m256i high) {
  return _mm256_or_si256(_mm256_and_si256(low, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(high, 16));
}

// The truncation counts of the int16 lanes added into the int32 counters (before they could overflow).
MMA2_TARGET inline void flush_truncated(HalfState& s) {
  for (int q = 0; q < R / 2; ++q) {
    const __m256i t = s.truncated16[q];
    s.n[2 * q].truncated = _mm256_add_epi32(s.n[2 * q].truncated, _mm256_and_si256(t, _mm256_set1_epi32(0xFFFF)));
    s.n[2 * q + 1].truncated = _mm256_add_epi32(s.n[2 * q + 1].truncated, _mm256_srli_epi32(t, 16));
    s.truncated16[q] = _mm256_setzero_si256();
  }
  s.pending = 0;
}

// The largest exponent E of each row's terms over products [k0, k1) and c (int16 lanes of row pairs).
// column: the half tile's first column; its int16 panel is the half of the tile's 32-lane one.
MMA2_TARGET inline void largest_exponents(const MmaPanels& p, int row, int column, int k0, int k1, int c_emin,
                                          const __m256 c[R], __m256i E[R]) {
  const std::int16_t* ae = &p.a_e16[p.a16_at(row, 0)];
  const std::int16_t* be = &p.b_e16[2 * p.b_at(0, column)];
  const std::size_t pair_stride = 2 * static_cast<std::size_t>(p.depth);
  __m256i pair[R / 2];
  for (int q = 0; q < R / 2; ++q) pair[q] = _mm256_set1_epi16(-32768);
  for (int kk = k0; kk < k1; ++kk) {
    const __m256i eb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(be + 2 * kMmaLanes * kk));
    for (int q = 0; q < R / 2; ++q)
      pair[q] = _mm256_max_epi16(pair[q], _mm256_add_epi16(eb, broadcast_pair(ae + q * pair_stride + 2 * kk)));
  }
  for (int q = 0; q < R / 2; ++q) {
    E[2 * q] = _mm256_max_epi32(low_row(pair[q]), c_exponent(c[2 * q], c_emin));
    E[2 * q + 1] = _mm256_max_epi32(high_row(pair[q]), c_exponent(c[2 * q + 1], c_emin));
  }
}

// Whether a product of the block may be shifted out in some lane (MmaPanels::vmin).
MMA2_TARGET inline bool may_shift_out(const MmaPanels& p, int row, int column, int block, const __m256i E[R],
                                      __m256i F) {
  const std::size_t at = (static_cast<std::size_t>(column / kMmaLanes) * p.blocks() + block) * kMmaLanes +
                         column % kMmaLanes;
  const __m256i bmin = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&p.b_vmin[at]));
  __m256i any = _mm256_setzero_si256();
  for (int r = 0; r < R; ++r) {
    const __m256i amin = _mm256_set1_epi32(p.a_vmin[static_cast<std::size_t>(row + r) * p.blocks() + block]);
    any = _mm256_or_si256(any, _mm256_cmpgt_epi32(_mm256_sub_epi32(E[r], F), _mm256_add_epi32(bmin, amin)));
  }
  return !_mm256_testz_si256(any, any);
}

// The c term of row r: aligned, the first of the even sum; what it lost counted.
template <bool kSplit>
MMA2_TARGET inline __m256i c_term(__m256 c, const Scale& scale, int r, LaneCounts& n) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 x = scaled<kSplit>(c, scale, r);
  const __m256i t = _mm256_cvttps_epi32(x);
  const __m256i nonzero = not_equal(c, zero);
  const __m256i lost = _mm256_or_si256(not_equal(_mm256_cvtepi32_ps(t), x), equal(x, zero));  // x underflowed
  n.c_terms = bump(n.c_terms, nonzero);
  n.c_truncated = bump(n.c_truncated, _mm256_and_si256(nonzero, lost));
  n.c_shifted_out = bump(n.c_shifted_out, _mm256_and_si256(nonzero, _mm256_cmpeq_epi32(t, _mm256_setzero_si256())));
  return t;
}

// The products [k0, k1) of every row aligned and added into the two sums (each below 2^31: mma_gemm.cpp);
// the truncated ones counted in int16 lanes from the lowest-bit exponents, the shifted-out ones (only where
// may_shift_out) from the aligned values of non-zero products.
template <bool kCountShiftedOut, bool kSplit>
MMA2_TARGET __attribute__((always_inline)) inline void add_products(const MmaPanels& p, int row, int column, int k0,
                                                                    int k1, const Scale& scale, const __m256i E[R],
                                                                    __m256i F, __m256i sum0[R], __m256i sum1[R],
                                                                    HalfState& s) {
  const float* a = &p.a_value[static_cast<std::size_t>(row) * p.depth];
  const float* b = &p.b_value[p.b_at(0, column)];
  const std::int16_t* al = &p.a_l16[p.a16_at(row, 0)];
  const std::int16_t* bl = &p.b_l16[2 * p.b_at(0, column)];
  const std::size_t pair_stride = 2 * static_cast<std::size_t>(p.depth);
  __m256i limit[R / 2], shifted[R];
  for (int q = 0; q < R / 2; ++q)
    limit[q] = pack_rows(_mm256_sub_epi32(E[2 * q], F), _mm256_sub_epi32(E[2 * q + 1], F));
  for (int r = 0; r < R; ++r) shifted[r] = _mm256_setzero_si256();
  auto step = [&](int kk, __m256i sum[R]) MMA2_TARGET __attribute__((always_inline)) {
    const __m256 bv = _mm256_loadu_ps(b + kMmaLanes * kk);
    for (int r = 0; r < R; ++r) {
      const __m256 ab = _mm256_mul_ps(bv, _mm256_broadcast_ss(a + static_cast<std::size_t>(r) * p.depth + kk));
      const __m256i t = _mm256_cvttps_epi32(scaled<kSplit>(ab, scale, r));
      sum[r] = _mm256_add_epi32(sum[r], t);
      if constexpr (kCountShiftedOut)
        shifted[r] = bump(shifted[r], _mm256_andnot_si256(equal(ab, _mm256_setzero_ps()),
                                                          _mm256_cmpeq_epi32(t, _mm256_setzero_si256())));
    }
    const __m256i lb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bl + 2 * kMmaLanes * kk));
    for (int q = 0; q < R / 2; ++q) {
      const __m256i lost = _mm256_cmpgt_epi16(limit[q], _mm256_add_epi16(lb, broadcast_pair(al + q * pair_stride + 2 * kk)));
      s.truncated16[q] = _mm256_sub_epi16(s.truncated16[q], lost);
    }
  };
  int kk = k0;
  for (; kk + 1 < k1; kk += 2) {
    step(kk, sum0);
    step(kk + 1, sum1);
  }
  if (kk < k1) step(kk, sum0);
  if constexpr (kCountShiftedOut)
    for (int r = 0; r < R; ++r) s.n[r].aligned_to_zero = _mm256_add_epi32(s.n[r].aligned_to_zero, shifted[r]);
}

// The c terms and the products of one fused operation, with the alignment's factor in one or two powers.
template <bool kSplit>
MMA2_TARGET inline void terms(const MmaPanels& p, int row, int column, int block, int k0, int k1, const Scale& scale,
                              const __m256i E[R], __m256i F, __m256i sum0[R], __m256i sum1[R], HalfState& s) {
  for (int r = 0; r < R; ++r) {
    sum0[r] = c_term<kSplit>(s.c[r], scale, r, s.n[r]);
    sum1[r] = _mm256_setzero_si256();
  }
  if (may_shift_out(p, row, column, block, E, F))
    add_products<true, kSplit>(p, row, column, k0, k1, scale, E, F, sum0, sum1, s);
  else
    add_products<false, kSplit>(p, row, column, k0, k1, scale, E, F, sum0, sum1, s);
}

// One fused operation over products [k0, k1) (block `block`) for every row: c <- the rounded c + sum.
MMA2_TARGET inline void fused_operation(const MmaPanels& p, const MmaKernelModel& m, int row, int column, int block,
                                        HalfState& s) {
  const int k0 = block * m.fused_k, k1 = k0 + m.fused_k;
  __m256i E[R];
  largest_exponents(p, row, column, k0, k1, m.c_emin, s.c, E);
  const __m256i F = _mm256_set1_epi32(m.fraction_bits);
  const Scale scale = scales(E, F);
  __m256i sum0[R], sum1[R];
  if (s.pending + m.fused_k > 32767) flush_truncated(s);
  s.pending += m.fused_k;
  if (scale.split) terms<true>(p, row, column, block, k0, k1, scale, E, F, sum0, sum1, s);
  else terms<false>(p, row, column, block, k0, k1, scale, E, F, sum0, sum1, s);
  for (int r = 0; r < R; ++r) {
    __m256d lo, hi;
    exact_value(sum0[r], sum1[r], _mm256_sub_epi32(E[r], F), lo, hi);
    const Rounded d = round_output(lo, hi, m.output);
    s.c[r] = d.d;
    s.infinite[r] = _mm256_or_si256(s.infinite[r], d.infinite);
    s.n[r].inexact = bump(s.n[r].inexact, d.inexact);
  }
  // Promotion (fp32 output): the chain's result into the accumulator by an fp32 addition to nearest-even
  // (MXCSR's default, checked), and the chain restarts at zero. Kept lanes are finite, so no NaN arises.
  if (m.promotion > 0 && (k1 % m.promotion == 0 || k1 == p.depth))
    for (int r = 0; r < R; ++r) {
      s.accumulator[r] = _mm256_add_ps(s.accumulator[r], s.c[r]);
      s.c[r] = _mm256_setzero_ps();
    }
}

// The sum of v's lanes selected by the bits of `lanes`.
MMA2_TARGET inline std::uint64_t total(unsigned lanes, __m256i v) {
  alignas(32) std::uint32_t x[W];
  _mm256_store_si256(reinterpret_cast<__m256i*>(x), v);
  std::uint64_t sum = 0;
  for (int l = 0; l < W; ++l) sum += (lanes >> l & 1) ? x[l] : 0;
  return sum;
}

// Rows [row, row + R) x columns [column, column + W) of C: the chain, the stores, the counts of kept lanes.
MMA2_TARGET void half_tile(const MmaPanels& p, const MmaKernelModel& m, int row, int column, float* d,
                           std::uint16_t* keep, MmaKernelCounts& counts) {
  const int tiles = p.columns / kMmaLanes, shift = column % kMmaLanes;
  HalfState s;
  const __m256i z = _mm256_setzero_si256();
  for (int r = 0; r < R; ++r) {
    s.c[r] = s.accumulator[r] = _mm256_setzero_ps();
    s.infinite[r] = z;
    s.n[r] = {z, z, z, z, z, z};
  }
  for (int q = 0; q < R / 2; ++q) s.truncated16[q] = z;
  for (int block = 0; block < p.blocks(); ++block) fused_operation(p, m, row, column, block, s);
  flush_truncated(s);
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(d + static_cast<std::size_t>(row + r) * p.columns + column,
                     m.promotion > 0 ? s.accumulator[r] : s.c[r]);
    std::uint16_t& kept = keep[static_cast<std::size_t>(row + r) * tiles + column / kMmaLanes];
    const unsigned infinite = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(s.infinite[r])));
    kept = static_cast<std::uint16_t>(kept & ~(infinite << shift));
    const unsigned lanes = (kept >> shift) & 0xFFu;
    counts.c_terms += total(lanes, s.n[r].c_terms);
    counts.c_truncated += total(lanes, s.n[r].c_truncated);
    counts.c_shifted_out += total(lanes, s.n[r].c_shifted_out);
    counts.products_truncated += total(lanes, s.n[r].truncated);
    counts.products_shifted_out += total(lanes, s.n[r].aligned_to_zero);
    counts.inexact += total(lanes, s.n[r].inexact);
  }
}

static_assert(kMmaLanes == 2 * W, "a tile is two halves");

}  // namespace

bool cpu_has_avx2_mma() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !cpu_has_f16c())
    return false;
  // Rounding control (bits 13-14) to nearest, FTZ (15) and DAZ (6) off: the conversions, the promotion's
  // addition and subnormal c values depend on them.
  return (_mm_getcsr() & 0xE040u) == 0;
}

void mma_tile_avx2(const MmaPanels& p, const MmaKernelModel& m, int row, int tile, float* d, std::uint16_t* keep,
                   MmaKernelCounts& counts) {
  for (int half = 0; half < kMmaLanes / W; ++half)
    half_tile(p, m, row, tile * kMmaLanes + half * W, d, keep, counts);
}

}  // namespace mpverify::emu::detail

#else

namespace mpverify::emu::detail {
bool cpu_has_avx2_mma() { return false; }
void mma_tile_avx2(const MmaPanels&, const MmaKernelModel&, int, int, float*, std::uint16_t*, MmaKernelCounts&) {}
}  // namespace mpverify::emu::detail

#endif
