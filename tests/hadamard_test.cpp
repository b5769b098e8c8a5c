// The random Hadamard transform of NVIDIA's NVFP4 recipe (src/emu/hadamard.h) against what is written here
// from Transformer Engine's source (NVIDIA/TransformerEngine d0067d0da6cb01811b8072a7d304f0e00344ce2b):
//  - transformer_engine/pytorch/tensor/nvfp4_tensor.py:37-46 get_sign_from_vector (the mask), 49-59
//    get_wgrad_sign_vector (the signs), 62-90 get_hadamard_matrix (the literal 16x16 table, lines 69-84, times
//    1/sqrt(16)), 94-103 get_rht_matrix (sign_matrix @ H);
//  - common/hadamard_transform/hadamard_transform_utils.cuh:137-170: the kernels' B fragment, entry (k = c,
//    n = r) = copysign(0.25, ((mask >> c) ^ popcount(r & c)) << 31), or (mask >> r) for the inverse;
//  - pytorch/custom_recipes/reference_nvfp4.py:421-447 _apply_rht: x.view(-1, 16) @ (H * 1/sqrt(16)), H in
//    the input's dtype (bf16), and 870-874: the column-wise copy is _apply_rht(tensor.t()).
// Tolerances are derived where they are used; each check has a case beside it that makes it fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "emu/hadamard.h"

namespace {

using mpverify::emu::kRhtNoSigns;
using mpverify::emu::kTeWgradSigns;
using mpverify::emu::RhtAccumulation;
using mpverify::emu::RhtAxis;
using mpverify::emu::RhtOptions;
using mpverify::emu::RhtOutput;
using mpverify::emu::RhtSigns;
using mpverify::emu::random_hadamard_transform;
using mpverify::emu::rht_matrix;
using mpverify::emu::rht_sign_mask;
using mpverify::emu::rht_signs_from_mask;

constexpr std::size_t N = 16;

// nvfp4_tensor.py:69-84, as written there.
constexpr int kTeHadamardTable[N][N] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1},
    {1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1},
    {1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1},
    {1, 1, 1, 1, -1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1},
    {1, -1, 1, -1, -1, 1, -1, 1, 1, -1, 1, -1, -1, 1, -1, 1},
    {1, 1, -1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1, 1, 1},
    {1, -1, -1, 1, -1, 1, 1, -1, 1, -1, -1, 1, -1, 1, 1, -1},
    {1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1},
    {1, -1, 1, -1, 1, -1, 1, -1, -1, 1, -1, 1, -1, 1, -1, 1},
    {1, 1, -1, -1, 1, 1, -1, -1, -1, -1, 1, 1, -1, -1, 1, 1},
    {1, -1, -1, 1, 1, -1, -1, 1, -1, 1, 1, -1, -1, 1, 1, -1},
    {1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 1, 1, 1},
    {1, -1, 1, -1, -1, 1, -1, 1, -1, 1, -1, 1, 1, -1, 1, -1},
    {1, 1, -1, -1, -1, -1, 1, 1, -1, -1, 1, 1, 1, 1, -1, -1},
    {1, -1, -1, 1, -1, 1, 1, -1, -1, 1, 1, -1, 1, -1, -1, 1},
};

std::uint32_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

// fp32 -> bf16, nearest-even, written here from the bit layout (finite inputs): add half a bf16 ulp,
// less one unless the kept last bit is odd, and clear the low 16 bits.
float bf16_rne(float v) {
  const std::uint32_t u = bits(v);
  return std::bit_cast<float>((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}

// Random floats with `precision` significant bits, exponents in [lo, hi), random signs.
std::vector<float> random_values(std::size_t n, int lo, int hi, int precision, std::mt19937& rng) {
  std::uniform_int_distribution<int> exponent(lo, hi - 1);
  std::uniform_int_distribution<std::uint32_t> fraction(0, (1u << (precision - 1)) - 1);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> v(n);
  for (float& e : v) {
    const double significand = 1.0 + std::ldexp(static_cast<double>(fraction(rng)), 1 - precision);
    const double value = std::ldexp(significand, exponent(rng));
    e = static_cast<float>(negative(rng) ? -value : value);  // exact: precision <= 24, normal range
  }
  return v;
}

std::vector<float> transpose(const std::vector<float>& v, std::size_t rows, std::size_t cols) {
  std::vector<float> t(v.size());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) t[c * rows + r] = v[r * cols + c];
  return t;
}

// TE's reference _apply_rht (reference_nvfp4.py:437-447) on a row-major rows x cols tensor, blocks along
// its rows: x_mat = x.view(-1, 16); out = x_mat @ (sign_mat @ H * 0.25) (the transpose of that matrix for
// the inverse). Sums in double: exact for the data given to it (see the callers), then one rounding.
std::vector<float> te_reference(const std::vector<float>& x, const RhtSigns& s, bool inverse, bool to_bf16) {
  double transform[N][N];
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = 0; j < N; ++j) {
      const double entry = s[i] * kTeHadamardTable[i][j] * 0.25;
      if (inverse) {
        transform[j][i] = entry;
      } else {
        transform[i][j] = entry;
      }
    }
  std::vector<float> out(x.size());
  for (std::size_t block = 0; block < x.size() / N; ++block)
    for (std::size_t j = 0; j < N; ++j) {
      double sum = 0.0;
      for (std::size_t i = 0; i < N; ++i) sum += static_cast<double>(x[block * N + i]) * transform[i][j];
      const float f = static_cast<float>(sum);
      out[block * N + j] = to_bf16 ? bf16_rne(f) : f;
    }
  return out;
}

std::vector<float> transformed(std::vector<float> x, std::size_t rows, std::size_t cols, RhtAxis axis,
                               const RhtSigns& s, const RhtOptions& o) {
  random_hadamard_transform(x, rows, cols, axis, s, o);
  return x;
}

RhtSigns random_signs(std::mt19937& rng) {
  return rht_signs_from_mask(static_cast<std::uint16_t>(rng() & 0xffffu));
}

TEST(RhtSigns, TransformerEngineVectorAndMask) {
  // nvfp4_tensor.py:56, as written there.
  const int te_vector[N] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
  int te_mask = 0;  // get_sign_from_vector: mask |= (v == -1) << i
  for (std::size_t i = 0; i < N; ++i) {
    EXPECT_EQ(kTeWgradSigns[i], te_vector[i]) << "i = " << i;
    te_mask |= (te_vector[i] == -1 ? 1 : 0) << i;
  }
  EXPECT_EQ(te_mask, 0xD7E8);  // bits 3, 5-10, 12, 14, 15, by hand
  EXPECT_EQ(rht_sign_mask(kTeWgradSigns), 0xD7E8);
  EXPECT_EQ(rht_sign_mask(kRhtNoSigns), 0);
  for (std::uint32_t mask = 0; mask < 0x10000u; ++mask)
    ASSERT_EQ(static_cast<std::uint32_t>(rht_sign_mask(rht_signs_from_mask(static_cast<std::uint16_t>(mask)))), mask);
}

TEST(RhtSigns, RefusesAnEntryThatIsNotPlusOrMinusOne) {
  RhtSigns bad = kTeWgradSigns;
  bad[3] = 0;
  try {
    rht_sign_mask(bad);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("signs[3] is 0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rht_matrix(bad), std::invalid_argument);
  std::vector<float> x(16, 1.0f);
  EXPECT_THROW(random_hadamard_transform(x, 1, 16, RhtAxis::within_rows, bad), std::invalid_argument);
}

// get_rht_matrix: sign_matrix @ H(table) * 0.25, the signs scaling the rows.
TEST(RhtMatrix, EqualsTransformerEnginesTableTimesTheSigns) {
  std::mt19937 rng(11);
  std::vector<RhtSigns> cases{kTeWgradSigns, kRhtNoSigns};
  for (int k = 0; k < 20; ++k) cases.push_back(random_signs(rng));
  for (const RhtSigns& s : cases) {
    const auto m = rht_matrix(s);
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t j = 0; j < N; ++j) {
        const float expected = static_cast<float>(s[i] * kTeHadamardTable[i][j]) * 0.25f;
        ASSERT_EQ(bits(m[i * N + j]), bits(expected)) << "mask " << rht_sign_mask(s) << " (" << i << ", " << j << ")";
      }
  }
}

// The kernels' B fragment (hadamard_transform_utils.cuh:146-161, kInverse false): entry at (k = c, n = r)
// has sign bit ((mask >> c) ^ popcount(r & c)) & 1 and magnitude 0.25 (k16x16HadamardScale, line 21). The
// MMA computes out[n] = sum_k v[k] B[k][n], so M[k][n] must equal it: every mask.
TEST(RhtMatrix, EqualsTheKernelsFragmentForEveryMask) {
  for (std::uint32_t mask = 0; mask < 0x10000u; ++mask) {
    const auto m = rht_matrix(rht_signs_from_mask(static_cast<std::uint16_t>(mask)));
    for (std::uint32_t r = 0; r < N; ++r)
      for (std::uint32_t c = 0; c < N; ++c) {
        const std::uint32_t sign = ((mask >> c) ^ static_cast<std::uint32_t>(std::popcount(r & c))) & 1u;
        const float fragment = std::copysign(0.25f, sign != 0 ? -1.0f : 1.0f);
        ASSERT_EQ(bits(m[c * N + r]), bits(fragment)) << "mask " << mask << " k " << c << " n " << r;
      }
  }
}

// M M^T = M^T M = I exactly: the entries are +-1/16 after multiplication, 16 of them sum exactly in double.
TEST(RhtMatrix, IsOrthogonalExactly) {
  std::mt19937 rng(12);
  std::vector<RhtSigns> cases{kTeWgradSigns, kRhtNoSigns};
  for (int k = 0; k < 50; ++k) cases.push_back(random_signs(rng));
  for (const RhtSigns& s : cases) {
    const auto m = rht_matrix(s);
    for (std::size_t a = 0; a < N; ++a)
      for (std::size_t b = 0; b < N; ++b) {
        double rows_dot = 0.0;
        double cols_dot = 0.0;
        for (std::size_t k = 0; k < N; ++k) {
          rows_dot += static_cast<double>(m[a * N + k]) * m[b * N + k];
          cols_dot += static_cast<double>(m[k * N + a]) * m[k * N + b];
        }
        ASSERT_EQ(rows_dot, a == b ? 1.0 : 0.0) << "M M^T (" << a << ", " << b << ")";
        ASSERT_EQ(cols_dot, a == b ? 1.0 : 0.0) << "M^T M (" << a << ", " << b << ")";
      }
  }
}

// Bit for bit against the transcription of TE's reference on random fp32 data. Its double sums are exact
// here: the elements are 24-bit values in [2^-8, 2^8), each product +-x/4 a multiple of 2^-33 (x's last
// bit 2^-31, over 4) below 2^6, so every partial sum is a multiple of 2^-33 below 2^10: 43 bits < 53. Both
// axes (within_columns: the tensor transposed, transformed as TE transforms tensor.t(), transposed back),
// the forward and inverse matrices, both outputs, TE's signs and random ones.
TEST(RhtTransform, MatchesTransformerEnginesReferenceBitForBit) {
  std::mt19937 rng(13);
  const std::size_t rows = 48;
  const std::size_t cols = 32;
  for (const RhtSigns& s : {kTeWgradSigns, kRhtNoSigns, random_signs(rng)})
    for (const bool inverse : {false, true})
      for (const RhtOutput out : {RhtOutput::fp32, RhtOutput::bf16}) {
        const RhtOptions o{RhtAccumulation::exact, out, inverse};
        const bool to_bf16 = out == RhtOutput::bf16;
        const std::vector<float> x = random_values(rows * cols, -8, 8, 24, rng);
        const auto along_rows = transformed(x, rows, cols, RhtAxis::within_rows, s, o);
        const auto expected_rows = te_reference(x, s, inverse, to_bf16);
        const auto along_columns = transformed(x, rows, cols, RhtAxis::within_columns, s, o);
        const auto expected_columns =
            transpose(te_reference(transpose(x, rows, cols), s, inverse, to_bf16), cols, rows);
        for (std::size_t e = 0; e < x.size(); ++e) {
          ASSERT_EQ(bits(along_rows[e]), bits(expected_rows[e])) << "within_rows, element " << e;
          ASSERT_EQ(bits(along_columns[e]), bits(expected_columns[e])) << "within_columns, element " << e;
        }
        EXPECT_NE(along_rows, along_columns);  // the axes differ on this data
      }
}

// One block along a row, no signs: out[j] = sum_i x[i] (-1)^popcount(i & j) / 4.
std::vector<float> one_block(std::vector<float> block, const RhtOptions& o) {
  block.resize(N, 0.0f);
  random_hadamard_transform(block, 1, N, RhtAxis::within_rows, kRhtNoSigns, o);
  return block;
}

// Sums that double cannot hold: the result is the exact sum rounded once, worked out by hand. A plain
// double sum gives 0 for the first (4 + 2^-22 is exact, 2^-98 is lost, then 2^100 - 2^100).
TEST(RhtTransform, ExactSumRoundsOnceWhereDoubleWouldNot) {
  const RhtOptions o{RhtAccumulation::exact, RhtOutput::fp32, false};
  const float big = 0x1p100f;  // at i = 4 and i = 6: the same sign in columns 0 and 1, so they cancel there
  // out[0] = (4 + 4 * 2^-24 + 4 * 2^-100 + 2^100 - 2^100) / 4 = 1 + 2^-24 + 2^-100: above the midpoint
  // between 1 and 1 + 2^-23, so 1 + 2^-23.
  auto y = one_block({4.0f, 0x1p-22f, 0x1p-98f, 0.0f, big, 0.0f, -big}, o);
  EXPECT_EQ(bits(y[0]), bits(1.0f + 0x1p-23f));
  // out[1] (signs + - + - ...) = (4 - 4 * 2^-24 + 4 * 2^-100 + 2^100 - 2^100) / 4 = 1 - 2^-24 + 2^-100:
  // 1 - 2^-24 is a float (spacing 2^-24 below 1), the rest is far below half its ulp.
  EXPECT_EQ(bits(y[1]), bits(1.0f - 0x1p-24f));
  // The exact midpoint 1 + 2^-24 ties to even (1); just below it (- 2^-100) rounds down to 1 too.
  EXPECT_EQ(bits(one_block({4.0f, 0x1p-22f, 0.0f, 0.0f, big, 0.0f, -big}, o)[0]), bits(1.0f));
  EXPECT_EQ(bits(one_block({4.0f, 0x1p-22f, -0x1p-98f, 0.0f, big, 0.0f, -big}, o)[0]), bits(1.0f));
  // The midpoint 1 + 3 * 2^-24 between 1 + 2^-23 and 1 + 2^-22 ties to the even one above; negative here,
  // whose exact sum has 64 zero low bits (negating it carries out of the lowest limb).
  EXPECT_EQ(bits(one_block({-4.0f, -3 * 0x1p-22f, 0.0f, 0.0f, -big, 0.0f, big}, o)[0]), bits(-(1.0f + 0x1p-22f)));
  // Negated: the negatives.
  EXPECT_EQ(bits(one_block({-4.0f, -0x1p-22f, -0x1p-98f, 0.0f, -big, 0.0f, big}, o)[0]), bits(-(1.0f + 0x1p-23f)));
  // A negative partial sum turning positive: the carry runs through every limb of the exact sum (and the
  // borrow, negated). (2^-100 - 2^-149) / 4 = 2^-102 (1 - 2^-49) rounds to 2^-102.
  EXPECT_EQ(bits(one_block({-0x1p-149f, 0x1p-100f, 0.0f, 0.0f, big, 0.0f, -big}, o)[0]), bits(0x1p-102f));
  EXPECT_EQ(bits(one_block({0x1p-149f, -0x1p-100f, 0.0f, 0.0f, big, 0.0f, -big}, o)[0]), bits(-0x1p-102f));
  // Below fp32's subnormals: 2^-149 / 4 = 2^-151 rounds to +0; 3 * 2^-149 / 4 to 2^-149.
  EXPECT_EQ(bits(one_block({0x1p-149f}, o)[0]), bits(0.0f));
  EXPECT_EQ(bits(one_block({3 * 0x1p-149f}, o)[0]), bits(0x1p-149f));
  // An exact zero is +0 (the tensor core's zero), also from -0 inputs.
  EXPECT_EQ(bits(one_block({-0.0f, -0.0f}, o)[0]), bits(0.0f));
  EXPECT_EQ(bits(one_block({2.0f, -2.0f}, o)[0]), bits(0.0f));
}

// Random blocks that double cannot sum: 14 elements as in the bit-for-bit test (24-bit values in
// [2^-8, 2^8): their sum in double is exact) and 2^100, -2^100 at random places p, q. In column j the giants
// give 2^100 (M[p][j] - M[q][j]): 0 where the two entries agree, and then the result is the small sum
// rounded once; +-2^99 where they differ, and then the result is +-2^99, the small sum (below 2^10) being far
// below half an fp32 ulp of 2^99 (2^75).
TEST(RhtTransform, ExactSumOnRandomBlocksWithCancellingGiants) {
  std::mt19937 rng(18);
  std::uniform_int_distribution<std::size_t> place(0, N - 1);
  const RhtOptions o{RhtAccumulation::exact, RhtOutput::fp32, false};
  const auto m = rht_matrix(kTeWgradSigns);
  int cancelled = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<float> v = random_values(N, -8, 8, 24, rng);
    const std::size_t p = place(rng);
    std::size_t q = place(rng);
    while (q == p) q = place(rng);
    v[p] = 0x1p100f;
    v[q] = -0x1p100f;
    const auto y = transformed(v, 1, N, RhtAxis::within_rows, kTeWgradSigns, o);
    for (std::size_t j = 0; j < N; ++j) {
      const double giants = 0x1p100 * (static_cast<double>(m[p * N + j]) - m[q * N + j]);
      double small = 0.0;
      for (std::size_t i = 0; i < N; ++i)
        if (i != p && i != q) small += static_cast<double>(v[i]) * m[i * N + j];
      const float expected = static_cast<float>(giants != 0.0 ? giants : small);
      cancelled += giants == 0.0 ? 1 : 0;
      ASSERT_EQ(bits(y[j]), bits(expected)) << "trial " << trial << " column " << j;
    }
  }
  EXPECT_GT(cancelled, 10000);  // about half of the 32000 columns
}

TEST(RhtTransform, NonFiniteInputsFollowIeeeAddition) {
  const RhtOptions o{RhtAccumulation::exact, RhtOutput::bf16, false};
  const float inf = INFINITY;
  auto y = one_block({inf, 1.0f}, o);
  for (float v : y) EXPECT_EQ(v, inf);
  y = one_block({inf, inf}, o);  // column 1: inf - inf
  EXPECT_EQ(y[0], inf);
  EXPECT_TRUE(std::isnan(y[1]));
  y = one_block({NAN}, o);
  for (float v : y) EXPECT_TRUE(std::isnan(v));
}

// The tensor core's model (sm100, F = 25, fp32 toward zero) against the exact sum, on a case worked out by
// hand: out[0] = (1 + 1.5 * 2^-24) / 4. Exact, rounded to nearest: 1 + 2^-24 + 2^-25 lies above the
// midpoint, so (1 + 2^-23) / 4. The model keeps both bits (the small term's are 2^-24 and 2^-25, within
// F = 25 fraction bits of the largest term) and truncates the sum to fp32: 1 / 4. Rounded to bf16 both
// are 1/4.
TEST(RhtTransform, Sm100MmaTruncatesWhereTheExactSumRounds) {
  const std::vector<float> block{1.0f, 1.5f * 0x1p-24f};
  EXPECT_EQ(bits(one_block(block, {RhtAccumulation::exact, RhtOutput::fp32, false})[0]), bits(0.25f + 0x1p-25f));
  EXPECT_EQ(bits(one_block(block, {RhtAccumulation::sm100_mma, RhtOutput::fp32, false})[0]), bits(0.25f));
  EXPECT_EQ(bits(one_block(block, {RhtAccumulation::exact, RhtOutput::bf16, false})[0]), bits(0.25f));
  EXPECT_EQ(bits(one_block(block, {RhtAccumulation::sm100_mma, RhtOutput::bf16, false})[0]), bits(0.25f));
  // (1 - 0.75 + 2^-25) / 4 = 2^-4 + 2^-27, an fp32 value: the small term's bit lies 25 places below the
  // largest term's, which F = 25 keeps (a model with Ampere's F = 24 would drop it and give 2^-4).
  const std::vector<float> cancelling{1.0f, -0.75f, 0x1p-25f};
  EXPECT_EQ(bits(one_block(cancelling, {RhtAccumulation::exact, RhtOutput::fp32, false})[0]), bits(0x1p-4f + 0x1p-27f));
  EXPECT_EQ(bits(one_block(cancelling, {RhtAccumulation::sm100_mma, RhtOutput::fp32, false})[0]),
            bits(0x1p-4f + 0x1p-27f));
}

// hadamard.h's claim: on bf16 blocks whose exponents span at most 12 binades the exact sum fits in fp32, so
// the tensor core's model gives the same fp32 bits. Exponents in [-6, 6]: spread 12.
TEST(RhtTransform, Sm100MmaEqualsExactOnBf16WithinTwelveBinades) {
  std::mt19937 rng(14);
  const std::vector<float> x = random_values(64 * 32, -6, 7, 8, rng);
  for (const RhtAxis axis : {RhtAxis::within_rows, RhtAxis::within_columns})
    for (const bool inverse : {false, true}) {
      const RhtOptions exact_options{RhtAccumulation::exact, RhtOutput::fp32, inverse};
      const RhtOptions mma_options{RhtAccumulation::sm100_mma, RhtOutput::fp32, inverse};
      const auto exact = transformed(x, 64, 32, axis, kTeWgradSigns, exact_options);
      const auto mma = transformed(x, 64, 32, axis, kTeWgradSigns, mma_options);
      for (std::size_t e = 0; e < x.size(); ++e) ASSERT_EQ(bits(exact[e]), bits(mma[e])) << "element " << e;
    }
}

TEST(RhtTransform, Sm100MmaRefusesValuesThatAreNotBf16) {
  std::vector<float> x(32 * 16, 1.0f);
  x[17 * 16 + 5] = 1.0f + 0x1p-10f;
  try {
    random_hadamard_transform(x, 32, 16, RhtAxis::within_columns, kTeWgradSigns,
                              {RhtAccumulation::sm100_mma, RhtOutput::bf16, false});
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("element (17, 5) = 1.0009765"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("is not a bf16 value"), std::string::npos) << e.what();
  }
}

// max over elements of |z - x| / bound, where z is x transformed by `first` then `second` (both with
// output rounding unit u). Derivation: y_j = t_j (1 + d_j), |d_j| <= u, t = x W1 exactly (one rounding;
// every non-zero t_j is a multiple of x's last bit / 4 >= 2^-33, normal). z_k = (sum_j y_j W2[j][k])(1 + e_k)
// = (x_k + sum_j t_j d_j W2[j][k])(1 + e_k) when W1 W2 = I, and |sum_j t_j d_j W2[j][k]| <= (u / 4) ||t||_1
// <= (u / 4) 4 ||t||_2 = u ||x||_2 (Cauchy-Schwarz over 16 entries; W1 orthogonal). So
// |z_k - x_k| <= u |x_k| + (1 + u) u ||x_block||_2. The bound is evaluated in double, whose relative error
// (a few 2^-53) the factor 1 + 2^-40 covers.
double worst_round_trip(const std::vector<float>& x, const RhtSigns& s, bool second_inverse, RhtOutput out) {
  const double u = out == RhtOutput::fp32 ? 0x1p-24 : 0x1p-8;
  auto z = transformed(x, 1, x.size(), RhtAxis::within_rows, s, {RhtAccumulation::exact, out, false});
  z = transformed(z, 1, x.size(), RhtAxis::within_rows, s, {RhtAccumulation::exact, out, second_inverse});
  double worst = 0.0;
  for (std::size_t block = 0; block < x.size() / N; ++block) {
    double norm2 = 0.0;
    for (std::size_t i = 0; i < N; ++i) norm2 += static_cast<double>(x[block * N + i]) * x[block * N + i];
    for (std::size_t k = block * N; k < block * N + N; ++k) {
      const double bound = (u * std::fabs(x[k]) + (1 + u) * u * std::sqrt(norm2)) * (1 + 0x1p-40);
      worst = std::max(worst, std::fabs(static_cast<double>(z[k]) - x[k]) / bound);
    }
  }
  return worst;
}

TEST(RhtTransform, RoundTripsWithinTheDerivedBound) {
  std::mt19937 rng(15);
  const std::vector<float> x = random_values(16 * 256, -8, 8, 24, rng);
  for (const RhtOutput out : {RhtOutput::fp32, RhtOutput::bf16}) {
    // Without signs M is symmetric, M M = I: applying it twice gives x back.
    const double twice = worst_round_trip(x, kRhtNoSigns, false, out);
    EXPECT_LE(twice, 1.0);
    EXPECT_GT(twice, 0.0);  // the roundings did show
    // With TE's signs the inverse (M^T) undoes it ...
    EXPECT_LE(worst_round_trip(x, kTeWgradSigns, true, out), 1.0);
    // ... and applying M twice does not (M M != I): the check can fail, here by far.
    EXPECT_GT(worst_round_trip(x, kTeWgradSigns, false, out), 10.0);
  }
}

// The point of the transform: (B^T dy)^T (B^T x) = dy^T B B^T x = dy^T x for B = blockdiag(M), both operands
// transformed along the tokens (rows) with the same signs. Derivation of the bound, per entry (a, b):
// with T = B^T dy and X = B^T x exact and dy' = T (1 + d), x' = X (1 + e) elementwise, |d|, |e| <= u (one
// rounding each, no underflow: on the data below non-zero entries are multiples of 2^-37), the exact products differ by
// sum_m T X ((1 + d)(1 + e) - 1), at most (2u + u^2) sum_m |T||X| <= (2u + u^2) / (1 - u)^2 S', S' =
// sum_m |dy'||x'|. Both GEMMs are summed here in double (each product of floats exact): each off by at most
// gamma_M = M 2^-53 / (1 - M 2^-53) times its sum of |products| (S' and S).
struct GemmCheck {
  double worst = 0.0;     // max |C' - C| / bound
  double largest = 0.0;   // max |C' - C|
};

GemmCheck check_wgrad(const std::vector<float>& dy, const std::vector<float>& x, std::size_t m, std::size_t n,
                      std::size_t k, const RhtSigns& dy_signs, const RhtSigns& x_signs, RhtOutput out) {
  const RhtOptions o{RhtAccumulation::exact, out, false};
  const auto dy_t = transformed(dy, m, n, RhtAxis::within_columns, dy_signs, o);
  const auto x_t = transformed(x, m, k, RhtAxis::within_columns, x_signs, o);
  const double u = out == RhtOutput::fp32 ? 0x1p-24 : 0x1p-8;
  const double gamma = static_cast<double>(m) * 0x1p-53 / (1 - static_cast<double>(m) * 0x1p-53);
  GemmCheck result;
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < k; ++b) {
      double c = 0.0, c_t = 0.0, s = 0.0, s_t = 0.0;
      for (std::size_t t = 0; t < m; ++t) {
        c += static_cast<double>(dy[t * n + a]) * x[t * k + b];
        c_t += static_cast<double>(dy_t[t * n + a]) * x_t[t * k + b];
        s += std::fabs(static_cast<double>(dy[t * n + a]) * x[t * k + b]);
        s_t += std::fabs(static_cast<double>(dy_t[t * n + a]) * x_t[t * k + b]);
      }
      const double bound = ((2 * u + u * u) / ((1 - u) * (1 - u)) * s_t + gamma * (s_t + s)) * (1 + 0x1p-40);
      result.worst = std::max(result.worst, std::fabs(c_t - c) / bound);
      result.largest = std::max(result.largest, std::fabs(c_t - c));
    }
  return result;
}

TEST(RhtTransform, LeavesTheWeightGradientGemmUnchanged) {
  std::mt19937 rng(16);
  const std::size_t m = 64, n = 8, k = 12;  // tokens, output and input features
  const std::vector<float> dy = random_values(m * n, -12, 0, 24, rng);
  const std::vector<float> x = random_values(m * k, -4, 4, 24, rng);
  for (const RhtOutput out : {RhtOutput::fp32, RhtOutput::bf16}) {
    const GemmCheck same = check_wgrad(dy, x, m, n, k, kTeWgradSigns, kTeWgradSigns, out);
    EXPECT_LE(same.worst, 1.0);
    EXPECT_GT(same.largest, 0.0);  // the roundings did show
    // Different signs on the two operands (M1 M2^T != I) change the GEMM: the check can fail, here by far.
    EXPECT_GT(check_wgrad(dy, x, m, n, k, kTeWgradSigns, kRhtNoSigns, out).worst, 10.0);
  }
}

// TE's column-wise copy is RHT(tensor.t()) along its rows: within_columns on a (tokens x features) tensor is
// that, transposed back.
TEST(RhtTransform, WithinColumnsIsWithinRowsOfTheTranspose) {
  std::mt19937 rng(17);
  const std::size_t rows = 32, cols = 24;
  const std::vector<float> x = random_values(rows * cols, -20, 20, 24, rng);
  const RhtOptions o{RhtAccumulation::exact, RhtOutput::bf16, false};
  const auto direct = transformed(x, rows, cols, RhtAxis::within_columns, kTeWgradSigns, o);
  const auto x_t = transpose(x, rows, cols);
  const auto via_t = transpose(transformed(x_t, cols, rows, RhtAxis::within_rows, kTeWgradSigns, o), cols, rows);
  for (std::size_t e = 0; e < x.size(); ++e) ASSERT_EQ(bits(direct[e]), bits(via_t[e])) << "element " << e;
}

std::string refusal(std::size_t size, std::size_t rows, std::size_t cols, RhtAxis axis) {
  std::vector<float> x(size, 1.0f);
  try {
    random_hadamard_transform(x, rows, cols, axis);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(RhtTransform, RefusesLengthsThatAreNotMultiplesOf16) {
  EXPECT_EQ(refusal(20 * 16, 20, 16, RhtAxis::within_columns),
            "random_hadamard_transform: the blocks of 16 run within columns, along rows, but rows = 20 is not a "
            "multiple of 16 (nothing is padded; Transformer Engine refuses such tensors too)");
  EXPECT_EQ(refusal(16 * 20, 16, 20, RhtAxis::within_rows),
            "random_hadamard_transform: the blocks of 16 run within rows, along cols, but cols = 20 is not a "
            "multiple of 16 (nothing is padded; Transformer Engine refuses such tensors too)");
  EXPECT_EQ(refusal(100, 16, 16, RhtAxis::within_rows),
            "random_hadamard_transform: the span holds 100 elements, not rows x cols = 16 x 16");
  // Only the length along the axis must be a multiple of 16.
  EXPECT_EQ(refusal(3 * 16, 3, 16, RhtAxis::within_rows), "");
  EXPECT_EQ(refusal(16 * 3, 16, 3, RhtAxis::within_columns), "");
  EXPECT_EQ(refusal(0, 0, 5, RhtAxis::within_columns), "");
}

}  // namespace
