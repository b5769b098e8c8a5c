// The definitions every counting path shares: TwoSum (formats/two_sum.h and
// its AVX-512 twin), what an update and a lost update are (emu/lost_update.h,
// count_update), and the mapping of (seed, stream, position) to Philox
// blocks. Each is held against an independent computation written here:
// exact sums in binary128, the rounding done by hand, Philox called directly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "data/random.h"
#include "emu/counters.h"
#include "emu/lost_update.h"
#include "formats/philox.h"
#include "formats/two_sum.h"
#include "formats/two_sum_avx512.h"

namespace {

using mpverify::formats::two_sum_error;

// Doubles over a spread of exponents with random signs and fraction bits; the
// gap between two of them stays below 2^55 so that their exact sum fits the
// 113 bits of binary128.
std::vector<double> operands(std::uint64_t seed, std::size_t n) {
  mpverify::data::Draws draws(seed, 0);
  std::vector<double> v;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t fraction = (std::uint64_t{draws.next_u32()} << 32 | draws.next_u32()) >> 11;
    const double m = std::ldexp(static_cast<double>(fraction | (std::uint64_t{1} << 52)), -52);  // [1, 2)
    const int e = static_cast<int>(draws.below(56)) - 28;
    v.push_back((draws.next_u32() & 1 ? -1.0 : 1.0) * std::ldexp(m, e));
  }
  return v;
}

TEST(TwoSum, ErrorMakesTheSumExact) {
  const std::vector<double> a = operands(1, 20000), b = operands(2, 20000);
  int inexact = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double s = a[i] + b[i];
    const double e = two_sum_error(a[i], b[i], s);
    const __float128 exact = static_cast<__float128>(a[i]) + static_cast<__float128>(b[i]);
    ASSERT_TRUE(static_cast<__float128>(s) + static_cast<__float128>(e) == exact) << a[i] << " + " << b[i];
    inexact += e != 0;
  }
  EXPECT_GT(inexact, 10000);  // the sample exercises the error, not only exact sums
}

TEST(TwoSum, ExactSumsHaveNoError) {
  EXPECT_EQ(two_sum_error(1.0, 2.0, 3.0), 0.0);
  EXPECT_EQ(two_sum_error(1.0, -1.0, 0.0), 0.0);
  // 1 + 2^-60 rounds to 1, error 2^-60; and with the operands swapped.
  EXPECT_EQ(two_sum_error(1.0, 0x1p-60, 1.0), 0x1p-60);
  EXPECT_EQ(two_sum_error(0x1p-60, 1.0, 1.0), 0x1p-60);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) void vector_errors(const double* a, const double* b, const double* s, double* e) {
  _mm512_storeu_pd(e, mpverify::formats::two_sum_error_avx512(_mm512_loadu_pd(a), _mm512_loadu_pd(b),
                                                               _mm512_loadu_pd(s)));
}

TEST(TwoSum, VectorFormEqualsTheScalarBitForBit) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "this CPU has no AVX-512F";
  std::vector<double> a = operands(3, 4096), b = operands(4, 4096);
  // Far-apart exponents, zeros of both signs and subnormals too.
  const double extra[] = {0x1p-1074, -0x1p-1074, 0.0, -0.0, 0x1p1000, -0x1p-1000, 3.0, 0x1.fffffffffffffp1023};
  for (double x : extra)
    for (double y : extra) a.push_back(x), b.push_back(y);
  while (a.size() % 8) a.push_back(1.0), b.push_back(1.0);
  for (std::size_t i = 0; i < a.size(); i += 8) {
    double s[8], e[8];
    for (int j = 0; j < 8; ++j) s[j] = a[i + j] + b[i + j];
    vector_errors(&a[i], &b[i], s, e);
    for (int j = 0; j < 8; ++j) {
      if (!std::isfinite(s[j])) continue;  // TwoSum is defined for finite sums only
      const double scalar = two_sum_error(a[i + j], b[i + j], s[j]);
      ASSERT_EQ(std::memcmp(&scalar, &e[j], sizeof(double)), 0) << a[i + j] << " + " << b[i + j];
    }
  }
}
#endif

TEST(LostUpdate, AnUpdateIsANonZeroFiniteAddendToAFiniteW) {
  using mpverify::emu::is_update;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(is_update(1.0, 1e-30));
  EXPECT_TRUE(is_update(0.0, -1e-30));
  EXPECT_FALSE(is_update(1.0, 0.0));
  EXPECT_FALSE(is_update(1.0, -0.0));
  EXPECT_FALSE(is_update(1.0, inf));
  EXPECT_FALSE(is_update(inf, 1.0));
  EXPECT_FALSE(is_update(nan, 1.0));
  EXPECT_FALSE(is_update(1.0, nan));
}

TEST(LostUpdate, LostWhenTheRoundedSumIsW) {
  using mpverify::emu::is_lost_update;
  // fp16 at w = 2048 (ulp 2): u = 1 ties to even (2048), lost; u = 1.0001 reaches 2050, kept.
  EXPECT_TRUE(is_lost_update(2048.0, 1.0, 2048.0));
  EXPECT_FALSE(is_lost_update(2048.0, 1.0001, 2050.0));
  // fp16 w = 2047, u = 0.8999 (0.89990234375 in fp16): 2047.8999 rounds to 2048, kept although |w|/|u| > 2^11.
  EXPECT_FALSE(is_lost_update(2047.0, 0.89990234375, 2048.0));
  EXPECT_GT(2047.0 / 0.89990234375, 2048.0);
  EXPECT_FALSE(is_lost_update(2048.0, 0.0, 2048.0));  // no update, nothing to lose
}

TEST(LostUpdate, CountUpdateCountsBothFields) {
  mpverify::emu::Counters c;
  mpverify::emu::count_update(c, 2048.0, 1.0, 2048.0);   // lost
  mpverify::emu::count_update(c, 2048.0, 3.0, 2052.0);   // kept
  mpverify::emu::count_update(c, 2048.0, 0.0, 2048.0);   // no update
  mpverify::emu::count_update(c, std::numeric_limits<double>::infinity(), 1.0,
                              std::numeric_limits<double>::infinity());  // no update: w is not finite
  EXPECT_EQ(c.addends_nonzero, 2u);
  EXPECT_EQ(c.swamped, 1u);
}

// The counter and key layout of Philox4x32-10 written out here, for the
// (seed, stream, position) that stochastic rounding and data::Draws use.
std::array<std::uint32_t, 4> block_by_hand(std::uint64_t seed, std::uint64_t stream, std::uint64_t block) {
  const std::array<std::uint32_t, 4> counter = {static_cast<std::uint32_t>(block & 0xffffffffu),
                                                static_cast<std::uint32_t>(block >> 32),
                                                static_cast<std::uint32_t>(stream & 0xffffffffu),
                                                static_cast<std::uint32_t>(stream >> 32)};
  const std::array<std::uint32_t, 2> key = {static_cast<std::uint32_t>(seed & 0xffffffffu),
                                            static_cast<std::uint32_t>(seed >> 32)};
  return mpverify::formats::philox4x32_10(counter, key);
}

TEST(Philox, DrawsAndStochasticRoundingShareOneBlockMapping) {
  const std::uint64_t seed = 0x0123456789abcdefull, stream = 0xfedcba9876543210ull;
  mpverify::data::Draws draws(seed, stream);
  for (std::uint64_t position = 0; position < 64; ++position) {
    const std::uint32_t expected = block_by_hand(seed, stream, position / 4)[position % 4];
    ASSERT_EQ(mpverify::formats::stochastic_draw(seed, stream, position), expected) << position;
    ASSERT_EQ(draws.next_u32(), expected) << position;
  }
  const std::uint64_t far = (std::uint64_t{1} << 40) + 5;  // a block number past 32 bits
  EXPECT_EQ(mpverify::formats::philox_block(seed, stream, far >> 2), block_by_hand(seed, stream, far >> 2));
}

}  // namespace
