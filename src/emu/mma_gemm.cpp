// mma_gemm (mma_gemm.h): chooses the vector kernel (AVX-512 or AVX2), decides which elements it may give
// (mma_gemm_x86.cpp states the conditions under which the float lanes of either kernel are the scalar
// model's arithmetic), decodes the operands for it, hands every other element to the scalar model, and
// assembles the counts.
#include "emu/mma_gemm.h"
#include "formats/fp_environment.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <climits>
#include <cmath>
#include <optional>

#include "emu/mma_gemm_simd.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"

namespace mpverify::emu {

namespace {

using detail::kMmaLanes;
using detail::kMmaRows;
using detail::MmaKernelModel;
using detail::MmaPanels;

// The scalar model on element (i, j): A's row and B's column as format bits, zero-padded to K.
struct ScalarElements {
  const ops::GemmShape& s;
  std::span<const float> A, B;
  const MmaModel& m;
  bool swapped;
  int promotion_interval;
  std::size_t K;

  float operator()(int i, int j, MmaCounts& counts) const {
    const formats::Format& fa = swapped ? m.b : m.a;
    const formats::Format& fb = swapped ? m.a : m.b;
    std::vector<std::uint32_t> row(K, 0), column(K, 0);
    formats::Flags exact;
    const formats::RoundingContext rne{};
    for (int kk = 0; kk < s.k; ++kk) {
      row[kk] = formats::from_float(fa, A[static_cast<std::size_t>(i) * s.k + kk], rne, exact);
      column[kk] = formats::from_float(fb, B[static_cast<std::size_t>(kk) * s.n + j], rne, exact);
    }
    const std::uint32_t d = swapped ? mma_dot(m, column, row, 0, promotion_interval, &counts)
                                    : mma_dot(m, row, column, 0, promotion_interval, &counts);
    return formats::to_float(m.c, d, exact);
  }
};

// The kernel's form of the model, where the kernel's float and int32 lanes hold its arithmetic exactly
// (mma_gemm_x86.cpp); nullopt for the scalar model (Hopper's FP8 mma.sync, wide operands).
std::optional<MmaKernelModel> kernel_model(const MmaModel& m, int promotion_interval, std::size_t K) {
  if (m.fp8_through_fp16 || K >= (std::size_t{1} << 26)) return std::nullopt;
  if (m.a.precision() + m.b.precision() > 24) return std::nullopt;  // products exact in float
  // Promotion: as mma_dot takes it (a multiple of k, an fp32 output); anything else is its error to give.
  if (promotion_interval < 0 || (promotion_interval > 0 && (promotion_interval % m.k != 0 ||
                                                            m.output == MmaOutput::fp16_nearest_even)))
    return std::nullopt;
  MmaKernelModel k;
  k.fused_k = m.split_halves ? m.k / 2 : m.k;
  k.fraction_bits = m.fraction_bits;
  k.output = m.output;
  k.c_emin = m.c.emin();
  k.promotion = promotion_interval;
  // Each of the two int32 sums: at most ceil(fused_k / 2) products below 2^(F + 2) and c below 2^(F + 1).
  const double half_sum = std::ldexp((k.fused_k + 1) / 2, m.fraction_bits + 2) + std::ldexp(1, m.fraction_bits + 1);
  if (m.fraction_bits + 2 > 29 || half_sum >= 0x1p31) return std::nullopt;
  // fp16 output: the exact result, a multiple of 2^(E - F) with E at least a non-zero term's exponent, must
  // be a normal float for the rounding to odd.
  const bool fp16 = m.output == MmaOutput::fp16_nearest_even;
  if (fp16 && std::min(m.a.emin() + m.b.emin(), m.c.emin()) - m.fraction_bits < -126) return std::nullopt;
  return k;
}

// The exponents of an operand's non-zero finite values: the values' own (floor of log2) and the model's.
struct Range {
  int low = INT_MAX, high = INT_MIN, model_high = INT_MIN;
  void add(int value_exponent, int model_exponent) {
    low = std::min(low, value_exponent);
    high = std::max(high, value_exponent);
    model_high = std::max(model_high, model_exponent);
  }
};

// A finite non-zero float's exponents from its bits (libm's ilogb and frexp cost more than the kernel's
// share of an operand): value = odd integer * 2^low, 2^value <= |value| < 2^(value + 1).
struct Exponents {
  int value, low;
  explicit Exponents(float v) {
    const auto bits = std::bit_cast<std::uint32_t>(v);
    const int field = static_cast<int>(bits >> 23 & 0xFF);
    const std::uint32_t fraction = bits & 0x7FFFFF;
    if (field == 0) {  // subnormal: fraction * 2^-149
      value = 31 - std::countl_zero(fraction) - 149;
      low = std::countr_zero(fraction) - 149;
    } else {
      value = field - 127;
      low = value - 23 + std::countr_zero(fraction | 0x800000);
    }
  }
};

// One operand into the panels (MmaPanels): v finite, stored at value[at] and at e16[at16] and l16[at16] (and
// at16 + 1 for B, whose columns are there twice); vmin the block's least value exponent so far.
void put(float v, int emin, std::size_t at, std::size_t at16, MmaPanels& p, bool a_side, std::int32_t& vmin,
         Range& range) {
  if (v == 0) return;  // the defaults: 0, -126, kZeroLowBit
  const Exponents x(v);
  const int model = std::max(x.value, emin);  // mma_model.h: a subnormal has the minimum normal exponent
  vmin = std::min(vmin, x.value);
  range.add(x.value, model);
  if (a_side) {
    p.a_value[at] = v;
    p.a_e16[at16] = static_cast<std::int16_t>(model);
    p.a_l16[at16] = static_cast<std::int16_t>(x.low);
  } else {
    p.b_value[at] = v;
    p.b_e16[at16] = p.b_e16[at16 + 1] = static_cast<std::int16_t>(model);
    p.b_l16[at16] = p.b_l16[at16 + 1] = static_cast<std::int16_t>(x.low);
  }
}

// The panels of A and B; special[i] (rows) and special[m + j] (columns) mark a NaN or infinite operand.
MmaPanels decode(const ops::GemmShape& s, std::span<const float> A, std::span<const float> B,
                 const formats::Format& fa, const formats::Format& fb, int K, int fused_k, std::vector<bool>& special,
                 Range& ra, Range& rb) {
  MmaPanels p;
  p.rows = (s.m + kMmaRows - 1) / kMmaRows * kMmaRows;
  p.columns = (s.n + kMmaLanes - 1) / kMmaLanes * kMmaLanes;
  p.depth = K;
  p.fused_k = fused_k;
  const std::size_t a_size = static_cast<std::size_t>(p.rows) * K, b_size = static_cast<std::size_t>(K) * p.columns;
  p.a_value.assign(a_size, 0.0f);
  p.a_e16.assign(a_size, -126);
  p.a_l16.assign(a_size, detail::kZeroLowBit);
  p.a_vmin.assign(static_cast<std::size_t>(p.rows) * p.blocks(), detail::kZeroValueExponent);
  p.b_value.assign(b_size, 0.0f);
  p.b_e16.assign(2 * b_size, -126);
  p.b_l16.assign(2 * b_size, detail::kZeroLowBit);
  p.b_vmin.assign(static_cast<std::size_t>(p.columns) * p.blocks(), detail::kZeroValueExponent);
  special.assign(static_cast<std::size_t>(s.m + s.n), false);
  for (int i = 0; i < s.m; ++i)
    for (int kk = 0; kk < s.k; ++kk) {
      const float v = A[static_cast<std::size_t>(i) * s.k + kk];
      if (!std::isfinite(v)) special[i] = true;
      else put(v, fa.emin(), static_cast<std::size_t>(i) * K + kk, p.a16_at(i, kk), p, true,
               p.a_vmin[static_cast<std::size_t>(i) * p.blocks() + static_cast<unsigned>(kk) / fused_k], ra);
    }
  // B in the panels' order (tile, kk, lane): scattered stores to 64 tiles' panels per row of B cost more
  // than this walk's reads of 16 floats per row.
  for (int tile = 0; tile * kMmaLanes < s.n; ++tile)
    for (int kk = 0; kk < s.k; ++kk) {
      const std::size_t vmin_at = (static_cast<std::size_t>(tile) * p.blocks() + kk / fused_k) * kMmaLanes;
      for (int j = tile * kMmaLanes; j < std::min(s.n, (tile + 1) * kMmaLanes); ++j) {
        const float v = B[static_cast<std::size_t>(kk) * s.n + j];
        const std::size_t at = p.b_at(kk, j);
        if (!std::isfinite(v)) special[s.m + j] = true;
        else put(v, fb.emin(), at, 2 * at, p, false, p.b_vmin[vmin_at + j % kMmaLanes], rb);
      }
    }
  return p;
}

// Whether every product and every aligned product is a float the kernel holds (mma_gemm_x86.cpp): products
// normal, and aligned non-zero products at least 2^-149 with E at most the largest product exponent or c's,
// c being at most twice the sum of K products below 2^(high_a + high_b + 2).
bool ranges_fit(const Range& ra, const Range& rb, int fraction_bits, std::size_t K) {
  if (ra.low == INT_MAX || rb.low == INT_MAX) return true;  // no non-zero product
  int log2_k = 0;
  while ((std::size_t{1} << log2_k) < K) ++log2_k;
  const int largest_e = std::max(ra.model_high + rb.model_high, ra.high + rb.high + 3 + log2_k);
  return ra.low + rb.low >= -126 && ra.high + rb.high <= 125 &&
         ra.low + rb.low + fraction_bits - largest_e >= -149;
}

// Element (i, j)'s zero products (a zero factor, the padding included), on the panels.
std::uint64_t zero_products(const MmaPanels& p, int i, int j) {
  std::uint64_t zeros = 0;
  for (int kk = 0; kk < p.depth; ++kk)
    zeros += p.a_value[static_cast<std::size_t>(i) * p.depth + kk] == 0 ||
             p.b_value[p.b_at(kk, j)] == 0;
  return zeros;
}

// The zero products of every element: per kk, all pairs but those of a non-zero a and a non-zero b. The
// panels are walked in their storage order (a column walk of A's panel would miss the cache at every step).
std::uint64_t all_zero_products(const MmaPanels& p, int m, int n) {
  std::vector<std::uint64_t> nonzero_a(static_cast<std::size_t>(p.depth), 0), nonzero_b(nonzero_a.size(), 0);
  for (int i = 0; i < m; ++i)
    for (int kk = 0; kk < p.depth; ++kk) nonzero_a[kk] += p.a_value[static_cast<std::size_t>(i) * p.depth + kk] != 0;
  for (int tile = 0; tile * kMmaLanes < n; ++tile)
    for (int kk = 0; kk < p.depth; ++kk)
      for (int j = tile * kMmaLanes; j < std::min(n, (tile + 1) * kMmaLanes); ++j) nonzero_b[kk] += p.b_value[p.b_at(kk, j)] != 0;
  std::uint64_t zeros = 0;
  for (int kk = 0; kk < p.depth; ++kk) zeros += static_cast<std::uint64_t>(m) * n - nonzero_a[kk] * nonzero_b[kk];
  return zeros;
}

// The lanes the kernel is to give: real elements whose row and column have no NaN or infinite operand.
std::vector<std::uint16_t> kernel_lanes(const MmaPanels& p, int m, int n, const std::vector<bool>& special) {
  const int tiles = p.columns / kMmaLanes;
  std::vector<std::uint16_t> keep(static_cast<std::size_t>(p.rows) * tiles, 0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n && !special[i]; ++j)
      if (!special[m + j]) keep[static_cast<std::size_t>(i) * tiles + j / kMmaLanes] |= 1u << (j % kMmaLanes);
  return keep;
}

// force_mma_path's choice (tests and benchmarks); automatic otherwise.
std::atomic<detail::MmaPath> forced_path{detail::MmaPath::automatic};

using TileKernel = void (*)(const MmaPanels&, const MmaKernelModel&, int, int, float*, std::uint16_t*,
                            detail::MmaKernelCounts&);

// The kernel of this call, or nullptr for the scalar model: the widest the CPU has, unless a path is forced.
TileKernel tile_kernel(bool simd) {
  using detail::MmaPath;
  const MmaPath forced = forced_path.load(std::memory_order_relaxed);
  if (!simd || forced == MmaPath::scalar) return nullptr;
  const bool avx512 = forced != MmaPath::avx2 && detail::mma_path_available(MmaPath::avx512);
  if (avx512) return detail::mma_tile_avx512;
  if (forced != MmaPath::avx512 && detail::mma_path_available(MmaPath::avx2)) return detail::mma_tile_avx2;
  return nullptr;
}

}  // namespace

namespace detail {

bool mma_path_available(MmaPath path) {
  switch (path) {
    case MmaPath::automatic:
    case MmaPath::scalar: return true;
    case MmaPath::avx2: return cpu_has_avx2_mma();
    case MmaPath::avx512: return cpu_has_avx512_mma();
  }
  return false;
}

MmaPath force_mma_path(MmaPath path) { return forced_path.exchange(path); }

}  // namespace detail

std::size_t mma_gemm(const ops::GemmShape& s, std::span<const float> A, std::span<const float> B, std::span<float> acc,
              const MmaModel& m, bool swapped, int promotion_interval, bool simd, MmaCounts& counts) {
  formats::check_fp_environment("emu::mma_gemm");
  const std::size_t K = (static_cast<std::size_t>(s.k) + m.k - 1) / m.k * m.k;
  const ScalarElements scalar{s, A, B, m, swapped, promotion_interval, K};
  const std::optional<MmaKernelModel> km = kernel_model(m, promotion_interval, K);
  std::vector<bool> special;
  Range ra, rb;
  const TileKernel kernel = km ? tile_kernel(simd) : nullptr;
  const MmaPanels p = kernel
                          ? decode(s, A, B, swapped ? m.b : m.a, swapped ? m.a : m.b, static_cast<int>(K), km->fused_k,
                                   special, ra, rb)
                          : MmaPanels{};
  if (p.depth == 0 || !ranges_fit(ra, rb, m.fraction_bits, K)) {
    for (int i = 0; i < s.m; ++i)
      for (int j = 0; j < s.n; ++j) acc[static_cast<std::size_t>(i) * s.n + j] = scalar(i, j, counts);
    return 0;
  }
  std::vector<std::uint16_t> keep = kernel_lanes(p, s.m, s.n, special);
  const int tiles = p.columns / kMmaLanes;
  // Column tiles outside, rows inside: a tile's panel of B (depth x 16) stays in the cache for every row.
  std::vector<float> d(static_cast<std::size_t>(p.rows) * p.columns);
  detail::MmaKernelCounts kc;
  for (int tile = 0; tile < tiles; ++tile)
    for (int row = 0; row < p.rows; row += kMmaRows) kernel(p, *km, row, tile, d.data(), keep.data(), kc);
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j)
      if (keep[static_cast<std::size_t>(i) * tiles + j / kMmaLanes] >> (j % kMmaLanes) & 1)
        acc[static_cast<std::size_t>(i) * s.n + j] = d[static_cast<std::size_t>(i) * p.columns + j];
  // The elements left to the scalar model, and the zero products of those the kernel gave.
  std::uint64_t kernel_elements = 0, zeros = all_zero_products(p, s.m, s.n);
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) {
      if (keep[static_cast<std::size_t>(i) * tiles + j / kMmaLanes] >> (j % kMmaLanes) & 1) {
        ++kernel_elements;
        continue;
      }
      zeros -= zero_products(p, i, j);
      acc[static_cast<std::size_t>(i) * s.n + j] = scalar(i, j, counts);
    }
  counts.terms += kc.c_terms + kernel_elements * K - zeros;
  counts.terms_truncated += kc.c_truncated + kc.products_truncated;
  counts.terms_shifted_out += kc.c_shifted_out + kc.products_shifted_out;
  counts.roundings += kernel_elements * (K / static_cast<std::size_t>(km->fused_k));
  counts.roundings_inexact += kc.inexact;
  return kernel_elements;
}

}  // namespace mpverify::emu
