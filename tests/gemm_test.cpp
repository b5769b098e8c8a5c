// GEMM: the Eigen reference, and the emulated GEMM under each accumulation
// model, against the FP64 reference within derived bounds, plus crafted
// cases whose results are worked out by hand.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "compare/compare.h"
#include "emu/gemm_emu.h"
#include "emu/quantize.h"
#include "refs/eigen_blocking.h"
#include "refs/gemm_ref.h"

namespace {

using namespace mpverify;
using emu::Accumulation;
using ops::GemmShape;

std::vector<float> random_fp16_values(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(normal(rng));
  emu::quantize(v, v, emu::QuantizeSpec{formats::parse_format("fp16")});  // representable inputs: no input error
  return v;
}

// The normwise bound for a recursive dot-product accumulation of length k
// with unit roundoff u: each element satisfies |c - c_hat| <= gamma_k (|A||B|)_ij
// (Higham, eq. 3.13), so ||C - C_hat||_F <= gamma_k || |A||B| ||_F, i.e. a
// relative bound of gamma_k times refs::gemm_condition.
double normwise_bound(const GemmShape& s, const std::vector<float>& a, const std::vector<float>& b, double u) {
  return compare::gamma(s.k, u) * refs::gemm_condition(s, a, b);
}

struct Case {
  Accumulation accumulation;
  double unit_roundoff;  // of each accumulation step
};

TEST(GemmEmu, WithinTheAccumulationBoundOnRandomInputs) {
  const formats::Format fp32 = formats::parse_format("fp32");
  int compared = 0;
  for (const Case& acc : {Case{Accumulation::fp32, 0x1p-24}, Case{Accumulation::fp16, 0x1p-11}}) {
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      for (GemmShape s : {GemmShape{17, 23, 64}, GemmShape{8, 5, 300, true, false}, GemmShape{9, 12, 40, true, true}}) {
        const auto a = random_fp16_values(s.a_size(), seed);
        const auto b = random_fp16_values(s.b_size(), seed + 100);
        std::vector<double> c64(s.c_size());
        refs::gemm_ref_fp64(s, a, b, c64);
        std::vector<float> c(s.c_size());
        emu::GemmPolicy policy;
        policy.accumulation = acc.accumulation;
        emu::gemm_emu(s, a, b, c, policy);
        const double bound = normwise_bound(s, a, b, acc.unit_roundoff);
        const auto cmp = compare::compare(
            std::span<const double>(c64), c, fp32,
            compare::Tolerance::normwise(bound, "gamma_k(u) || |A||B| ||_F / ||C||_F for recursive accumulation"));
        EXPECT_TRUE(cmp.passed) << emu::to_string(acc.accumulation) << " seed " << seed << " m=" << s.m << " n=" << s.n
                                << " k=" << s.k << ": " << cmp.failure;
        // Rounding did happen, so the comparison measured something.
        EXPECT_GT(cmp.relative_error, 0.0);
        RecordProperty(std::string(emu::to_string(acc.accumulation)) + "_k" + std::to_string(s.k) + "_seed" +
                           std::to_string(seed) + "_bound_used",
                       std::to_string(cmp.tolerance_used));
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 18);
}

TEST(GemmRef, Fp32WithinTheBoundOfFp64) {
  const GemmShape s{31, 29, 513};
  const auto a = random_fp16_values(s.a_size(), 5), b = random_fp16_values(s.b_size(), 6);
  std::vector<double> c64(s.c_size());
  std::vector<float> c32(s.c_size());
  refs::gemm_ref_fp64(s, a, b, c64);
  refs::gemm_ref(s, a, b, c32);
  // Eigen sums in blocks (a different order), and the gamma_k bound holds for any order.
  const auto cmp = compare::compare(std::span<const double>(c64), c32, formats::parse_format("fp32"),
                                    compare::Tolerance::normwise(normwise_bound(s, a, b, 0x1p-24), "gamma_k(2^-24)"));
  EXPECT_TRUE(cmp.passed) << cmp.failure;
  EXPECT_LT(cmp.tolerance_used, 1.0);
}

// The reference's product is blocked for fixed cache sizes, not for this
// machine's (refs/eigen_blocking.h), so its summation order and bits are the
// same on every machine. Were the pinning lost, Eigen would report the CPU's
// own sizes (here, and on most servers, not the pinned 32 KiB / 1 MiB / 8 MiB).
TEST(GemmRef, BlockedForTheFixedCacheSizesOnEveryMachine) {
  const mpverify::ops::GemmShape s{8, 8, 8, false, false};
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64);
  mpverify::refs::gemm_ref(s, a, b, c);
  const auto sizes = mpverify::refs::eigen_cache_sizes();
  EXPECT_EQ(sizes.l1, mpverify::refs::kEigenL1);
  EXPECT_EQ(sizes.l2, mpverify::refs::kEigenL2);
  EXPECT_EQ(sizes.l3, mpverify::refs::kEigenL3);
  EXPECT_EQ(c[0], 8.0f);
}

TEST(GemmEmu, IntegerInputsAreExact) {
  // Integers in [-8, 8]: products are at most 64 and every partial sum of
  // k = 32 products is an integer of magnitude <= 2048, exact in fp16 and
  // fp32, so every accumulation model must equal the reference bit for bit.
  const GemmShape s{12, 10, 32};
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(-8, 8);
  std::vector<float> a(s.a_size()), b(s.b_size());
  for (auto& x : a) x = static_cast<float>(small(rng));
  for (auto& x : b) x = static_cast<float>(small(rng));
  std::vector<float> ref(s.c_size());
  refs::gemm_ref(s, a, b, ref);
  for (auto acc : {Accumulation::fp32, Accumulation::fp16, Accumulation::tensor_core}) {
    emu::GemmPolicy policy;
    policy.accumulation = acc;
    std::vector<float> c(s.c_size());
    emu::gemm_emu(s, a, b, c, policy);
    const auto cmp = compare::compare(ref, c, formats::parse_format("fp32"),
                                      compare::Tolerance::bit_exact("integer inputs: every product and sum is exact"));
    EXPECT_TRUE(cmp.passed) << emu::to_string(acc) << ": " << cmp.failure;
    EXPECT_EQ(cmp.bit_identical_fraction, 1.0);
  }
}

TEST(GemmEmu, Fp16AccumulationStallsAt2048) {
  // Summing k = 4096 ones in fp16: after 2048 the step 2048 + 1 is a tie
  // between 2048 (even) and 2050, so the sum stays at 2048 and the remaining
  // 2048 additions are all lost (swamped).
  const GemmShape s{1, 1, 4096};
  const std::vector<float> a(s.a_size(), 1.0f), b(s.b_size(), 1.0f);
  std::vector<float> c(1);
  emu::GemmPolicy policy;
  policy.accumulation = Accumulation::fp16;
  emu::CounterSet counters;
  emu::gemm_emu(s, a, b, c, policy, &counters);
  EXPECT_EQ(c[0], 2048.0f);
  const emu::Counters& acc = *counters.find("gemm.accumulate");
  EXPECT_EQ(acc.elements, 4096u);
  EXPECT_EQ(acc.addends_nonzero, 4096u);
  EXPECT_EQ(acc.swamped, 2048u);
  policy.accumulation = Accumulation::fp32;
  emu::gemm_emu(s, a, b, c, policy);
  EXPECT_EQ(c[0], 4096.0f);
}

TEST(GemmEmu, TensorCoreTruncationByHand) {
  // One block of 4: 1*1 plus three products 3*2^-12 * 2^-13 = 0.75 * 2^-23
  // (0.75 ulp of 1 in fp32). Exact sum 1 + 2.25 * 2^-23.
  //  - fp32 accumulation rounds each step to nearest: 1 + 2^-23, 1 + 2*2^-23,
  //    then 1 + 2.75*2^-23 -> 1 + 3*2^-23;
  //  - tensor core, extra_bits 0: aligned to 2^0 with 24 bits, each small
  //    term truncates to 0: the sum is 1;
  //  - extra_bits 3: the terms survive (6 * 2^-26 each), the sum 1 + 2.25*2^-23
  //    is truncated to fp32: 1 + 2*2^-23.
  const GemmShape s{1, 1, 4};
  const std::vector<float> a = {1.0f, 3 * 0x1p-12f, 3 * 0x1p-12f, 3 * 0x1p-12f};
  const std::vector<float> b = {1.0f, 0x1p-13f, 0x1p-13f, 0x1p-13f};
  std::vector<float> c(1);
  emu::GemmPolicy policy;
  policy.accumulation = Accumulation::fp32;
  emu::gemm_emu(s, a, b, c, policy);
  EXPECT_EQ(c[0], 1.0f + 3 * 0x1p-23f);
  policy.accumulation = Accumulation::tensor_core;
  policy.tensor_core = {4, 0, formats::Rounding::toward_zero};
  emu::gemm_emu(s, a, b, c, policy);
  EXPECT_EQ(c[0], 1.0f);
  policy.tensor_core = {4, 3, formats::Rounding::toward_zero};
  emu::gemm_emu(s, a, b, c, policy);
  EXPECT_EQ(c[0], 1.0f + 2 * 0x1p-23f);
}

TEST(GemmEmu, OverflowNear65504IsCounted) {
  // 70000 does not fit in fp16: the input rounds to inf (overflow at gemm.a).
  // 200 * 200 = 40000 fits, but two of them sum to 80000: fp16 accumulation
  // overflows at the second step.
  const GemmShape s{1, 1, 2};
  std::vector<float> c(1);
  emu::GemmPolicy policy;
  policy.accumulation = Accumulation::fp16;
  emu::CounterSet counters;
  emu::gemm_emu(s, std::vector<float>{200.0f, 200.0f}, std::vector<float>{200.0f, 200.0f}, c, policy, &counters);
  EXPECT_TRUE(std::isinf(c[0]));
  EXPECT_EQ(counters.find("gemm.accumulate")->overflow, 1u);
  EXPECT_EQ(counters.find("gemm.a")->overflow, 0u);
  emu::CounterSet counters2;
  emu::gemm_emu(s, std::vector<float>{70000.0f, 1.0f}, std::vector<float>{1.0f, 1.0f}, c, policy, &counters2);
  EXPECT_EQ(counters2.find("gemm.a")->overflow, 1u);
  // fp16 output of an fp32 accumulation: 40000 + 40000 = 80000 overflows only at the output.
  policy.accumulation = Accumulation::fp32;
  policy.output = formats::parse_format("fp16");
  emu::CounterSet counters3;
  emu::gemm_emu(s, std::vector<float>{200.0f, 200.0f}, std::vector<float>{200.0f, 200.0f}, c, policy, &counters3);
  EXPECT_TRUE(std::isinf(c[0]));
  EXPECT_EQ(counters3.find("gemm.c")->overflow, 1u);
}

TEST(GemmEmu, BadShapesAreRejected) {
  std::vector<float> a(6), b(6), c(4);
  EXPECT_THROW(emu::gemm_emu(GemmShape{2, 2, 3}, a, b, std::span<float>(c).first(3), emu::GemmPolicy{}),
               std::invalid_argument);
  EXPECT_THROW(emu::gemm_emu(GemmShape{0, 2, 3}, a, b, c, emu::GemmPolicy{}), std::invalid_argument);
  emu::GemmPolicy tc;
  tc.accumulation = Accumulation::tensor_core;
  tc.tensor_core.extra_bits = 40;  // the block sum would no longer be exact in double
  EXPECT_THROW(emu::gemm_emu(GemmShape{2, 2, 3}, a, b, c, tc), std::invalid_argument);
}

// Operands already in the format (a rounded copy, as conv2d_emu passes):
// the same products, sums and output roundings as gemm_emu, whose second
// rounding of such values changes nothing; only gemm.a and gemm.b are absent.
TEST(GemmEmu, RoundedInputsGiveGemmEmusResultsAndCounts) {
  const GemmShape s{37, 70, 300};  // tile kernels and the portable edges both run
  for (Accumulation acc : {Accumulation::fp32, Accumulation::fp16, Accumulation::tensor_core}) {
    // a ~ N(0, 4000^2): sums of 300 products have a standard deviation near
    // 4000 sqrt(300) = 69000, so many pass 65504 and overflow counts too
    const auto a = random_fp16_values(s.a_size(), 7, 4000.0), b = random_fp16_values(s.b_size(), 8);
    emu::GemmPolicy policy;
    policy.accumulation = acc;
    policy.output = formats::parse_format("fp16");
    std::vector<float> c_full(s.c_size()), c_rounded(s.c_size());
    emu::CounterSet full, rounded;
    emu::gemm_emu(s, a, b, c_full, policy, &full);
    emu::gemm_emu_rounded_inputs(s, a, b, c_rounded, policy, &rounded);
    for (std::size_t i = 0; i < c_full.size(); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(c_full[i]), std::bit_cast<std::uint32_t>(c_rounded[i])) << i;
    EXPECT_EQ(*full.find("gemm.c"), *rounded.find("gemm.c"));
    if (acc != Accumulation::fp16) {
      EXPECT_GT(rounded.find("gemm.c")->inexact, 0u);  // fp16 sums are fp16 already
    }
    if (acc == Accumulation::fp16) {
      EXPECT_EQ(*full.find("gemm.accumulate"), *rounded.find("gemm.accumulate"));
      EXPECT_GT(rounded.find("gemm.accumulate")->overflow, 0u);
    }
    EXPECT_EQ(rounded.find("gemm.a"), nullptr);
    EXPECT_EQ(rounded.find("gemm.b"), nullptr);
  }
  std::vector<float> a(6), b(6), c(4);
  EXPECT_THROW(emu::gemm_emu_rounded_inputs(GemmShape{2, 2, 3, true, false}, a, b, c, emu::GemmPolicy{}),
               std::invalid_argument);
}

TEST(Compare, AllZeroAndEmptyComparisonsFail) {
  const auto f = formats::parse_format("fp32");
  const std::vector<float> zeros(5, 0.0f);
  EXPECT_FALSE(compare::compare(zeros, zeros, f, compare::Tolerance::bit_exact("")).passed);
  EXPECT_FALSE(compare::compare(std::span<const float>{}, std::span<const float>{}, f, compare::Tolerance::bit_exact("")).passed);
  // In [2, 4) the fp32 ulp is 2^-22: y differs from x by one ulp in one of two elements.
  const std::vector<float> x = {1.0f, 2.0f}, y = {1.0f, 2.0f + 0x1p-22f};
  const auto c = compare::compare(x, y, f, compare::Tolerance::ulps(2, "two ulps"));
  EXPECT_TRUE(c.passed);
  EXPECT_EQ(c.max_ulp, 1.0);
  EXPECT_EQ(c.tolerance_used, 0.5);
  EXPECT_EQ(c.bit_identical_fraction, 0.5);
  EXPECT_EQ(c.ulp_histogram[0], 1u);
  EXPECT_EQ(c.ulp_histogram[1], 1u);
  const auto strict = compare::compare(x, y, f, compare::Tolerance::ulps(0.5, "half an ulp"));
  EXPECT_FALSE(strict.passed);
  EXPECT_EQ(strict.tolerance_used, 2.0);
  EXPECT_FALSE(compare::compare(x, y, f, compare::Tolerance::bit_exact("")).passed);
}

}  // namespace

namespace {

// The AVX-512 fp16-accumulation kernel against the portable loop: same bits,
// same counts, on inputs that exercise overflow to inf, inf - inf, exact
// cancellation to zero (its sign), subnormal results and swamping.
class GemmEmuSeeds : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(GemmEmuSeeds, AccumulationSimdEqualsPortable) {
  using namespace mpverify;
  const GemmShape s{19, 69, 300};  // tiles of 4 x 32 (8 x 32 for fp32) plus 3 last rows and 5 last columns
  std::mt19937_64 rng(GetParam());
  std::uniform_int_distribution<int> pick(0, 999);
  std::normal_distribution<double> normal;
  // Mostly ordinary values, so most accumulators stay finite; a few huge
  // ones (60000 * |b| > 65504 overflows) turn some rows to inf, and from
  // there to NaN (inf - inf); small ones give subnormal products.
  auto value = [&]() -> float {
    const int p = pick(rng);
    if (p == 0) return 60000.0f;
    if (p == 1) return -60000.0f;
    if (p < 100) return static_cast<float>(normal(rng) * 1e-4);
    if (p < 150) return 0.0f;
    return static_cast<float>(normal(rng));
  };
  std::vector<float> a(s.a_size()), b(s.b_size());
  for (auto& x : a) x = value();
  for (auto& x : b) x = value();
  emu::GemmPolicy policy;
  policy.accumulation = emu::Accumulation::fp16;
  std::vector<float> fast(s.c_size()), portable(s.c_size());
  emu::CounterSet fast_counters, portable_counters;
  emu::gemm_emu(s, a, b, fast, policy, &fast_counters);
  policy.simd = false;
  emu::gemm_emu(s, a, b, portable, policy, &portable_counters);
  for (std::size_t i = 0; i < fast.size(); ++i)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(fast[i]), std::bit_cast<std::uint32_t>(portable[i])) << i;
  const auto& f = *fast_counters.find("gemm.accumulate");
  const auto& p = *portable_counters.find("gemm.accumulate");
  EXPECT_EQ(f, p);
  EXPECT_GT(p.overflow, 0u);   // the inputs did reach the cases they were made for
  EXPECT_GT(p.swamped, 0u);
  EXPECT_GT(p.nonfinite_in, 0u);
  EXPECT_GT(p.subnormal, 0u);
  EXPECT_GT(p.zeros_in, 0u);
  EXPECT_EQ(p.elements, static_cast<std::uint64_t>(s.m) * s.n * s.k);
  std::size_t finite = 0;
  for (float x : portable) finite += std::isfinite(x);
  EXPECT_GT(finite, portable.size() / 2);  // most of the comparison is between finite values

  // The fp32 tiles against the FMA loop, on the same inputs.
  policy.accumulation = emu::Accumulation::fp32;
  policy.simd = true;
  emu::gemm_emu(s, a, b, fast, policy);
  policy.simd = false;
  emu::gemm_emu(s, a, b, portable, policy);
  for (std::size_t i = 0; i < fast.size(); ++i)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(fast[i]), std::bit_cast<std::uint32_t>(portable[i])) << "fp32 " << i;
}

INSTANTIATE_TEST_SUITE_P(Seeds, GemmEmuSeeds, ::testing::Values(8u, 9u, 10u, 11u, 12u));

}  // namespace

namespace {

using namespace mpverify;

// Runs the fp16-accumulating GEMM through the AVX-512 tiles and through the
// portable loop, with and without counting, and expects the same bits and
// the same counts. Returns the portable counts and results.
struct Both {
  emu::Counters counts;
  std::vector<float> c;
};
Both expect_simd_equals_portable(const GemmShape& s, const std::vector<float>& a, const std::vector<float>& b,
                                 const char* what) {
  emu::GemmPolicy policy;
  policy.accumulation = emu::Accumulation::fp16;
  std::vector<float> fast(s.c_size()), portable(s.c_size()), fast_uncounted(s.c_size());
  emu::CounterSet fast_counters, portable_counters;
  emu::gemm_emu(s, a, b, fast, policy, &fast_counters);
  emu::gemm_emu(s, a, b, fast_uncounted, policy);
  policy.simd = false;
  emu::gemm_emu(s, a, b, portable, policy, &portable_counters);
  for (std::size_t i = 0; i < fast.size(); ++i) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(fast[i]), std::bit_cast<std::uint32_t>(portable[i])) << what << " " << i;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(fast_uncounted[i]), std::bit_cast<std::uint32_t>(portable[i]))
        << what << " uncounted " << i;
  }
  const emu::Counters& p = *portable_counters.find("gemm.accumulate");
  EXPECT_EQ(*fast_counters.find("gemm.accumulate"), p) << what;
  return {p, portable};
}

// Three k steps per element: c_i (A[i][0] * B[0][j] = c_i * 1), then
// fl16(c_i + a_i * b_j), then + z_i * w_j. Rows and columns crafted so that
// 8 x 64 tiles (two row tiles, two column panels) and the portable remainder
// (a ninth row, five more columns) meet each case that the counted step
// treats apart.
TEST(GemmEmuFp16Tiles, CraftedStepsMatchThePortableLoop) {
  const float up = 1 + 0x1p-10f, down = 1 - 0x1p-11f, below_one = 1 - 0x1p-10f;
  struct Row {
    float c, a, z;
  };
  const std::vector<Row> rows = {
      {2050.0f, up, 0.0f},          // 2050 + (1 + 2^-10)(-(1 - 2^-10)) = 2049 + 2^-20: rounds to 2050; rounded
                                    // to float first it is the tie 2049, which goes to 2048
      {2048.0f, 1.0f, 0.5f},        // 2048 + 1 = 2049 exactly: a tie, to 2048 (swamped); 2048 + 3: tie to 2052
      {-2050.0f, up, 0.0f},         // the mirror image
      {1.0f, 0x1p-12f, 1.0f},       // 1 + small products: inexact, often swamped
      {-0x1p-24f, 0x1p-12f, 0.0f},  // -2^-24 + 2^-25 = -2^-25: a tie, to -0 (to zero); then -0 + +-0
      {0.0f, -0.0f, -0.0f},         // +0 + (-0) * b: zero products, the sum's zero sign; no addend
      {0x1p-14f, 0x1p-10f, 1.0f},   // near the smallest normal: subnormal results, underflow
      {1000.0f, 3.0f, -1.0f},       // ordinary inexact sums
      {0x1p-24f, -0x1p-12f, 1.0f},  // the smallest subnormal plus tiny products: to zero, cancellation to 0
  };
  const std::vector<float> ordinary = {-below_one, below_one, 1.0f, 3.0f, -3.0f, down, -down, 0.5f,
                                       1.5f, 7.0f, -1.0f, 0.25f, 1023.0f, -511.5f, 2.0f, 1.0f};
  const std::vector<float> special = {0.0f, -0.0f, 0x1p-14f, -0x1p-14f, 0x1p-24f, 0x1p-12f, -0x1p-2f, 0x1p2f,
                                      0x1p-13f, -1.0f, 0x1.ffcp-15f, 0x1p-13f, 2.0f, -0x1p-24f, 0x1p-10f, 1.0f};
  std::vector<float> cols, third;  // b_j and w_j: panel 0 mostly ordinary, panel 1 special, then 5 more
  for (int j = 0; j < 32; ++j) {
    cols.push_back(ordinary[static_cast<std::size_t>(j) % 16] * (j < 16 ? 1.0f : 1.0f + static_cast<float>(j) * 0x1p-9f));
    third.push_back(j % 3 == 0 ? 0.0f : ordinary[static_cast<std::size_t>(j + 5) % 16]);
  }
  for (int j = 0; j < 32; ++j) {
    cols.push_back(special[static_cast<std::size_t>(j) % 16]);
    third.push_back(j % 2 ? -1.0f : 1.0f);
  }
  for (float x : {1.0f, -below_one, 0.0f, 0x1p-13f, 3.0f}) cols.push_back(x), third.push_back(-x);
  const int m = static_cast<int>(rows.size()), n = static_cast<int>(cols.size());
  const GemmShape s{m, n, 3};
  std::vector<float> a(s.a_size()), b(s.b_size());
  for (int i = 0; i < m; ++i) {
    a[static_cast<std::size_t>(i) * 3] = rows[i].c;
    a[static_cast<std::size_t>(i) * 3 + 1] = rows[i].a;
    a[static_cast<std::size_t>(i) * 3 + 2] = rows[i].z;
  }
  for (int j = 0; j < n; ++j) {
    b[static_cast<std::size_t>(j)] = 1.0f;
    b[static_cast<std::size_t>(n + j)] = cols[j];
    b[static_cast<std::size_t>(2 * n + j)] = third[j];
  }
  const Both r = expect_simd_equals_portable(s, a, b, "crafted");
  auto at = [&](int i, int j) { return r.c[static_cast<std::size_t>(i) * n + j]; };
  // The double-rounding trap, the ties and the signed zeros, by hand.
  EXPECT_EQ(at(0, 0), 2050.0f);   // b = -(1 - 2^-10)
  EXPECT_EQ(at(2, 0), -2050.0f);  // the mirror
  EXPECT_EQ(at(1, 15), 2048.0f);  // b = 1, w = 1 * 0.5: 2049 ties to 2048, and 2048.5 rounds to 2048
  EXPECT_EQ(at(1, 3), 2052.0f);   // b = 3: 2051 ties to 2052
  // b = 2^-13: -2^-24 + 2^-25 = -2^-25 ties to -0; then + 0 * w
  EXPECT_EQ(std::bit_cast<std::uint32_t>(at(4, 40)), 0u);           // w = 1: -0 + +0 = +0
  EXPECT_EQ(std::bit_cast<std::uint32_t>(at(4, 43)), 0x80000000u);  // w = -1: -0 + -0 = -0
  EXPECT_EQ(std::bit_cast<std::uint32_t>(at(5, 33)), 0u);           // +0 + (-0)(-0) + (-0)(-1) = +0
  // The cases were reached.
  EXPECT_GT(r.counts.swamped, 0u);
  EXPECT_GT(r.counts.zeros_in, 0u);
  EXPECT_GT(r.counts.subnormal, 0u);
  EXPECT_GT(r.counts.underflow, 0u);
  EXPECT_GT(r.counts.underflow_to_zero, 0u);
  EXPECT_LT(r.counts.addends_nonzero, r.counts.elements);  // zero products
  EXPECT_LT(r.counts.inexact, r.counts.elements);          // exact sums
  EXPECT_EQ(r.counts.nonfinite_in, 0u);                    // every tile stayed on the finite path
}

// Sums that wander around fp16's smallest normal 2^-14 with full-width low
// bits: products of random fp16 values near 2^-7 (22 significant bits, so the
// float sum's low 12 bits are rarely all zero) take the counted step's fast
// test on lanes whose x is subnormal in fp16 (underflow, subnormal results)
// or just above 2^-14, where that test must hand them to the exact step.
TEST(GemmEmuFp16Tiles, SumsNearTheSmallestNormalMatchThePortableLoop) {
  const GemmShape s{8, 64, 200};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> magnitude(0x1p-8f, 0x1p-6f);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> a(s.a_size()), b(s.b_size());
  for (auto* v : {&a, &b})
    for (auto& x : *v) x = (negative(rng) ? -1.0f : 1.0f) * magnitude(rng);
  const Both r = expect_simd_equals_portable(s, a, b, "near 2^-14");
  EXPECT_GT(r.counts.subnormal, r.counts.elements / 20);  // the band was crossed often
  EXPECT_GT(r.counts.underflow, 0u);
  EXPECT_EQ(r.counts.nonfinite_in, 0u);
}

// Small integers: most sums exact (the counted step reads exactness off the
// low bits), zero products, cancellations to an exact zero, and past 2048
// ties and swamping. Then the same with one row of a tile overflowing to inf
// (and on to NaN, inf - inf) while the other tiles stay finite: the
// overflowing tile is run again with every count taken per lane.
TEST(GemmEmuFp16Tiles, IntegersAndOverflowingTilesMatchThePortableLoop) {
  const GemmShape s{9, 69, 300};
  std::mt19937 rng(5);
  // |products| <= 1024, sums of a few thousand: exact below 2048, mostly not above
  std::uniform_int_distribution<int> small(-32, 32);
  std::vector<float> a(s.a_size()), b(s.b_size());
  for (auto& x : a) x = static_cast<float>(small(rng));
  for (auto& x : b) x = static_cast<float>(small(rng));
  const Both exact = expect_simd_equals_portable(s, a, b, "integers");
  EXPECT_GT(exact.counts.swamped, 0u);
  EXPECT_GT(exact.counts.zeros_in, 0u);
  EXPECT_GT(exact.counts.inexact, 0u);
  EXPECT_LT(exact.counts.inexact, exact.counts.elements * 9 / 10);
  EXPECT_LT(exact.counts.addends_nonzero, exact.counts.elements);
  EXPECT_EQ(exact.counts.nonfinite_in, 0u);

  // Row 5 (second row tile) overflows at once, meets -inf * b at k = 150:
  // inf - inf = NaN where the signs differ, -inf * 0 = NaN where b = 0.
  for (int kk = 0; kk < s.k; ++kk) a[static_cast<std::size_t>(5) * s.k + kk] = kk == 150 ? -INFINITY : 60000.0f;
  const Both special = expect_simd_equals_portable(s, a, b, "overflow");
  EXPECT_GT(special.counts.overflow, 0u);
  EXPECT_GT(special.counts.nonfinite_in, 0u);
  std::size_t finite = 0, nan = 0;
  for (float x : special.c) finite += std::isfinite(x), nan += std::isnan(x);
  EXPECT_GT(nan, 0u);
  EXPECT_GT(finite, special.c.size() / 2);
}

}  // namespace

namespace {

using namespace mpverify;

// fp32 accumulation's counts at "gemm.accumulate" (every FMA step), through
// the AVX-512 tiles (simd) and the portable loop, for the same inputs.
struct Fp32Run {
  emu::Counters counts;
  std::vector<float> c;
};
Fp32Run fp32_accumulation(const GemmShape& s, const std::vector<float>& a, const std::vector<float>& b, bool simd,
                          const formats::Format& input = formats::parse_format("fp16"), bool step_inexact = false) {
  emu::GemmPolicy policy;
  policy.accumulation = Accumulation::fp32;
  policy.input = input;
  policy.simd = simd;
  policy.count_step_inexact = step_inexact;
  Fp32Run r{{}, std::vector<float>(s.c_size())};
  emu::CounterSet counters;
  emu::gemm_emu(s, a, b, r.c, policy, &counters);
  const emu::Counters* acc = counters.find("gemm.accumulate");
  EXPECT_NE(acc, nullptr);
  if (acc) r.counts = *acc;
  return r;
}

// Every element: 4096 * 4096 = 2^24 first, then k - 1 products 1 * b. In fp32
// 2^24 + 1 is a tie between 2^24 (even) and 2^24 + 2: each 1 is lost. Columns
// j = 0 mod 3 have b = 0 after the first step: no addends there, and no loss.
// 9 x 40: one 8 x 32 tile, and the portable loop's last row and 8 columns.
TEST(GemmEmuFp32Counts, OnesAddedTo2To24AreAllLost) {
  const int m = 9, n = 40, k = 101;
  const GemmShape s{m, n, k};
  std::vector<float> a(s.a_size(), 1.0f), b(s.b_size());
  for (int i = 0; i < m; ++i) a[static_cast<std::size_t>(i) * k] = 4096.0f;
  for (int j = 0; j < n; ++j) b[static_cast<std::size_t>(j)] = 4096.0f;
  for (int kk = 1; kk < k; ++kk)
    for (int j = 0; j < n; ++j) b[static_cast<std::size_t>(kk) * n + j] = j % 3 == 0 ? 0.0f : 1.0f;
  const int zero_columns = (n + 2) / 3;  // j = 0, 3, ..., 39: 14
  for (bool simd : {true, false}) {
    const Fp32Run r = fp32_accumulation(s, a, b, simd);
    for (float x : r.c) EXPECT_EQ(x, 0x1p24f);
    EXPECT_EQ(r.counts.elements, 9u * 40 * 101) << simd;
    // the first step everywhere, then the k - 1 ones in the 26 non-zero columns
    EXPECT_EQ(r.counts.addends_nonzero, 9u * 40 + 9u * (40 - zero_columns) * 100) << simd;
    EXPECT_EQ(r.counts.swamped, 9u * (40 - zero_columns) * 100) << simd;
    EXPECT_EQ(r.counts.overflow, 0u);
    EXPECT_EQ(r.counts.nonfinite_in, 0u);
    EXPECT_EQ(r.counts.nan_created, 0u);
    EXPECT_EQ(r.counts.inexact, 0u);  // not counted for this model (gemm_emu.h) unless asked
    // Asked: 2^24 + 1 is no float (every lost one is inexact), 2^24 + 0 and 0 + 2^24 are exact.
    const Fp32Run counted = fp32_accumulation(s, a, b, simd, formats::parse_format("fp16"), true);
    EXPECT_EQ(counted.counts.inexact, 9u * (40 - zero_columns) * 100) << simd;
    EXPECT_EQ(counted.c, r.c);
    emu::Counters rest = counted.counts;
    rest.inexact = 0;
    EXPECT_EQ(rest, r.counts) << simd;  // nothing else changes
  }
  // 2^24 + 2 is a float: adding twos is never lost.
  for (int kk = 1; kk < k; ++kk)
    for (int j = 0; j < n; ++j) b[static_cast<std::size_t>(kk) * n + j] = 2.0f;
  EXPECT_EQ(fp32_accumulation(s, a, b, true).counts.swamped, 0u);
}

// Products far below 2^-149 (fp32 inputs): a*b rounds to 0. Added to c = 0
// that is an update but not a lost one (c is 0); added to c = 1 it is lost.
// The tiles take their exact step for such products.
TEST(GemmEmuFp32Counts, TinyProductsAreLostOnlyOnANonZeroSum) {
  const formats::Format fp32 = formats::parse_format("fp32");
  const int m = 8, n = 32, k = 4;
  const GemmShape s{m, n, k};
  std::vector<float> a(s.a_size(), 0x1p-100f), b(s.b_size(), 0x1p-60f);
  for (bool simd : {true, false}) {
    const Fp32Run zero_sum = fp32_accumulation(s, a, b, simd, fp32);
    for (float x : zero_sum.c) EXPECT_EQ(x, 0.0f);
    EXPECT_EQ(zero_sum.counts.addends_nonzero, 8u * 32 * 4);
    EXPECT_EQ(zero_sum.counts.swamped, 0u);
    // 0 + 2^-160 rounds to 0: every step inexact (underflow to zero)
    EXPECT_EQ(fp32_accumulation(s, a, b, simd, fp32, true).counts.inexact, 8u * 32 * 4) << simd;
  }
  for (int i = 0; i < m; ++i) a[static_cast<std::size_t>(i) * k] = 1.0f;
  for (int j = 0; j < n; ++j) b[static_cast<std::size_t>(j)] = 1.0f;
  for (bool simd : {true, false}) {
    const Fp32Run one = fp32_accumulation(s, a, b, simd, fp32);
    for (float x : one.c) EXPECT_EQ(x, 1.0f);
    EXPECT_EQ(one.counts.addends_nonzero, 8u * 32 * 4);
    EXPECT_EQ(one.counts.swamped, 8u * 32 * 3);
    // 0 + 1 * 1 is exact, 1 + 2^-160 is not
    EXPECT_EQ(fp32_accumulation(s, a, b, simd, fp32, true).counts.inexact, 8u * 32 * 3) << simd;
  }
}

// k = 5 steps per element, fp32 inputs (infinities come in as they are).
// Row 1 is (inf, 1, 1, 1, 1), every other row (2^100, 2^100, -inf, 1, 0);
// column 1 is (0, 1, 1, 1, 1), every other column (2^100, 1, 1, 1, 1).
//  - other row, other column: 0 + 2^200 = inf (overflow, from finite values;
//    an update), inf + 2^100 (non-finite in), inf - inf = NaN (created),
//    NaN + 1 and NaN + 0 (non-finite in): 1 overflow, 1 created, 3 in, 1 update;
//  - other row, column 1: 0 + 0 (no update), 0 + 2^100 (an update), then
//    2^100 - inf = -inf, -inf + 1, -inf + 0 (non-finite in): 3 in, 1 update;
//  - row 1, other column: inf * 2^100, then inf + 1 four times: 5 in;
//  - row 1, column 1: 0 + inf * 0 = NaN (created), then NaN + 1: 1 created, 4 in.
TEST(GemmEmuFp32Counts, OverflowAndNaNByHand) {
  const formats::Format fp32 = formats::parse_format("fp32");
  const float inf = std::numeric_limits<float>::infinity();
  for (GemmShape s : {GemmShape{8, 32, 5}, GemmShape{9, 33, 5}}) {  // one tile; a tile and the portable edges
    std::vector<float> a(s.a_size()), b(s.b_size());
    const std::vector<float> row = {0x1p100f, 0x1p100f, -inf, 1.0f, 0.0f}, row1 = {inf, 1.0f, 1.0f, 1.0f, 1.0f};
    const std::vector<float> column = {0x1p100f, 1.0f, 1.0f, 1.0f, 1.0f}, column1 = {0.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    for (int i = 0; i < s.m; ++i)
      for (int kk = 0; kk < 5; ++kk) a[static_cast<std::size_t>(i) * 5 + kk] = (i == 1 ? row1 : row)[kk];
    for (int kk = 0; kk < 5; ++kk)
      for (int j = 0; j < s.n; ++j) b[static_cast<std::size_t>(kk) * s.n + j] = (j == 1 ? column1 : column)[kk];
    const std::uint64_t M = static_cast<std::uint64_t>(s.m) - 1, N = static_cast<std::uint64_t>(s.n) - 1;
    for (bool simd : {true, false}) {
      const Fp32Run r = fp32_accumulation(s, a, b, simd, fp32);
      EXPECT_TRUE(std::isnan(r.c[0]));
      EXPECT_EQ(r.c[1], -inf);
      EXPECT_EQ(r.counts.elements, (M + 1) * (N + 1) * 5);
      EXPECT_EQ(r.counts.overflow, M * N) << simd;
      EXPECT_EQ(r.counts.nan_created, M * N + 1) << simd;
      EXPECT_EQ(r.counts.nonfinite_in, 3 * M * N + 3 * M + 5 * N + 4) << simd;
      EXPECT_EQ(r.counts.addends_nonzero, M * N + M) << simd;
      EXPECT_EQ(r.counts.swamped, 0u) << simd;
      // Inexact, as count_rounding counts it (IEEE's flag): the overflows (a finite value rounded to inf)
      // and nothing else: 0 + 0 and 0 + 2^100 are exact, a NaN created is invalid, not inexact, and a
      // non-finite value coming in is exact.
      EXPECT_EQ(r.counts.inexact, 0u) << simd;
      EXPECT_EQ(fp32_accumulation(s, a, b, simd, fp32, true).counts.inexact, M * N) << simd;
    }
  }
}

// Each step's inexact (GemmPolicy::count_step_inexact), by hand. fp32 inputs,
// 9 x 40: one 8 x 32 tile and the portable loop's last row and 8 columns.
//  - a row (1, 2^-15, ..., 2^-15) times a column of 2^-15 but a first 1:
//    0 + 1 is exact, then 1 + 2^-30 is no float (it needs 31 bits): k - 1
//    inexact steps per element, each also a lost update;
//  - small integers: every partial sum an integer below 2^24: all exact;
//  - 1 + 3 * 2^-24 is no float, 1 + 2^-23 and 1 + 2^-22 are: with the first
//    column 1, each later step adds 2^-24 times the column's 3, 2 or 4
//    (column j % 3), so only the columns of 3 are inexact, and there every
//    step after the first.
TEST(GemmEmuFp32Counts, StepInexactByHand) {
  const formats::Format fp32 = formats::parse_format("fp32");
  const int m = 9, n = 40, k = 7;
  const GemmShape s{m, n, k};
  const std::uint64_t M = m, N = n, K = k;
  std::vector<float> a(s.a_size(), 0x1p-15f), b(s.b_size(), 0x1p-15f);
  for (int i = 0; i < m; ++i) a[static_cast<std::size_t>(i) * k] = 1.0f;
  for (int j = 0; j < n; ++j) b[static_cast<std::size_t>(j)] = 1.0f;
  for (bool simd : {true, false}) {
    const Fp32Run r = fp32_accumulation(s, a, b, simd, fp32, true);
    for (float x : r.c) EXPECT_EQ(x, 1.0f);
    EXPECT_EQ(r.counts.inexact, M * N * (K - 1)) << simd;
    EXPECT_EQ(r.counts.swamped, M * N * (K - 1)) << simd;
    EXPECT_EQ(fp32_accumulation(s, a, b, simd, fp32, false).counts.inexact, 0u) << simd;  // off: not counted
  }
  std::vector<float> ia(s.a_size()), ib(s.b_size());
  for (std::size_t e = 0; e < ia.size(); ++e) ia[e] = static_cast<float>(static_cast<int>(e % 17) - 8);
  for (std::size_t e = 0; e < ib.size(); ++e) ib[e] = static_cast<float>(static_cast<int>(e % 13) - 6);
  for (bool simd : {true, false}) {
    const Fp32Run r = fp32_accumulation(s, ia, ib, simd, fp32, true);
    EXPECT_EQ(r.counts.elements, M * N * K);
    EXPECT_EQ(r.counts.inexact, 0u) << simd;
  }
  std::vector<float> ta(s.a_size(), 0x1p-12f), tb(s.b_size());
  for (int i = 0; i < m; ++i) ta[static_cast<std::size_t>(i) * k] = 1.0f;
  for (int kk = 0; kk < k; ++kk)
    for (int j = 0; j < n; ++j)
      tb[static_cast<std::size_t>(kk) * n + j] = kk == 0 ? 1.0f : std::ldexp(j % 3 == 0 ? 3.0f : j % 3 == 1 ? 2.0f : 4.0f, -12);
  const std::uint64_t threes = (N + 2) / 3;  // j = 0, 3, ..., 39
  for (bool simd : {true, false})
    EXPECT_EQ(fp32_accumulation(s, ta, tb, simd, fp32, true).counts.inexact, M * threes * (K - 1)) << simd;
}

// Whether a*b + c, for finite floats, is itself a float, in exact integer
// arithmetic (the recount's own, not the library's): each value is m * 2^e
// with an integer m (24 bits; 48 for a*b). Two non-zero terms whose exponents
// differ by more than 72 make no float: the larger term's leading bit is at
// least 2^e_hi, the smaller is below 2^(e_lo + 48) <= 2^(e_hi - 25), so the
// sum keeps a bit at 2^(e_hi - 1) or above and the smaller term's lowest set
// bit (below 2^(e_lo + 48)): more than 24 bits apart. Otherwise both align to
// the smaller exponent in 48 + 72 < 127 bits, exactly. A sum M * 2^e (M odd)
// is a float iff M has at most 24 bits, e >= -149 (the least subnormal) and
// the leading bit is at most 2^127 (then M * 2^e <= FLT_MAX).
__extension__ typedef __int128 Int128;  // GCC and Clang: 128-bit integers (__extension__: no pedantic warning)

bool exactly_a_float(float a, float b, float c) {
  struct Term {
    Int128 m;
    int e;
  };
  auto split = [](float x) {
    int e = 0;
    const float f = std::frexp(x, &e);  // x = f * 2^e, 0.5 <= |f| < 1
    return Term{static_cast<Int128>(static_cast<std::int64_t>(std::ldexp(f, 24))), e - 24};
  };
  const Term ta = split(a), tb = split(b), tc = split(c);
  const Term p{ta.m * tb.m, ta.e + tb.e};
  Term x;
  if (p.m == 0) x = tc;
  else if (tc.m == 0) x = p;
  else {
    const Term& lo = p.e <= tc.e ? p : tc;
    const Term& hi = p.e <= tc.e ? tc : p;
    if (hi.e - lo.e > 72) return false;
    x = Term{lo.m + hi.m * (static_cast<Int128>(1) << (hi.e - lo.e)), lo.e};
  }
  if (x.m == 0) return true;
  Int128 mag = x.m < 0 ? -x.m : x.m;
  while ((mag & 1) == 0) mag >>= 1, ++x.e;
  int bits = 0;
  for (Int128 t = mag; t != 0; t >>= 1) ++bits;
  return bits <= 24 && x.e >= -149 && x.e + bits - 1 <= 127;
}

TEST(GemmEmuFp32Counts, ExactlyAFloatByHand) {  // the recount's helper itself
  EXPECT_TRUE(exactly_a_float(3.0f, 5.0f, -15.0f));
  EXPECT_TRUE(exactly_a_float(0x1p-10f, 0x1p-10f, 0.5f));   // 2^-1 + 2^-20: 20 bits
  EXPECT_FALSE(exactly_a_float(0x1p-15f, 0x1p-15f, 0.5f));  // 2^-1 + 2^-30: 30 bits
  EXPECT_FALSE(exactly_a_float(0x1p-15f, 0x1p-15f, 1.0f));
  EXPECT_TRUE(exactly_a_float(0x1p-12f, 0x1p-11f, 1.0f));  // 1 + 2^-23
  EXPECT_FALSE(exactly_a_float(3.0f * 0x1p-12f, 0x1p-12f, 1.0f));  // 1 + 3 * 2^-24
  EXPECT_FALSE(exactly_a_float(0x1p-100f, 0x1p-60f, 0.0f));  // 2^-160: below the least subnormal
  EXPECT_TRUE(exactly_a_float(0x1p-100f, 0x1p-49f, 0.0f));   // 2^-149: the least subnormal
  EXPECT_TRUE(exactly_a_float(0x1p-100f, 0x1p-49f, 0x1p-126f));  // 2^-126 + 2^-149: 24 bits
  EXPECT_FALSE(exactly_a_float(0x1p-100f, 0x1p-49f, 0x1p-125f));  // 2^-125 + 2^-149: 25 bits
  EXPECT_FALSE(exactly_a_float(0x1p100f, 0x1p100f, 0.0f));  // 2^200: beyond fp32
  EXPECT_TRUE(exactly_a_float(0x1p100f, 0x1p27f, 0.0f));    // 2^127
  EXPECT_FALSE(exactly_a_float(0x1p100f, 0x1p27f, 0x1p127f));  // 2^128
  EXPECT_FALSE(exactly_a_float(1.0f, 1.0f, 0x1p100f));  // 2^100 + 1: exponents 100 apart
}

// The counts against a recount written here, per step in double from the
// definitions (lost_update.h, counters.h), on random fp16 values with zeros,
// large and tiny magnitudes (so that sums swamp small products), and with fp32
// inputs that reach infinities, NaN and products below 2^-149. Both paths,
// with each step's inexact counted (exactly_a_float: a finite step is inexact
// iff a*b + c is no float, overflow included) and not (then 0).
TEST(GemmEmuFp32Counts, MatchARecountOnRandomInputs) {
  const GemmShape s{19, 69, 300};  // 8 x 32 tiles plus 3 last rows and 5 last columns
  for (int variant = 0; variant < 3; ++variant) {
    std::mt19937_64 rng(40 + variant);
    std::uniform_int_distribution<int> pick(0, 999);
    std::normal_distribution<double> normal;
    auto value = [&]() -> float {
      const int p = pick(rng);
      if (p < 150) return 0.0f;
      if (p < 250) return static_cast<float>(normal(rng) * 1000.0);
      if (p < 400) return static_cast<float>(normal(rng) * 1e-3);
      if (variant == 2 && p < 404) return 0x1p100f;  // two of them overflow
      if (variant == 2 && p == 404) return pick(rng) < 100 ? -std::numeric_limits<float>::infinity() : 1.0f;
      if (variant >= 1 && p < 410) return static_cast<float>(normal(rng) * 0x1p-90);
      return static_cast<float>(normal(rng));
    };
    std::vector<float> a(s.a_size()), b(s.b_size());
    for (auto& x : a) x = value();
    for (auto& x : b) x = value();
    const formats::Format input = formats::parse_format(variant == 0 ? "fp16" : "fp32");
    if (variant == 0) {
      emu::quantize(a, a, emu::QuantizeSpec{input});
      emu::quantize(b, b, emu::QuantizeSpec{input});
    }
    // The recount: c <- fmaf(a, b, c) (one rounding, the C library's), each step classified in double.
    emu::Counters expected;
    std::vector<float> c_expected(s.c_size());
    for (int i = 0; i < s.m; ++i)
      for (int j = 0; j < s.n; ++j) {
        float c = 0.0f;
        for (int kk = 0; kk < s.k; ++kk) {
          const float x = a[static_cast<std::size_t>(i) * s.k + kk], y = b[static_cast<std::size_t>(kk) * s.n + j];
          const float r = std::fmaf(x, y, c);
          const double product = static_cast<double>(x) * y;
          const bool finite_in = std::isfinite(x) && std::isfinite(y) && std::isfinite(c);
          const bool created = std::isnan(r) && !std::isnan(x) && !std::isnan(y) && !std::isnan(c);
          const bool update = finite_in && product != 0.0;
          expected.elements += 1;
          expected.addends_nonzero += update;
          expected.swamped += update && c != 0.0f && r == c;
          expected.overflow += finite_in && std::isinf(r);
          expected.nan_created += created;
          expected.nonfinite_in += !finite_in && !created;
          expected.inexact += finite_in && !exactly_a_float(x, y, c);
          c = r;
        }
        c_expected[static_cast<std::size_t>(i) * s.n + j] = c;
      }
    emu::Counters expected_off = expected;
    expected_off.inexact = 0;
    for (bool simd : {true, false})
      for (bool step_inexact : {false, true}) {
        const Fp32Run r = fp32_accumulation(s, a, b, simd, input, step_inexact);
        EXPECT_EQ(r.counts, step_inexact ? expected : expected_off)
            << "variant " << variant << " simd " << simd << " step_inexact " << step_inexact;
        for (std::size_t e = 0; e < r.c.size(); ++e) {
          if (std::isnan(c_expected[e])) EXPECT_TRUE(std::isnan(r.c[e])) << e;
          else EXPECT_EQ(std::bit_cast<std::uint32_t>(r.c[e]), std::bit_cast<std::uint32_t>(c_expected[e])) << e;
        }
      }
    // The inputs reached what they were made for.
    EXPECT_GT(expected.swamped, 1000u) << variant;
    EXPECT_LT(expected.addends_nonzero, expected.elements) << variant;
    EXPECT_GT(expected.inexact, expected.elements / 4) << variant;  // many steps of either kind
    EXPECT_LT(expected.inexact, expected.elements / 10 * 9) << variant;
    if (variant == 2) {
      EXPECT_GT(expected.overflow, 0u);
      EXPECT_GT(expected.nan_created, 0u);
      EXPECT_GT(expected.nonfinite_in, 0u);
    }
  }
}

}  // namespace
