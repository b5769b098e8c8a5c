// The AVX-512 block scan of threshold_counter.h: bins, the split side list
// and the finite maximum for 16 float32 values per step. Compiled with a
// per-function target attribute, so the library still runs on CPUs without
// AVX-512 (ThresholdCounter checks cpu_has_avx512_scan at run time); its
// portable twin is detail::scan_block_portable, and the tests hold the two
// bit for bit.
#include "analysis/threshold_counter.h"

#include <stdexcept>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

// GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized (they start from
// _mm256_undefined_*, _mm512_undefined_*); the warnings are about the header, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mpverify::analysis {

bool cpu_has_avx512_scan() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("popcnt");
}

namespace detail {

__attribute__((target("avx512f,popcnt"))) std::size_t scan_block_f32_avx512(const std::byte* in, std::size_t m,
                                                                           const std::uint32_t* split_bits,
                                                                           std::uint16_t* bin, std::uint32_t* side,
                                                                           std::uint32_t& max_finite) {
  using C = ThresholdCounter<std::uint32_t>;
  static_assert(C::bins == 2048 && C::shift == 20, "the bitmap lookup below covers 64 words of 32 bins");
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  const __m512i zero_bin = _mm512_set1_epi32(static_cast<int>(C::bins));
  const __m512i low5 = _mm512_set1_epi32(31);
  const __m512i word_half = _mm512_set1_epi32(32);
  const __m512i one = _mm512_set1_epi32(1);
  // The split bitmap of bins 0..2047 in four registers; the zero bin's word
  // (64) is never consulted, its lanes being masked out below.
  const __m512i w0 = _mm512_loadu_si512(split_bits);
  const __m512i w1 = _mm512_loadu_si512(split_bits + 16);
  const __m512i w2 = _mm512_loadu_si512(split_bits + 32);
  const __m512i w3 = _mm512_loadu_si512(split_bits + 48);
  // Magnitudes are at most 0x7fffffff, so signed 32-bit compares order them.
  __m512i mx = _mm512_set1_epi32(static_cast<int>(max_finite));
  std::size_t k = 0, i = 0;
  for (; i + 16 <= m; i += 16) {
    const __m512i a = _mm512_and_si512(_mm512_loadu_si512(in + 4 * i), magnitude);
    const __mmask16 nonzero = _mm512_test_epi32_mask(a, a);
    const __m512i b = _mm512_mask_mov_epi32(zero_bin, nonzero, _mm512_srli_epi32(a, C::shift));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(bin + i), _mm512_cvtepi32_epi16(b));
    mx = _mm512_mask_max_epi32(mx, _mm512_cmplt_epi32_mask(a, inf), mx, a);
    const __m512i w = _mm512_srli_epi32(b, 5);
    const __m512i word = _mm512_mask_blend_epi32(_mm512_test_epi32_mask(w, word_half),
                                                 _mm512_permutex2var_epi32(w0, w, w1),
                                                 _mm512_permutex2var_epi32(w2, w, w3));
    const __m512i bit = _mm512_srlv_epi32(word, _mm512_and_si512(b, low5));
    const __mmask16 split = _mm512_mask_test_epi32_mask(nonzero, bit, one);
    _mm512_storeu_si512(side + k, _mm512_maskz_compress_epi32(split, a));
    k += static_cast<std::size_t>(__builtin_popcount(static_cast<unsigned>(split)));
  }
  std::uint32_t mx_scalar = static_cast<std::uint32_t>(_mm512_reduce_max_epi32(mx));
  k += scan_block_portable<std::uint32_t>(in + 4 * i, m - i, split_bits, bin + i, side + k, mx_scalar);
  max_finite = mx_scalar;
  return k;
}

namespace {

// The aligned scan with `Cuts` fraction cuts (a compile-time count, so the
// comparisons unroll): per 16 values, the bin from the exponent field and
// Cuts - 1 comparisons of the fraction field, the finite maximum, and the
// side list only when a vector holds a subnormal (rare: a predicted branch).
// The histogram increments of 16 bins (element j into table j % 4).
inline void count16(const std::uint16_t* bin, HistTables hist) {
#pragma GCC unroll 16
  for (std::size_t j = 0; j < 16; ++j) ++hist.counts[(j % 4) * hist.stride + bin[j]];
}

template <int Cuts>
__attribute__((target("avx512f,popcnt"))) std::size_t scan_aligned(const std::byte* in, std::size_t m,
                                                                   const std::uint32_t* cuts, int cut_log2,
                                                                   std::uint16_t* bin, HistTables hist,
                                                                   std::uint32_t* side, std::uint32_t& max_finite) {
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  const __m512i fraction_mask = _mm512_set1_epi32(0x7fffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  const __m512i min_normal = _mm512_set1_epi32(0x00800000);
  const __m512i one = _mm512_set1_epi32(1);
  const __m128i log2 = _mm_cvtsi32_si128(cut_log2);
  __m512i cut[Cuts];
  for (int c = 1; c < Cuts; ++c) cut[c] = _mm512_set1_epi32(static_cast<int>(cuts[c]));
  __m512i mx = _mm512_set1_epi32(static_cast<int>(max_finite));
  std::size_t k = 0, i = 0;
  for (; i + 16 <= m; i += 16) {
    // Two KiB ahead: the counting between blocks leaves the hardware
    // prefetcher idle, and the loads of the next block waited (measured: 8%
    // faster on a 256 MiB array; a prefetch of an unmapped page is dropped).
    _mm_prefetch(reinterpret_cast<const char*>(in + 4 * i) + 2048, _MM_HINT_T0);
    const __m512i a = _mm512_and_si512(_mm512_loadu_si512(in + 4 * i), magnitude);
    const __m512i fraction = _mm512_and_si512(a, fraction_mask);
    __m512i b = _mm512_sll_epi32(_mm512_srli_epi32(a, 23), log2);
#pragma GCC unroll 8
    for (int c = 1; c < Cuts; ++c) b = _mm512_mask_add_epi32(b, _mm512_cmpge_epu32_mask(fraction, cut[c]), b, one);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(bin + i), _mm512_cvtepi32_epi16(b));
    // The previous vector's increments: scalar loads and stores that run
    // beside this vector's work (this one's bins are counted next time round).
    if (i >= 16) count16(bin + i - 16, hist);
    mx = _mm512_mask_max_epi32(mx, _mm512_cmplt_epi32_mask(a, inf), mx, a);
    const __mmask16 subnormal = _mm512_mask_cmplt_epi32_mask(_mm512_test_epi32_mask(a, a), a, min_normal);
    if (__builtin_expect(subnormal != 0, 0)) {
      _mm512_storeu_si512(side + k, _mm512_maskz_compress_epi32(subnormal, a));
      k += static_cast<std::size_t>(__builtin_popcount(static_cast<unsigned>(subnormal)));
    }
  }
  if (i >= 16) count16(bin + i - 16, hist);
  std::uint32_t mx_scalar = static_cast<std::uint32_t>(_mm512_reduce_max_epi32(mx));
  // the tail: i is a multiple of 16, so element i + j still goes to table j % 4
  k += scan_block_aligned_portable(in + 4 * i, m - i, cuts, Cuts, cut_log2, bin + i, hist, side + k, mx_scalar);
  max_finite = mx_scalar;
  return k;
}

}  // namespace

std::size_t scan_block_aligned_f32_avx512(const std::byte* in, std::size_t m, const std::uint32_t* cuts,
                                          int cut_count, int cut_log2, std::uint16_t* bin, HistTables hist,
                                          std::uint32_t* side, std::uint32_t& max_finite) {
  switch (cut_count) {
    case 2: return scan_aligned<2>(in, m, cuts, cut_log2, bin, hist, side, max_finite);
    case 3: return scan_aligned<3>(in, m, cuts, cut_log2, bin, hist, side, max_finite);
    case 4: return scan_aligned<4>(in, m, cuts, cut_log2, bin, hist, side, max_finite);
    case 5: return scan_aligned<5>(in, m, cuts, cut_log2, bin, hist, side, max_finite);
    case 6: return scan_aligned<6>(in, m, cuts, cut_log2, bin, hist, side, max_finite);
    case 7: return scan_aligned<7>(in, m, cuts, cut_log2, bin, hist, side, max_finite);
    case 8: return scan_aligned<8>(in, m, cuts, cut_log2, bin, hist, side, max_finite);
    default: throw std::invalid_argument("scan_block_aligned_f32_avx512: cut_count must be 2..8");
  }
}

}  // namespace detail

}  // namespace mpverify::analysis

#else

namespace mpverify::analysis {

bool cpu_has_avx512_scan() { return false; }

namespace detail {

std::size_t scan_block_f32_avx512(const std::byte*, std::size_t, const std::uint32_t*, std::uint16_t*, std::uint32_t*,
                                  std::uint32_t&) {
  throw std::logic_error("scan_block_f32_avx512: not an x86-64 build");
}

std::size_t scan_block_aligned_f32_avx512(const std::byte*, std::size_t, const std::uint32_t*, int, int,
                                          std::uint16_t*, HistTables, std::uint32_t*, std::uint32_t&) {
  throw std::logic_error("scan_block_aligned_f32_avx512: not an x86-64 build");
}

}  // namespace detail

}  // namespace mpverify::analysis

#endif
