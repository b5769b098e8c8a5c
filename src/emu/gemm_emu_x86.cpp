// The accumulation kernels of the emulated GEMM on AVX-512.
//
// Both keep a tile of C in registers for the whole k loop (R rows x 32
// columns, over a packed panel of B), so each element is still accumulated
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
// That is fp16_step, the exact step for any vector; a tile takes a cheaper
// one (an FMA to nearest) for the vectors where it provably gives the same
// bits and counts (see fp16_tile).
// Counts mirror accumulate_fp16 in gemm_emu.cpp exactly (a test compares).
#include "emu/gemm_emu_simd.h"
#include "emu/quantize_simd.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers
#pragma GCC diagnostic ignored "-Wuninitialized"        // (_mm256_undefined_si256 in _mm512_reduce_add_*)

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

// RO(x) for x = a*b + c, 16 lanes; rd = RD(x) and ru = RU(x) come back too.
// On the bits: rd and ru are equal when x is exact, else adjacent floats of
// x's sign (|x| >= 2^-48), and the smaller bit pattern is the one nearer
// zero, RZ(x); their last bits differ exactly when x is inexact. An exact
// zero sum is -0 rounding down but +0 in RNE (and rounding up): the unsigned
// minimum takes +0 there too, and -0 ^ +0 has its last bit clear. NaN in, x
// NaN: rd and ru are the same NaN, which comes back.
__attribute__((target("avx512f"))) inline __m512 round_to_odd(__m512 va, __m512 vb, __m512 vc, __m512& rd,
                                                              __m512& ru) {
  rd = _mm512_fmadd_round_ps(va, vb, vc, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  ru = _mm512_fmadd_round_ps(va, vb, vc, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
  const __m512i d = _mm512_castps_si512(rd), u = _mm512_castps_si512(ru);
  // min(d, u) | ((d ^ u) & 1): ternary-logic table 0xf8 is A | (B & C)
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_min_epu32(d, u), _mm512_xor_si512(d, u),
                                                       _mm512_set1_epi32(1), 0xf8));
}

// The counts that need x or the result outside [2^-14, 65504], or a NaN
// (zeros, tiny, subnormal, overflow, non-finite), for one vector.
__attribute__((target("avx512f"))) inline void count_out_of_range(__m512 rd, __m512 ru, __m512 odd, __m512 result,
                                                                  __mmask16 inexact, LaneCounts& n) {
  const __m512 zero = _mm512_setzero_ps(), infinity = _mm512_set1_ps(__builtin_inff());
  const __m512 ar = _mm512_abs_ps(result);
  const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_abs_ps(rd), infinity, _CMP_LT_OQ);
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

// acc <- fl16(a*b + acc) for 16 lanes, every count taken per lane: the step
// for tiles that meet a non-finite value (see fp16_tile).
template <bool Count>
__attribute__((target("avx512f"))) inline __m512 fp16_step(__m512 va, __m512 vb, __m512 vc, LaneCounts& n) {
  __m512 rd, ru;
  const __m512 odd = round_to_odd(va, vb, vc, rd, ru);
  const __m512 result = _mm512_cvtph_ps(_mm512_cvtps_ph(odd, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  if constexpr (Count) {
    const __m512 zero = _mm512_setzero_ps(), infinity = _mm512_set1_ps(__builtin_inff());
    // Inexact: result != x. When x is inexact, odd has its last bit set and
    // is no fp16 value; when exact, odd is x. (NaN compares unequal: not counted.)
    const __mmask16 inexact = _mm512_cmp_ps_mask(result, odd, _CMP_NEQ_OQ);
    bump(n.inexact, inexact);
    // count_update (counters.h) on masks, with w = c and u = a*b (exact in float):
    // an update is a*b != 0 with a*b and c finite, lost when c != 0 and the result is c.
    const __m512 product = _mm512_mul_ps(va, vb);
    const __mmask16 addend = _mm512_cmp_ps_mask(product, zero, _CMP_NEQ_OQ) &
                             _mm512_cmp_ps_mask(_mm512_abs_ps(product), infinity, _CMP_LT_OQ) &
                             _mm512_cmp_ps_mask(_mm512_abs_ps(vc), infinity, _CMP_LT_OQ);
    bump(n.addends, addend);
    bump(n.swamped, _mm512_mask_cmp_ps_mask(addend & _mm512_cmp_ps_mask(vc, zero, _CMP_NEQ_OQ), result, vc, _CMP_EQ_OQ));
    const __m512 ar = _mm512_abs_ps(result);
    const __mmask16 in_range = _mm512_cmp_ps_mask(_mm512_abs_ps(rd), _mm512_set1_ps(kFp16MinNormal), _CMP_GE_OQ) &
                               _mm512_cmp_ps_mask(ar, _mm512_set1_ps(kFp16MinNormal), _CMP_GE_OQ) &
                               _mm512_cmp_ps_mask(ar, _mm512_set1_ps(kFp16MaxFinite), _CMP_LE_OQ);
    if (in_range != 0xffff) count_out_of_range(rd, ru, odd, result, inexact, n);
  }
  return result;
}

// The sum of 16 unsigned 32-bit lane counts, in 64 bits (a tile's total can pass 2^32 where no lane does).
__attribute__((target("avx512f"))) inline std::uint64_t sum(__m512i v) {
  const __m512i lo = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(v));
  const __m512i hi = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(v, 1));
  return static_cast<std::uint64_t>(_mm512_reduce_add_epi64(_mm512_add_epi64(lo, hi)));
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

// The step in a tile, cheaper than fp16_step. x = fl32(a*b + c) in one FMA
// (round to nearest) already gives fl16(a*b + c) = fl16(x) unless x is an
// fp16 rounding midpoint: rounding is monotone and the midpoints (the
// overflow bound 65520 among them) are floats, so x lies strictly between
// the same two midpoints as a*b + c. Midpoints and fp16 values have their
// low 12 bits zero: normal ones keep 10 fraction bits and at most one more
// of float's 23; in fp16's subnormal range (|x| < 2^-14) they are multiples
// of 2^-25 and float's ulp there is at most 2^-38. So a vector whose lanes
// all have a non-zero low 12 bits, or a zero factor (a == 0 or b == 0: then
// x = c exactly, unless the other factor is inf or NaN and x is NaN, which
// the conversion pair gives as fp16_step does), takes the FMA's x: the
// "common" vector. Any other vector takes fp16_step (round to odd). This
// holds whatever the range: the wider test below is for the counts alone.
// Zero factors are common in real operands (padding and ReLU zeros in an
// im2col matrix or a gradient) and would otherwise send most vectors of a
// convolution to fp16_step.
//
// Counting, a common vector whose lanes also have |x| >= 2^-14 (so the
// results are normal or inf) counts on three facts:
//  - a lane with non-zero factors has an addend and is inexact: x is no
//    fp16 value, so neither is a*b + c (it would be a float, and x would
//    be it);
//  - a lane with a zero factor has neither, and its result is c;
//  - nothing is tiny, subnormal or zero: |x| > 2^-14 (x is not 2^-14, whose
//    low bits are zero), and 2^-14 is a float, so |a*b + c| > 2^-14 too.
// A vector with a zero factor fails the low-bits test first; only then are
// its zero factors looked up, so dense operands pay nothing for them.
// Overflow and NaN are left to the tile's check: every tile runs first on
// the assumption that its accumulators stay finite and is run again with
// fp16_step throughout when one ends non-finite (an x beyond 65520 rounds to
// inf, and from inf or NaN every later x is inf or NaN, so a tile whose
// accumulators end finite had every a, b, c and x finite). What remains is
// swamping, result == c, read off equal fp16 bits (no zeros, no NaN), less
// the zero-factor lanes, whose result is c without an addend. (A lane with
// c == 0 and an addend never counts: |x| >= 2^-14 makes its result non-zero.)
// The lane counts of equal fp16 bits are 16-bit: a lane takes at most 2R per
// k step, so they are widened every kBlock k steps.
constexpr int kBlock = 4096;

__attribute__((target("avx512f,avx2"))) inline void widen_into(__m256i& counts16, __m512i& counts32) {
  counts32 = _mm512_add_epi32(counts32, _mm512_cvtepu16_epi32(counts16));
  counts16 = _mm256_setzero_si256();
}

__attribute__((target("avx512f"))) inline bool all_finite(__m512 v) {
  return _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(__builtin_inff()), _CMP_LT_OQ) == 0xffff;
}

// The lanes of x = fl32(a*b + c) whose fp16 rounding is fl16(a*b + c) (off
// the grid, or a zero factor) and, when counting, whose |x| >= 2^-14 too
// (compared on the bits shifted past the sign; inf and NaN pass: the tile's
// finiteness check catches them).
template <bool Count>
__attribute__((target("avx512f"))) inline __mmask16 common_lanes(__m512i x_bits, __mmask16 zero_factor) {
  const __mmask16 off_grid = _mm512_test_epi32_mask(x_bits, _mm512_set1_epi32(0xfff)) | zero_factor;
  if constexpr (!Count) return off_grid;
  constexpr std::uint32_t min_normal = 0x38800000u << 1;
  return _mm512_mask_cmpge_epu32_mask(off_grid, _mm512_slli_epi32(x_bits, 1),
                                      _mm512_set1_epi32(static_cast<int>(min_normal)));
}

// One tile of R rows x 32 columns, accumulators in registers for the whole k
// loop. a_rows: the R rows of A; panel: the tile's 32 columns of B, packed
// (k rows of 32). Exact: fp16_step for every step. Returns false (and stores
// and counts nothing) when counting, not Exact, and an accumulator ends
// non-finite. (Without counting, the common vectors need no finiteness.)
template <bool Count, int R, bool Exact>
__attribute__((target("avx512f,avx2,popcnt"))) bool fp16_tile(const float* a_rows, const float* panel, float* acc,
                                                              int n, int k, Counters* counters) {
  static_assert(2 * R * kBlock < (1 << 16));
  LaneCounts lanes;
  clear(lanes);
  std::uint64_t rare_vectors = 0, zero_factor_lanes = 0;  // the latter in common vectors
  __m256i equal16 = _mm256_setzero_si256();
  __m512 c[R][2];
  __m256i h[R][2];  // the fp16 bits of c (counting only)
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 2; ++v) c[r][v] = _mm512_setzero_ps(), h[r][v] = _mm256_setzero_si256();
  for (int k0 = 0; k0 < k; k0 += kBlock) {
    const int k1 = k - k0 < kBlock ? k : k0 + kBlock;
    for (int kk = k0; kk < k1; ++kk) {
      const __m512 b[2] = {_mm512_loadu_ps(panel + static_cast<std::size_t>(kk) * 32),
                           _mm512_loadu_ps(panel + static_cast<std::size_t>(kk) * 32 + 16)};
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 a = _mm512_set1_ps(a_rows[static_cast<std::size_t>(r) * k + kk]);
#pragma GCC unroll 2
        for (int v = 0; v < 2; ++v) {
          if constexpr (Exact) {
            c[r][v] = fp16_step<Count>(a, b[v], c[r][v], lanes);
          } else {
            const __m512 x = _mm512_fmadd_ps(a, b[v], c[r][v]);
            __mmask16 common = common_lanes<Count>(_mm512_castps_si512(x), 0);
            if (__builtin_expect(common != 0xffff, 0)) {  // unless the other lanes have a zero factor
              const __m512 zero = _mm512_setzero_ps();
              const __mmask16 zero_factor =
                  _mm512_cmp_ps_mask(a, zero, _CMP_EQ_OQ) | _mm512_cmp_ps_mask(b[v], zero, _CMP_EQ_OQ);
              common = common_lanes<Count>(_mm512_castps_si512(x), zero_factor);
              if (common == 0xffff) zero_factor_lanes += static_cast<unsigned>(__builtin_popcount(zero_factor));
            }
            if (__builtin_expect(common == 0xffff, 1)) {
              const __m256i hn = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
              c[r][v] = _mm512_cvtph_ps(hn);
              if constexpr (Count) {
                equal16 = _mm256_sub_epi16(equal16, _mm256_cmpeq_epi16(hn, h[r][v]));  // -1 per equal lane
                h[r][v] = hn;
              }
            } else {
              ++rare_vectors;
              c[r][v] = fp16_step<Count>(a, b[v], c[r][v], lanes);
              if constexpr (Count) h[r][v] = _mm512_cvtps_ph(c[r][v], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            }
          }
        }
      }
    }
    if constexpr (Count && !Exact) widen_into(equal16, lanes.swamped);
  }
  if constexpr (Count && !Exact) {
    for (int r = 0; r < R; ++r)
      if (!all_finite(c[r][0]) || !all_finite(c[r][1])) return false;
  }
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(acc + static_cast<std::size_t>(r) * n, c[r][0]);
    _mm512_storeu_ps(acc + static_cast<std::size_t>(r) * n + 16, c[r][1]);
  }
  if constexpr (Count) {
    const std::uint64_t steps = static_cast<std::uint64_t>(R) * 32 * static_cast<std::uint64_t>(k);
    add_lanes(lanes, steps, *counters);
    if constexpr (!Exact) {
      const std::uint64_t common_lanes_total =
          (static_cast<std::uint64_t>(2 * R) * static_cast<std::uint64_t>(k) - rare_vectors) * 16;
      counters->inexact += common_lanes_total - zero_factor_lanes;
      counters->addends_nonzero += common_lanes_total - zero_factor_lanes;
      counters->swamped -= zero_factor_lanes;  // lanes.swamped counted every result == c
    }
  }
  return true;
}

// Tiles over [0, m) x [0, n_whole), each panel of 32 columns of B packed
// contiguous (a 128-byte stride instead of n floats, so a panel stays in
// cache while every row tile runs over it). Lane counters are flushed per
// tile; a tile adds at most 2R * k to a lane, so the caller keeps k < 2^28
// (R <= 8).
template <bool Count, int R>
__attribute__((target("avx512f,avx2,popcnt"))) void fp16_tiles(const float* A, const float* B, float* acc, int m,
                                                               int n_whole, int n, int k, Counters* counters) {
  std::vector<float> panel(static_cast<std::size_t>(k) * 32);
  for (int j0 = 0; j0 < n_whole; j0 += 32) {
    for (int kk = 0; kk < k; ++kk)
      std::memcpy(&panel[static_cast<std::size_t>(kk) * 32], B + static_cast<std::size_t>(kk) * n + j0,
                  32 * sizeof(float));
    for (int i0 = 0; i0 + R <= m; i0 += R) {
      const float* a_rows = A + static_cast<std::size_t>(i0) * k;
      float* out = acc + static_cast<std::size_t>(i0) * n + j0;
      if (!fp16_tile<Count, R, false>(a_rows, panel.data(), out, n, k, counters))
        fp16_tile<Count, R, true>(a_rows, panel.data(), out, n, k, counters);
    }
  }
}

// fp32 accumulation, counted: count_fp32_step (gemm_emu_simd.h) on masks.
//
// Inexact (count_fp32_step's count_inexact, GemmPolicy::count_step_inexact),
// mirroring fp32_step_inexact: the lanes where RD(a*b + c) != RU(a*b + c).
// The directed roundings of a finite value agree iff it is a float (an
// overflowing one: the largest float and inf; one beyond the largest float
// but rounding to it: the same two); an exact zero rounds to -0 and +0,
// equal under the compare. A lane with an inf or NaN among a, b, c has rd
// and ru both inf (exact, not inexact) or both NaN (unordered: not counted),
// and the exact step masks it off besides.
__attribute__((target("avx512f"))) inline __mmask16 inexact_lanes(__mmask16 mask, __m512 a, __m512 b, __m512 c) {
  const __m512 rd = _mm512_fmadd_round_ps(a, b, c, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __m512 ru = _mm512_fmadd_round_ps(a, b, c, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
  return _mm512_mask_cmp_ps_mask(mask, rd, ru, _CMP_NEQ_OQ);
}

// fp32_step_exact takes every count per lane, for any a, b, c.
template <bool Inexact>
__attribute__((target("avx512f"))) inline __m512 fp32_step_exact(__m512 a, __m512 b, __m512 c, LaneCounts& n) {
  const __m512 zero = _mm512_setzero_ps(), infinity = _mm512_set1_ps(__builtin_inff());
  const __m512 result = _mm512_fmadd_ps(a, b, c);
  const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_abs_ps(a), infinity, _CMP_LT_OQ) &
                           _mm512_cmp_ps_mask(_mm512_abs_ps(b), infinity, _CMP_LT_OQ) &
                           _mm512_cmp_ps_mask(_mm512_abs_ps(c), infinity, _CMP_LT_OQ);
  const __mmask16 nan_in =
      _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(c, c, _CMP_UNORD_Q);
  const __mmask16 created = _mm512_cmp_ps_mask(result, result, _CMP_UNORD_Q) & static_cast<__mmask16>(~nan_in);
  bump(n.nan_created, created);
  bump(n.nonfinite, static_cast<__mmask16>(~finite & ~created));
  bump(n.overflow, _mm512_mask_cmp_ps_mask(finite, _mm512_abs_ps(result), infinity, _CMP_EQ_OQ));
  if constexpr (Inexact) bump(n.inexact, inexact_lanes(finite, a, b, c));
  // count_update: u = a*b != 0 (a != 0 and b != 0), u and c finite; lost when c != 0 and result == c
  const __mmask16 addend = _mm512_mask_cmp_ps_mask(_mm512_mask_cmp_ps_mask(finite, a, zero, _CMP_NEQ_OQ), b, zero,
                                                   _CMP_NEQ_OQ);
  bump(n.addends, addend);
  bump(n.swamped, _mm512_mask_cmp_ps_mask(_mm512_mask_cmp_ps_mask(addend, c, zero, _CMP_NEQ_OQ), result, c, _CMP_EQ_OQ));
  return result;
}

// The cheap count, for a tile whose accumulators end finite and whose
// non-zero products are not below 2^-149 in magnitude (the smallest non-zero
// |a| of its rows times the smallest non-zero |b| of its panel, which holds for
// fp16 inputs always and for bf16 and fp32 data unless values near 2^-75
// meet). Then
//  - every a, b, c and result was finite (a non-finite a or b makes the
//    result inf or NaN, and from inf or NaN every later result is inf or NaN):
//    no nonfinite_in, overflow or nan_created;
//  - a lane with a zero factor has result == c (by value: c + 0) and no
//    addend; a lane with an addend and c == 0 has result = fl(a*b) != 0
//    (|a*b| >= 2^-149), not a lost update; one with c != 0 is a lost update
//    exactly when result == c. So the lanes with result == c are the lost
//    updates plus the zero-factor lanes, and the addends are the lanes less
//    the zero-factor ones: the caller counts both from the operands'
//    non-zeros (fp32_tiles), the tile only result == c.
// Per vector: the FMA, a compare and a masked add (one lane counter per row).
// A lane counter takes at most 2 per k step.
// Inexact: every step of such a tile had finite a, b, c (above), so its
// inexact lanes are those of inexact_lanes, whatever the products' size:
// two more FMAs, a compare and a masked add per vector, into one lane
// counter for the tile (at most 2R per k step: k < 2^28 keeps it exact).
// One counter, not one per row: with R = 8 the 16 accumulators and 8
// counters of equal leave no register for 8 more (measured: one is about
// 10% faster at 512^3 and 1024^3).
struct Fp32TileCounts {
  std::uint64_t equal = 0, inexact = 0;
};

// One R x 32 tile of C in registers for the whole k loop, over a packed panel
// of B (32 floats per k); each element still accumulates in k order, one
// fp32 FMA per step. Count (not Exact): returns false (storing and counting
// nothing) when an accumulator ends non-finite; Exact: every step through
// fp32_step_exact. Inexact (with Count): inexact counted too.
template <int R, bool Count, bool Exact, bool Inexact>
__attribute__((target("avx512f"))) inline bool fp32_tile(const float* a_rows, const float* panel, float* out, int n,
                                                          int k, Fp32TileCounts* tile_counts, LaneCounts* lanes) {
  static_assert(Count || !Inexact);
  __m512 c[R][2];
  [[maybe_unused]] const __m512i one = _mm512_set1_epi32(1);
  // One lane counter per row for equal (measured: as fast as a single one at 512^3 and 1024^3), one for
  // inexact (Fp32TileCounts).
  [[maybe_unused]] __m512i equal[R], inexact = _mm512_setzero_si512();
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) equal[r] = _mm512_setzero_si512();
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) c[r][0] = c[r][1] = _mm512_setzero_ps();
  for (int kk = 0; kk < k; ++kk) {
    const __m512 b0 = _mm512_loadu_ps(panel + static_cast<std::size_t>(kk) * 32);
    const __m512 b1 = _mm512_loadu_ps(panel + static_cast<std::size_t>(kk) * 32 + 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(a_rows[static_cast<std::size_t>(r) * k + kk]);
      if constexpr (Exact) {
        c[r][0] = fp32_step_exact<Inexact>(a, b0, c[r][0], *lanes);
        c[r][1] = fp32_step_exact<Inexact>(a, b1, c[r][1], *lanes);
      } else if constexpr (Count) {
        const __m512 x0 = _mm512_fmadd_ps(a, b0, c[r][0]);
        const __m512 x1 = _mm512_fmadd_ps(a, b1, c[r][1]);
        equal[r] = _mm512_mask_add_epi32(equal[r], _mm512_cmp_ps_mask(x0, c[r][0], _CMP_EQ_OQ), equal[r], one);
        equal[r] = _mm512_mask_add_epi32(equal[r], _mm512_cmp_ps_mask(x1, c[r][1], _CMP_EQ_OQ), equal[r], one);
        if constexpr (Inexact) {
          inexact = _mm512_mask_add_epi32(inexact, inexact_lanes(0xffff, a, b0, c[r][0]), inexact, one);
          inexact = _mm512_mask_add_epi32(inexact, inexact_lanes(0xffff, a, b1, c[r][1]), inexact, one);
        }
        c[r][0] = x0;
        c[r][1] = x1;
      } else {
        c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);  // one rounding per step: an fp32 FMA
        c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
      }
    }
  }
  if constexpr (Count && !Exact) {
    for (int r = 0; r < R; ++r)
      if (!all_finite(c[r][0]) || !all_finite(c[r][1])) return false;
    for (int r = 1; r < R; ++r) equal[0] = _mm512_add_epi32(equal[0], equal[r]);
    tile_counts->equal = sum(equal[0]);
    if constexpr (Inexact) tile_counts->inexact = sum(inexact);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(out + static_cast<std::size_t>(r) * n, c[r][0]);
    _mm512_storeu_ps(out + static_cast<std::size_t>(r) * n + 16, c[r][1]);
  }
  return true;
}

// The smaller of m and |x| when x != 0 (zeros make no non-zero product; NaN leaves m).
inline float min_nonzero_magnitude(float m, float x) {
  const float ax = std::fabs(x);
  return ax != 0 && ax < m ? ax : m;
}

// Panels of 32 columns of B packed contiguous, as for fp16 above. Counting,
// the operands' non-zeros give the fast tiles' addends (sum over k of the
// tile rows' non-zero a times the panel row's non-zero b), per panel from
// A's column counts, less the tiles that took the exact step. Inexact (with
// Count): inexact counted too, the fast tiles' summed here, the exact ones'
// in the lane counts.
template <int R, bool Count, bool Inexact>
__attribute__((target("avx512f"))) void fp32_tiles(const float* A, const float* B, float* acc, int m, int n_whole,
                                                   int n, int k, Counters* counters) {
  std::vector<float> panel(static_cast<std::size_t>(k) * 32);
  const int m_whole = m - m % R;
  // Counting only: per k, A's non-zeros over the tiled rows, and each row's smallest non-zero |a|.
  std::vector<std::uint32_t> a_nonzero, b_nonzero;
  std::vector<float> row_min;
  std::uint64_t fast_lanes = 0, fast_addends = 0, equal = 0, fast_inexact = 0;
  LaneCounts lanes;
  clear(lanes);
  std::uint64_t exact_steps = 0;
  if constexpr (Count) {
    a_nonzero.assign(static_cast<std::size_t>(k), 0);
    b_nonzero.resize(static_cast<std::size_t>(k));
    row_min.assign(static_cast<std::size_t>(m_whole), __builtin_inff());
    for (int i = 0; i < m_whole; ++i)
      for (int kk = 0; kk < k; ++kk) {
        const float x = A[static_cast<std::size_t>(i) * k + kk];
        a_nonzero[static_cast<std::size_t>(kk)] += x != 0;
        row_min[static_cast<std::size_t>(i)] = min_nonzero_magnitude(row_min[static_cast<std::size_t>(i)], x);
      }
  }
  for (int j0 = 0; j0 < n_whole; j0 += 32) {
    for (int kk = 0; kk < k; ++kk)
      std::memcpy(&panel[static_cast<std::size_t>(kk) * 32], B + static_cast<std::size_t>(kk) * n + j0,
                  32 * sizeof(float));
    if constexpr (!Count) {
      for (int i0 = 0; i0 + R <= m; i0 += R)
        fp32_tile<R, false, false, false>(A + static_cast<std::size_t>(i0) * k, panel.data(),
                                   acc + static_cast<std::size_t>(i0) * n + j0, n, k, nullptr, nullptr);
    } else {
      float panel_min = __builtin_inff();
      std::uint64_t panel_addends = 0;
      for (int kk = 0; kk < k; ++kk) {
        std::uint32_t nonzero = 0;
        for (int j = 0; j < 32; ++j) {
          const float x = panel[static_cast<std::size_t>(kk) * 32 + j];
          nonzero += x != 0;
          panel_min = min_nonzero_magnitude(panel_min, x);
        }
        b_nonzero[static_cast<std::size_t>(kk)] = nonzero;
        panel_addends += static_cast<std::uint64_t>(a_nonzero[static_cast<std::size_t>(kk)]) * nonzero;
      }
      fast_lanes += static_cast<std::uint64_t>(m_whole) * 32 * static_cast<std::uint64_t>(k);
      fast_addends += panel_addends;
      for (int i0 = 0; i0 + R <= m; i0 += R) {
        const float* a_rows = A + static_cast<std::size_t>(i0) * k;
        float* out = acc + static_cast<std::size_t>(i0) * n + j0;
        float tile_min = __builtin_inff();
        for (int r = 0; r < R; ++r) tile_min = std::min(tile_min, row_min[static_cast<std::size_t>(i0 + r)]);
        const bool no_tiny_products = static_cast<double>(tile_min) * static_cast<double>(panel_min) >= 0x1p-149;
        Fp32TileCounts t;
        if (no_tiny_products && fp32_tile<R, true, false, Inexact>(a_rows, panel.data(), out, n, k, &t, nullptr)) {
          equal += t.equal;
          fast_inexact += t.inexact;
          continue;
        }
        // The exact step throughout; this tile's lanes and addends leave the fast ones.
        fp32_tile<R, true, true, Inexact>(a_rows, panel.data(), out, n, k, nullptr, &lanes);
        exact_steps += static_cast<std::uint64_t>(R) * 32 * static_cast<std::uint64_t>(k);
        fast_lanes -= static_cast<std::uint64_t>(R) * 32 * static_cast<std::uint64_t>(k);
        for (int kk = 0; kk < k; ++kk) {
          std::uint64_t rows_nonzero = 0;
          for (int r = 0; r < R; ++r) rows_nonzero += a_rows[static_cast<std::size_t>(r) * k + kk] != 0;
          fast_addends -= rows_nonzero * b_nonzero[static_cast<std::size_t>(kk)];
        }
        add_lanes(lanes, 0, *counters);  // per tile: a lane takes at most 2R per k step
        clear(lanes);
      }
    }
  }
  if constexpr (Count) {
    counters->elements += fast_lanes + exact_steps;
    counters->addends_nonzero += fast_addends;
    counters->swamped += equal - (fast_lanes - fast_addends);
    counters->inexact += fast_inexact;
  }
}

}  // namespace

TileCover fp16_accumulate_tiles_avx512(const float* A, const float* B, float* acc, int m, int n, int k,
                                       Counters* counters) {
  // Rows per tile, measured at 512^3 (counting): 2 and 8 are slower than 4.
  constexpr int R = 4;
  const int n_whole = n - n % 32, m_whole = m - m % R;
  if (counters) fp16_tiles<true, R>(A, B, acc, m, n_whole, n, k, counters);
  else fp16_tiles<false, R>(A, B, acc, m, n_whole, n, k, counters);
  return {m_whole, n_whole};
}

TileCover fp32_accumulate_tiles_avx512(const float* A, const float* B, float* acc, int m, int n, int k,
                                       Counters* counters, bool count_inexact) {
  // Rows per tile, measured at 512^3 and 1024^3 with the packed panel: 8 is
  // about as fast as 4, and 12 is slower.
  constexpr int R = 8;
  const int n_whole = n - n % 32, m_whole = m - m % R;
  if (counters && count_inexact) fp32_tiles<R, true, true>(A, B, acc, m, n_whole, n, k, counters);
  else if (counters) fp32_tiles<R, true, false>(A, B, acc, m, n_whole, n, k, counters);
  else fp32_tiles<R, false, false>(A, B, acc, m, n_whole, n, k, counters);
  return {m_whole, n_whole};
}

}  // namespace mpverify::emu::detail

#else
namespace mpverify::emu::detail {
TileCover fp16_accumulate_tiles_avx512(const float*, const float*, float*, int, int, int, Counters*) { return {0, 0}; }
TileCover fp32_accumulate_tiles_avx512(const float*, const float*, float*, int, int, int, Counters*, bool) {
  return {0, 0};
}
}  // namespace mpverify::emu::detail
#endif
