// The recorders (tensor statistics, lost updates) on hand-worked cases and a
// brute-force recount, and the run log's atomic files.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <array>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "emu/exponent_histogram.h"
#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/format.h"
#include "record/json_line.h"
#include "record/lost_updates.h"
#include "record/run_log.h"
#include "record/tensor_stats.h"
#include "record/tensor_stats_fused.h"

namespace {

using namespace mpverify;
namespace fs = std::filesystem;

const formats::Format fp16 = formats::parse_format("fp16");
const formats::Format bf16 = formats::parse_format("bf16");
const float inf = std::numeric_limits<float>::infinity();
const float nan = std::numeric_limits<float>::quiet_NaN();

// --- tensor_stats: hand-worked fp16 ------------------------------------------
// fp16: smallest subnormal 2^-24, smallest normal 2^-14, largest finite 65504;
// values above 65520 = 65504 + half an ulp (2^4) round to infinity.
const std::vector<float> crafted = {0.0f, -0.0f, 0x1p-25f, 0x1p-26f, 0x3p-26f, 0x1p-20f, 1.0f, 65504.0f, -0x1p-25f, 0.0f};
// Non-zero finite: the 7 values other than the three zeros: the denominator.

TEST(RecordTensorStats, Fp16AtScale1) {
  // 2^-25: half of 2^-24, a tie between 0 and 2^-24 -> even -> 0 (underflow to zero), and -2^-25 -> -0;
  // 2^-26: a quarter of 2^-24 -> 0; 3*2^-26 = 0.75 * 2^-24 -> 2^-24 (subnormal);
  // 2^-20: subnormal (below 2^-14), exact; 1 and 65504: normal.
  const auto s = record::tensor_stats(crafted, fp16, 1.0);
  EXPECT_EQ(s.count, 10u);
  EXPECT_EQ(s.zeros_in, 3u);
  EXPECT_EQ(s.nonfinite_in, 0u);
  EXPECT_EQ(s.nonzero_finite, 7u);
  EXPECT_EQ(s.counters.underflow_to_zero, 3u);
  EXPECT_EQ(s.counters.subnormal, 2u);
  EXPECT_EQ(s.counters.overflow, 0u);
  EXPECT_DOUBLE_EQ(s.underflow_to_zero_rate, 3.0 / 7.0);  // the zeros are not in the denominator
  EXPECT_DOUBLE_EQ(s.subnormal_rate, 2.0 / 7.0);
  EXPECT_EQ(s.overflow_rate, 0.0);
  EXPECT_EQ(s.max_abs, 65504.0);
  EXPECT_EQ(s.headroom_log2, 0.0);  // log2(65504) - log2(65504)
}

TEST(RecordTensorStats, Fp16AtScale8) {
  // x * 8: 2^-22, 2^-23, 3*2^-23 = 6 * 2^-24, 2^-17, -2^-22: all exact subnormals
  // (multiples of 2^-24 below 2^-14); 8 normal; 65504 * 8 = 524032 > 65520: overflow.
  const auto s = record::tensor_stats(crafted, fp16, 8.0);
  EXPECT_EQ(s.counters.underflow_to_zero, 0u);
  EXPECT_EQ(s.counters.subnormal, 5u);
  EXPECT_EQ(s.counters.overflow, 1u);
  EXPECT_EQ(s.underflow_to_zero_rate, 0.0);
  EXPECT_DOUBLE_EQ(s.subnormal_rate, 5.0 / 7.0);
  EXPECT_DOUBLE_EQ(s.overflow_rate, 1.0 / 7.0);
  EXPECT_EQ(s.headroom_log2, -3.0);  // 65504 / (8 * 65504)
  // Histogram of x * 8: three zeros, and one value in each of these bins.
  EXPECT_EQ(s.histogram.zeros, 3u);
  EXPECT_EQ(s.histogram.at(-22), 3u);  // 2^-22, 3*2^-23 = 1.5 * 2^-22, -2^-22
  for (int e : {-23, -17, 3, 18}) EXPECT_EQ(s.histogram.at(e), 1u) << e;  // 65504 * 8 = 1.999 * 2^18
  EXPECT_EQ(s.histogram.total(), crafted.size());
}

// Counts made elsewhere (the Python package's torch path) are finished as tensor_stats finishes its own:
// the hand-worked values above at scale 8 (5 of 7 subnormal, 1 overflow, headroom -3), and counts that
// cannot be one tensor's are refused.
// lost_updates_of_step takes the step a block at a time: its counts are those of lost_updates on the whole
// update, on sizes below, at and past a block (16384) and with weights that fp16 rounds (not its values),
// overflows and loses updates on.
TEST(RecordLostUpdates, OfAStepByBlocksEqualsTheWholeUpdate) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const std::size_t n : {std::size_t{0}, std::size_t{1000}, std::size_t{16384}, std::size_t{40001}}) {
    std::vector<float> before(n), after(n);
    for (std::size_t i = 0; i < n; ++i) {
      before[i] = normal(rng) * (i % 97 == 0 ? 70000.0f : 1.0f);
      after[i] = before[i] + normal(rng) * std::ldexp(1.0f, -static_cast<int>(i % 24));
    }
    for (const char* name : {"fp16", "bf16", "fp8-e4m3"}) {
      const formats::Format f = formats::parse_format(name);
      const record::LostUpdateStats whole = record::lost_updates(before, record::applied_update(before, after), f);
      const record::LostUpdateStats blocks = record::lost_updates_of_step(before, after, f);
      for (const auto& [a, b] : {std::pair{&whole.without_master, &blocks.without_master},
                                 std::pair{&whole.with_master, &blocks.with_master}}) {
        EXPECT_EQ(a->precision, b->precision) << name;
        EXPECT_EQ(a->elements, b->elements) << name;
        EXPECT_EQ(a->updates, b->updates) << name;
        EXPECT_EQ(a->lost, b->lost) << name;
        EXPECT_EQ(a->ratio_needed, b->ratio_needed) << name;
        EXPECT_EQ(a->ratio_sufficient, b->ratio_sufficient) << name;
        EXPECT_EQ(a->lost_rate, b->lost_rate) << name;
      }
      if (n > 1000) {
        EXPECT_GT(whole.without_master.lost, 0u) << name;
      }
    }
  }
  EXPECT_THROW(record::lost_updates_of_step(std::vector<float>(2), std::vector<float>(3), fp16), std::invalid_argument);
}

TEST(RecordTensorStats, CountsMadeElsewhereAreFinishedAlike) {
  record::TensorStats counted;
  counted.counters.elements = 10;
  counted.counters.zeros_in = 3;
  counted.counters.subnormal = 5;
  counted.counters.overflow = 1;
  counted.max_abs = 65504.0;
  counted.norm = 1.0;
  const auto s = record::finish_tensor_stats(counted, fp16, 8.0);
  EXPECT_EQ(s.count, 10u);
  EXPECT_EQ(s.nonzero_finite, 7u);
  EXPECT_DOUBLE_EQ(s.subnormal_rate, 5.0 / 7.0);
  EXPECT_DOUBLE_EQ(s.overflow_rate, 1.0 / 7.0);
  EXPECT_EQ(s.underflow_to_zero_rate, 0.0);
  EXPECT_EQ(s.headroom_log2, -3.0);
  EXPECT_EQ(s.thresholds.max_finite, 65504.0);
  EXPECT_EQ(s.norm, 1.0);  // kept as given
  auto bad = counted;
  bad.counters.subnormal = 7;  // 7 + 1 overflowing of 7 is fine; 7 subnormal with 1 underflowing is not
  bad.counters.underflow_to_zero = 1;
  EXPECT_THROW(record::finish_tensor_stats(bad, fp16, 8.0), std::invalid_argument);
  bad = counted;
  bad.counters.zeros_in = 11;
  EXPECT_THROW(record::finish_tensor_stats(bad, fp16, 8.0), std::invalid_argument);
  bad = counted;
  bad.max_abs = std::numeric_limits<double>::infinity();
  EXPECT_THROW(record::finish_tensor_stats(bad, fp16, 8.0), std::invalid_argument);
  EXPECT_THROW(record::finish_tensor_stats(counted, fp16, 3.1), std::invalid_argument);  // not a float
}

TEST(RecordTensorStats, Fp16AtScale1024) {
  // x * 2^10: 2^-15, 2^-16, 3*2^-16 (= 1.5 * 2^-15), -2^-15: subnormals (below
  // 2^-14); 2^-10 and 1024 normal; 65504 * 1024: overflow.
  const auto s = record::tensor_stats(crafted, fp16, 0x1p10);
  EXPECT_EQ(s.counters.underflow_to_zero, 0u);
  EXPECT_EQ(s.counters.subnormal, 4u);
  EXPECT_EQ(s.counters.overflow, 1u);
  EXPECT_DOUBLE_EQ(s.subnormal_rate, 4.0 / 7.0);
  EXPECT_DOUBLE_EQ(s.overflow_rate, 1.0 / 7.0);
  EXPECT_EQ(s.histogram.at(-15), 3u);  // 2^-15, 1.5 * 2^-15, -2^-15
  EXPECT_EQ(s.histogram.at(-16), 1u);
  EXPECT_EQ(s.histogram.at(-10), 1u);
  EXPECT_EQ(s.histogram.at(10), 1u);
  EXPECT_EQ(s.histogram.at(25), 1u);  // 65504 * 2^10 = 1.999... * 2^25
  EXPECT_EQ(s.histogram.zeros, 3u);
  EXPECT_EQ(s.histogram.total(), crafted.size());
}

TEST(RecordTensorStats, HistogramMarksTheFormatThresholds) {
  const auto s = record::tensor_stats(crafted, fp16, 1.0);
  EXPECT_EQ(s.thresholds.min_subnormal_exponent, -24);
  EXPECT_EQ(s.thresholds.min_normal_exponent, -14);
  EXPECT_EQ(s.thresholds.max_finite_exponent, 15);
  EXPECT_EQ(s.thresholds.max_finite, 65504.0);
  EXPECT_EQ(s.histogram.total(), crafted.size());
  // At scale 1: bins -25 (two values), -26, -25 again for 3*2^-26 = 1.5*2^-25, -20, 0, 15.
  EXPECT_EQ(s.histogram.at(-25), 3u);
  EXPECT_EQ(s.histogram.at(-26), 1u);
  EXPECT_EQ(s.histogram.at(-20), 1u);
  EXPECT_EQ(s.histogram.at(0), 1u);
  EXPECT_EQ(s.histogram.at(15), 1u);
}

TEST(RecordTensorStats, HeadroomOnPowersOfTwoAndOverflowAt2To16) {
  const std::vector<float> x = {1.0f, -0.5f, 0.0f};
  const auto s1 = record::tensor_stats(x, fp16, 1.0);
  // log2(65504) = 16 + log2(1 - 2^-11) = 16 - 7.0461...e-4.
  EXPECT_NEAR(s1.headroom_log2, 16.0 + std::log1p(-0x1p-11) / std::log(2.0), 1e-12);
  // A power-of-two scale shifts it by exactly its log2 (8 and 16 - 3: same
  // binade, same spacing of doubles).
  EXPECT_EQ(record::tensor_stats(x, fp16, 8.0).headroom_log2, s1.headroom_log2 - 3.0);
  // At 2^16: log2(65504 / 65536) = log2(1 - 2^-11) = -7.0461...e-4: negative.
  const auto s16 = record::tensor_stats(x, fp16, 0x1p16);
  // Tolerance: both sides are log2 of the exact 1 - 2^-11 within a few ulps of
  // 7e-4 (an ulp there is 2^-63, 1.1e-19): no cancellation allowed.
  EXPECT_NEAR(s16.headroom_log2, std::log1p(-0x1p-11) / std::log(2.0), 1e-18);
  EXPECT_LT(s16.headroom_log2, 0.0);
  // Ratios that are powers of two give exact integers: 65504 / (65504 * 2^-5) = 2^5.
  EXPECT_EQ(record::tensor_stats(std::vector<float>{65504.0f}, fp16, 0x1p-5).headroom_log2, 5.0);
  // 1 * 2^16 = 65536 > 65520: overflows to infinity; -0.5 * 2^16 = -32768 does not.
  EXPECT_EQ(s16.counters.overflow, 1u);
  EXPECT_DOUBLE_EQ(s16.overflow_rate, 0.5);  // 1 of the 2 non-zero values
  EXPECT_EQ(s16.histogram.at(16), 1u);
  EXPECT_EQ(s16.histogram.at(15), 1u);
  // 2^15 * 2 = 65536 overflows too, while 2^15 at scale 1 has headroom just under 1.
  EXPECT_EQ(record::tensor_stats(std::vector<float>{0x1p15f}, fp16, 2.0).counters.overflow, 1u);
}

TEST(RecordTensorStats, EmptyAndZeroTensors) {
  const auto s = record::tensor_stats(std::vector<float>{0.0f, -0.0f}, fp16, 1.0);
  EXPECT_EQ(s.nonzero_finite, 0u);
  EXPECT_EQ(s.underflow_to_zero_rate, 0.0);
  EXPECT_EQ(s.max_abs, 0.0);
  EXPECT_TRUE(std::isinf(s.headroom_log2) && s.headroom_log2 > 0);
  EXPECT_EQ(record::tensor_stats(std::vector<float>{}, fp16, 1.0).count, 0u);
}

TEST(RecordTensorStats, NonFiniteInputsAreCountedApart) {
  const std::vector<float> x = {nan, inf, -inf, 0x1p-26f, 2.0f};
  const auto s = record::tensor_stats(x, fp16, 1.0);
  EXPECT_EQ(s.nonfinite_in, 3u);
  EXPECT_EQ(s.nonzero_finite, 2u);
  EXPECT_DOUBLE_EQ(s.underflow_to_zero_rate, 0.5);  // 2^-26 -> 0, out of the 2 finite non-zero
  EXPECT_EQ(s.counters.overflow, 0u);               // infinity in is not an overflow
  EXPECT_EQ(s.max_abs, 2.0);                        // the infinities are not its max
  EXPECT_EQ(s.histogram.nans, 1u);
  EXPECT_EQ(s.histogram.infinities, 2u);
}

// The scale-1 histogram reads exponents off the float bits; add(double), one value at a time, is the
// definition it must agree with, on every kind of float: signed zeros, subnormals, normals, the top
// binade, infinities and NaNs, and random bit patterns.
TEST(RecordTensorStats, HistogramAtScale1EqualsTheDefinition) {
  std::vector<float> x = {0.0f, -0.0f, 0x1p-149f, -0x1.8p-140f, 0x1.fffffep-127f, 0x1p-126f, 1.0f, -3.5f,
                          0x1.fffffep127f, inf, -inf, nan};
  std::mt19937 rng(11);
  for (int i = 0; i < 20000; ++i) x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  emu::ExponentHistogram fast, definition;
  fast.add(x, 1.0f);
  for (const float v : x) definition.add(static_cast<double>(v));
  EXPECT_EQ(fast.bins, definition.bins);
  EXPECT_EQ(fast.zeros, definition.zeros);
  EXPECT_EQ(fast.nans, definition.nans);
  EXPECT_EQ(fast.infinities, definition.infinities);
  EXPECT_EQ(fast.total(), x.size());
  // And tensor_stats at scale 1 counts as the scalar path (the definition of each rounding) does.
  const auto quick = record::tensor_stats(x, fp16, 1.0), scalar = record::tensor_stats(x, fp16, 1.0, record::StatsPath::scalar);
  EXPECT_EQ(quick.counters, scalar.counters);
  EXPECT_EQ(quick.max_abs, scalar.max_abs);
  float largest_finite = 0;  // the definition, element by element
  for (const float v : x)
    if (std::isfinite(v)) largest_finite = std::max(largest_finite, std::fabs(v));
  EXPECT_EQ(quick.max_abs, largest_finite);
}

TEST(RecordTensorStats, ProductsOutsideFloatTakeTheScalarPath) {
  // bf16 has float's exponent range: 2^120 * 2^16 = 2^136 is beyond float
  // (a float product would be infinity, counted as a non-finite input), but
  // it is an overflow of bf16; 1.5 * 2^-140 * 2^-16 = 1.5 * 2^-156 is below
  // float's and bf16's smallest subnormal (2^-149, 2^-133): underflow to zero.
  const std::vector<float> x = {0x1p120f, 0x3p-141f, 1.0f};
  EXPECT_THROW(record::tensor_stats(x, bf16, 0x1p16, record::StatsPath::quantize), std::invalid_argument);
  const auto big = record::tensor_stats(x, bf16, 0x1p16);
  EXPECT_EQ(big.nonfinite_in, 0u);
  EXPECT_EQ(big.counters.overflow, 1u);
  EXPECT_EQ(big.histogram.above_range, 1u);  // 2^136 >= 2^128
  const auto tiny = record::tensor_stats(x, bf16, 0x1p-16);
  EXPECT_EQ(tiny.counters.underflow_to_zero, 1u);
  EXPECT_EQ(tiny.histogram.below_range, 1u);
  EXPECT_EQ(tiny.counters.overflow, 0u);
}

TEST(RecordTensorStats, RejectsScalesThatAreNotPositiveFloats) {
  const std::vector<float> x = {1.0f};
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::infinity(), 1.0 + 0x1p-40})
    EXPECT_THROW(record::tensor_stats(x, fp16, bad), std::invalid_argument) << bad;
}

// Values spread over 2^-40 .. 2^20 with zeros and non-finite ones mixed in.
std::vector<float> seeded_values(std::uint32_t seed, std::size_t n, int lo, int hi) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> exponent(lo, hi), kind(0, 99);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::vector<float> x(n);
  for (auto& v : x) {
    const int k = kind(gen);
    if (k == 0) v = 0.0f;
    else if (k == 1) v = (k & 1) ? inf : -inf;
    else if (k == 2) v = nan;
    else v = std::ldexp(mantissa(gen), exponent(gen)) * (k % 2 ? 1.0f : -1.0f);
  }
  return x;
}

// The counts computed here from formats::from_double, one value at a time.
void expect_brute_force_recount(const std::vector<float>& x, const formats::Format& f, double scale) {
  std::uint64_t zeros = 0, nonfinite = 0, to_zero = 0, subnormal = 0, overflow = 0;
  std::vector<std::uint64_t> bins(emu::ExponentHistogram::exponent_bins);
  double max_abs = 0;
  for (const float xi : x) {
    const double v = static_cast<double>(xi) * scale;
    formats::Flags flags;
    const std::uint32_t bits = formats::from_double(f, v, formats::RoundingContext{}, flags);
    if (v == 0) { ++zeros; continue; }
    if (!std::isfinite(v)) { ++nonfinite; continue; }
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(xi)));
    to_zero += formats::is_zero(f, bits);
    subnormal += formats::is_subnormal(f, bits);
    overflow += formats::is_infinity(f, bits);  // an IEEE format rounding to nearest
    int e = 0;
    std::frexp(v, &e);
    if (e - 1 >= emu::ExponentHistogram::min_exponent && e - 1 <= emu::ExponentHistogram::max_exponent)
      ++bins[static_cast<std::size_t>(e - 1 - emu::ExponentHistogram::min_exponent)];
  }
  const auto s = record::tensor_stats(x, f, scale);
  const std::uint64_t denominator = x.size() - zeros - nonfinite;
  EXPECT_EQ(s.zeros_in, zeros);
  EXPECT_EQ(s.nonfinite_in, nonfinite);
  EXPECT_EQ(s.counters.underflow_to_zero, to_zero);
  EXPECT_EQ(s.counters.subnormal, subnormal);
  EXPECT_EQ(s.counters.overflow, overflow);
  EXPECT_EQ(s.underflow_to_zero_rate, static_cast<double>(to_zero) / static_cast<double>(denominator));
  EXPECT_EQ(s.subnormal_rate, static_cast<double>(subnormal) / static_cast<double>(denominator));
  EXPECT_EQ(s.overflow_rate, static_cast<double>(overflow) / static_cast<double>(denominator));
  EXPECT_EQ(s.max_abs, max_abs);
  for (std::size_t i = 0; i < bins.size(); ++i) EXPECT_EQ(s.histogram.bins[i], bins[i]) << i;
  EXPECT_EQ(s.histogram.total(), x.size());
  EXPECT_GT(to_zero + subnormal + overflow, 0u);  // the values reach the thresholds at all
}

TEST(RecordTensorStats, BruteForceRecountFp16) {
  for (std::uint32_t seed : {1u, 2u}) {
    const auto x = seeded_values(seed, 100000, -40, 20);
    for (double scale : {1.0, 8.0, 0x1p10, 0x1p-3}) {
      SCOPED_TRACE(scale);
      expect_brute_force_recount(x, fp16, scale);
    }
  }
}

TEST(RecordTensorStats, BruteForceRecountBf16OutsideFloat) {
  const auto x = seeded_values(3, 100000, -140, 120);  // products leave float's range at 2^+-16
  for (double scale : {0x1p16, 0x1p-16}) {
    SCOPED_TRACE(scale);
    expect_brute_force_recount(x, bf16, scale);
  }
}

TEST(RecordTensorStats, BothPathsAgree) {
  const auto x = seeded_values(4, 100000, -40, 20);
  for (const auto& f : {fp16, bf16, formats::parse_format("fp8-e4m3"), formats::parse_format("e5m7")}) {
    for (double scale : {1.0, 0x1p10, 0x1p-5}) {
      SCOPED_TRACE(f.name + " " + std::to_string(scale));
      const auto q = record::tensor_stats(x, f, scale, record::StatsPath::quantize);
      const auto s = record::tensor_stats(x, f, scale, record::StatsPath::scalar);
      EXPECT_EQ(q.counters, s.counters);
      EXPECT_EQ(q.histogram, s.histogram);
      EXPECT_EQ(q.headroom_log2, s.headroom_log2);
    }
  }
}

// --- the fused pass against the separate passes ------------------------------------------
// The separate passes (quantize with counters, ExponentHistogram::add, the maximum, the norm: the path
// tensor_stats took before the fused one existed) are the definition; the fused pass must give the same
// counts and the same bits of every output, in both kernels, for every format it accepts.

// Values on both sides of each threshold of f (computed here from the format's constants, in double, then
// stepped through neighbouring floats): half the smallest subnormal, the smallest subnormal, the tininess
// midpoint below the smallest normal, the smallest normal, the largest finite and the midpoint above it.
std::vector<float> threshold_neighbours(const formats::Format& f) {
  const double ulp_top = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(f.max_finite()))) - f.mantissa_bits);
  std::vector<float> out;
  for (const double t : {f.min_subnormal() / 2, f.min_subnormal(), f.min_subnormal() * 1.5,
                         f.min_normal() * (1 - std::ldexp(1.0, -(f.precision() + 1))), f.min_normal(),
                         f.max_finite(), f.max_finite() + ulp_top / 2, f.max_finite() + ulp_top}) {
    if (!(t < std::numeric_limits<float>::max())) continue;
    float v = static_cast<float>(t);
    for (int i = 0; i < 6; ++i) v = std::nextafter(v, 0.0f);
    for (int i = 0; i < 12; ++i, v = std::nextafter(v, inf)) {
      out.push_back(v);
      out.push_back(-v);
    }
  }
  return out;
}

// Random magnitudes over the whole float range (subnormals included), zeros of both signs, infinities,
// quiet and signalling NaNs of both signs, and f's threshold neighbours, shuffled.
std::vector<float> fused_test_values(const formats::Format& f, std::uint32_t seed, std::size_t n) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::uint32_t> bits(0, 0xffffffffu);
  std::uniform_int_distribution<int> kind(0, 99), exponent(-30, 30);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  const std::vector<float> edges = threshold_neighbours(f);
  const std::array<std::uint32_t, 6> specials = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fa00001u,
                                                 0xffc00000u};
  std::vector<float> x(n);
  for (auto& v : x) {
    const int k = kind(gen);
    if (k < 6) v = std::bit_cast<float>(specials[static_cast<std::size_t>(k)]);
    else if (k < 12) v = std::bit_cast<float>(bits(gen) & 0x807fffffu);  // float subnormals
    else if (k < 40) v = std::bit_cast<float>(bits(gen));                 // anywhere, NaNs included
    else if (k < 60) v = edges[bits(gen) % edges.size()];
    else v = std::ldexp(mantissa(gen), exponent(gen)) * (k % 2 ? 1.0f : -1.0f);  // the typical range
  }
  return x;
}

void expect_fused_equals_separate(const std::vector<float>& x, const formats::Format& f) {
  const auto& c = record::detail::rounding_classifier(f);
  ASSERT_TRUE(c.usable);
  const record::TensorStats ref = record::tensor_stats(x, f, 1.0, record::StatsPath::quantize);
  std::vector<record::detail::FusedKernel> kernels = {record::detail::FusedKernel::portable};
  if (record::detail::fused_avx2_available()) kernels.push_back(record::detail::FusedKernel::avx2);
  if (record::detail::fused_avx512_available()) kernels.push_back(record::detail::FusedKernel::avx512);
  for (const auto kernel : kernels) {
    SCOPED_TRACE(kernel == record::detail::FusedKernel::portable ? "portable"
                 : kernel == record::detail::FusedKernel::avx2   ? "avx2"
                                                                 : "avx512");
    const auto r = record::detail::fused_pass(x, c, kernel);
    EXPECT_EQ(r.counters, ref.counters);
    EXPECT_EQ(r.histogram, ref.histogram);
    EXPECT_EQ(std::bit_cast<std::uint64_t>(static_cast<double>(r.max_abs)), std::bit_cast<std::uint64_t>(ref.max_abs));
    EXPECT_EQ(std::bit_cast<std::uint64_t>(r.norm), std::bit_cast<std::uint64_t>(ref.norm));
  }
  const record::TensorStats fused = record::tensor_stats(x, f, 1.0, record::StatsPath::fused);
  EXPECT_EQ(fused.counters, ref.counters);
  EXPECT_EQ(fused.histogram, ref.histogram);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(fused.headroom_log2), std::bit_cast<std::uint64_t>(ref.headroom_log2));
  EXPECT_EQ(fused.underflow_to_zero_rate, ref.underflow_to_zero_rate);
  EXPECT_EQ(fused.nonzero_finite, ref.nonzero_finite);
}

std::vector<formats::Format> fused_formats() {
  std::vector<formats::Format> out = formats::presets();
  for (const char* name : {"fp32", "e5m7", "e3m2", "e2m1", "e4m3", "e6m9", "e8m22", "fp16:saturate", "e5m2:nan"})
    out.push_back(formats::parse_format(name));
  return out;
}

TEST(TensorStatsFused, EqualsTheSeparatePassesOnEveryFormatItAccepts) {
  int accepted = 0;
  for (const formats::Format& f : fused_formats()) {
    SCOPED_TRACE(f.name);
    if (!record::detail::rounding_classifier(f).usable) {
      EXPECT_THROW(record::tensor_stats(std::vector<float>{1.0f}, f, 1.0, record::StatsPath::fused),
                   std::invalid_argument);
      continue;
    }
    ++accepted;
    expect_fused_equals_separate(fused_test_values(f, 11, 100003), f);
  }
  // The formats the recorders meet: every signed preset with a zero and subnormals.
  for (const char* name : {"fp16", "bf16", "tf32", "fp32", "fp8-e4m3", "fp8-e5m2", "fp8-e4m3fnuz", "fp4-e2m1"})
    EXPECT_TRUE(record::detail::rounding_classifier(formats::parse_format(name)).usable) << name;
  EXPECT_GE(accepted, 12);
}

TEST(TensorStatsFused, EveryLengthAndAlignment) {
  // Lengths around the kernels' blocks (16 lanes, 8 partial sums), and starts off a vector boundary.
  const auto all = fused_test_values(fp16, 12, 200);
  for (std::size_t start : {0u, 1u, 3u})
    for (std::size_t n = 0; n <= 70; ++n) {
      SCOPED_TRACE(std::to_string(start) + "+" + std::to_string(n));
      expect_fused_equals_separate(std::vector<float>(all.begin() + start, all.begin() + start + n), fp16);
    }
}

TEST(TensorStatsFused, ScalesOtherThanOneAndUnclassifiedFormatsTakeTheSeparatePasses) {
  const std::vector<float> x = {1.0f, 0x1p-30f};
  EXPECT_THROW(record::tensor_stats(x, fp16, 2.0, record::StatsPath::fused), std::invalid_argument);
  for (const char* name : {"e8m0", "ue4m3", "fp16:ftz"}) {
    const auto f = formats::parse_format(name);
    EXPECT_FALSE(record::detail::rounding_classifier(f).usable) << name;
    const auto automatic = record::tensor_stats(x, f, 1.0);
    EXPECT_EQ(automatic.counters, record::tensor_stats(x, f, 1.0, record::StatsPath::quantize).counters) << name;
  }
}

// Vectors of 8 that are all plain (tensor_stats_fused.h: normal, finite, neither tiny nor overflowing in the
// format) or zero take the AVX2 kernel's short path; these runs mix such vectors with any others.
std::vector<float> plain_run_values(const formats::Format& f, std::uint32_t seed, std::size_t vectors) {
  const auto& c = record::detail::rounding_classifier(f);
  std::mt19937 gen(seed);
  const std::vector<float> other = fused_test_values(f, seed + 1, vectors * 8);
  std::vector<float> x;
  for (std::size_t v = 0; v < vectors; ++v)
    for (std::size_t j = 0; j < 8; ++j) {
      if (gen() % 10 < 3) {
        x.push_back(other[v * 8 + j]);
        continue;
      }
      const std::uint32_t field = c.plain_field_lo + static_cast<std::uint32_t>(gen()) % (c.plain_field_hi - c.plain_field_lo);
      const std::uint32_t mantissa = gen() % 4 == 0 ? (gen() & 0x7fffffu) & ~c.plain_mask : gen() & 0x7fffffu;
      const std::uint32_t sign = (gen() & 1u) << 31;
      x.push_back(gen() % 5 == 0 ? 0.0f : std::bit_cast<float>(sign | field << 23 | mantissa));
    }
  return x;
}

TEST(TensorStatsFused, PlainVectorsTakeTheShortPathWithTheSameCounts) {
  // fp16's normal binades are 2^-14 .. 2^15, float exponent fields 113 .. 142; 142 holds the overflow
  // threshold 65520, so the plain fields are [113, 142); values exact in fp16 have their low 13 bits clear.
  const auto& c16 = record::detail::rounding_classifier(fp16);
  EXPECT_EQ(c16.plain_field_lo, 113u);
  EXPECT_EQ(c16.plain_field_hi, 142u);
  EXPECT_EQ(c16.plain_mask, 0x1fffu);
  for (const char* name : {"fp16", "bf16", "fp8-e4m3", "fp8-e5m2", "tf32", "fp32", "fp4-e2m1"}) {
    SCOPED_TRACE(name);
    const formats::Format f = formats::parse_format(name);
    const auto& c = record::detail::rounding_classifier(f);
    if (c.plain_field_lo >= c.plain_field_hi) {
      ADD_FAILURE() << name << " has no plain fields";
      continue;
    }
    expect_fused_equals_separate(plain_run_values(f, 21, 2000), f);
  }
}

// The norm against its definition computed independently here: eight partial sums in long double would
// differ, so the order is transcribed from tensor_stats.h and the squares are formed the same way.
TEST(TensorStatsFused, NormFollowsItsDocumentedOrder) {
  const auto x = fused_test_values(bf16, 13, 1003);
  double sums[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= x.size(); i += 8)
    for (std::size_t j = 0; j < 8; ++j)
      if (std::isfinite(x[i + j])) sums[j] += static_cast<double>(x[i + j]) * static_cast<double>(x[i + j]);
  for (; i < x.size(); ++i)
    if (std::isfinite(x[i])) sums[0] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  const double expected =
      std::sqrt(((sums[0] + sums[1]) + (sums[2] + sums[3])) + ((sums[4] + sums[5]) + (sums[6] + sums[7])));
  EXPECT_EQ(record::tensor_stats(x, bf16, 1.0).norm, expected);
  EXPECT_EQ(record::tensor_stats(x, bf16, 1.0, record::StatsPath::quantize).norm, expected);
}

// --- lost updates --------------------------------------------------------------
record::LostUpdateCounts one(float w, float u, const formats::Format& f) {
  return record::lost_update_counts(std::vector<float>{w}, std::vector<float>{u}, f);
}

TEST(RecordLostUpdates, Fp16ByHand) {
  // fp16 near 1: spacing 2^-10 above 1, 2^-11 below; p = 11: a loss needs
  // |w|/|u| >= 2^11, and |w|/|u| > 2^12 is always lost.
  // 1 + 2^-12: below the midpoint 1 + 2^-11 -> 1: lost at |w|/|u| = 2^12,
  // which is not above 2^12 (the sufficient bound is not reached).
  auto c = one(1.0f, 0x1p-12f, fp16);
  EXPECT_EQ(c.updates, 1u);
  EXPECT_EQ(c.lost, 1u);
  EXPECT_EQ(c.ratio_needed, 1u);
  EXPECT_EQ(c.ratio_sufficient, 0u);
  // 1 + 2^-13: lost, and 2^13 > 2^12.
  c = one(1.0f, 0x1p-13f, fp16);
  EXPECT_EQ(c.lost, 1u);
  EXPECT_EQ(c.ratio_sufficient, 1u);
  // 1 + 2^-11: exactly the midpoint, ties to the even 1: lost at the
  // needed bound itself, 2^11.
  c = one(1.0f, 0x1p-11f, fp16);
  EXPECT_EQ(c.lost, 1u);
  EXPECT_EQ(c.ratio_needed, 1u);
  EXPECT_EQ(c.ratio_sufficient, 0u);
  // (1 + 2^-10) + 2^-11: a midpoint whose even neighbour is 1 + 2^-9: kept.
  c = one(1.0f + 0x1p-10f, 0x1p-11f, fp16);
  EXPECT_EQ(c.lost, 0u);
  // 1 + 2^-10: the next value: kept.
  EXPECT_EQ(one(1.0f, 0x1p-10f, fp16).lost, 0u);
  // Below 1 the spacing halves: 1 - 2^-11 exists (kept at ratio 2^11, which
  // a loss would need but does not imply), 1 - 2^-12 is the midpoint of
  // 1 - 2^-11 and 1, ties to 1: lost.
  c = one(1.0f, -0x1p-11f, fp16);
  EXPECT_EQ(c.lost, 0u);
  EXPECT_EQ(c.ratio_needed, 1u);
  c = one(1.0f, -0x1p-12f, fp16);
  EXPECT_EQ(c.lost, 1u);
  EXPECT_EQ(c.ratio_needed, 1u);
  EXPECT_EQ(c.ratio_sufficient, 0u);
  // 2047 + 0.8999 (0.89990234375 in fp16) = 2047.8999, nearer 2048 than 2047 (spacing 1): kept, although
  // |w|/|u| is about 2275 > 2^11.
  c = one(2047.0f, 0.89990234375f, fp16);
  EXPECT_EQ(c.lost, 0u);
  EXPECT_EQ(c.ratio_needed, 1u);
}

// fp32 (master weights) by spacing against the emulated additions, element by element: weights of every
// binade (subnormals included), updates at the half gaps exactly, a float step either side of them, and
// at random ratios around 2^24; and a w that is not a value of the format falls back to adding.
TEST(RecordLostUpdates, SpacingPathEqualsAddingForFp32) {
  const auto fp32 = formats::parse_format("fp32");
  std::mt19937 rng(29);
  std::vector<float> w, u;
  for (int i = 0; i < 20000; ++i) {
    const float wi = std::bit_cast<float>(static_cast<std::uint32_t>(rng()) & 0xff7fffffu);  // finite
    const int e = std::max(std::ilogb(wi), -126);
    const float half_gap = std::ldexp(1.0f, e - 24 - static_cast<int>(rng() % 2));  // also the denser binade's
    const float pick[] = {half_gap, std::nextafter(half_gap, 0.0f), std::nextafter(half_gap, HUGE_VALF),
                          std::ldexp(std::fabs(wi), -22 - static_cast<int>(rng() % 6)) * (1.0f + 0x1p-23f * static_cast<float>(rng() % 1024))};
    const float ui = pick[rng() % 4];
    w.push_back(wi);
    u.push_back(rng() % 2 ? ui : -ui);
  }
  for (std::size_t i = 0; i < w.size(); ++i) {
    const std::vector<float> wi{w[i]}, ui{u[i]};
    const auto spaced = record::lost_update_counts(wi, ui, fp32, record::LostUpdatePath::spacing);
    const auto added = record::lost_update_counts(wi, ui, fp32, record::LostUpdatePath::adding);
    ASSERT_EQ(spaced.lost, added.lost) << "w=" << std::hexfloat << w[i] << " u=" << u[i];
    ASSERT_EQ(spaced.updates, added.updates) << "w=" << std::hexfloat << w[i] << " u=" << u[i];
  }
  const auto all = record::lost_update_counts(w, u, fp32);
  EXPECT_GT(all.lost, 1000u);  // the sample reaches both outcomes
  EXPECT_LT(all.lost, all.updates - 1000u);
  // 1 + 2^-20 is not an fp16 value: spacing refuses it, automatic adds (2^-12 is lost on fp16's grid? no
  // w is not on the grid: fl16(1 + 2^-20 + 2^-12) = 1 != w, so not lost).
  const std::vector<float> off_grid{1.0f + 0x1p-20f}, small{0x1p-12f};
  EXPECT_THROW(record::lost_update_counts(off_grid, small, fp16, record::LostUpdatePath::spacing), std::invalid_argument);
  EXPECT_EQ(record::lost_update_counts(off_grid, small, fp16).lost, 0u);
  EXPECT_EQ(record::lost_update_counts(off_grid, small, fp16).updates, 1u);
}

// The update a step applied: after - before, exact where the difference is a float (worked by hand).
TEST(RecordLostUpdates, AppliedUpdateIsTheDifference) {
  const std::vector<float> before = {1.0f, 1.0f, -2.0f, 0x1p-149f, 65504.0f};
  const std::vector<float> after = {1.0f + 0x1p-20f, 1.0f, -2.0f - 0x1p-22f, 0.0f, 65536.0f};
  const std::vector<float> u = record::applied_update(before, after);
  EXPECT_EQ(u, (std::vector<float>{0x1p-20f, 0.0f, -0x1p-22f, -0x1p-149f, 32.0f}));
  // 2^30 - 1: exact in double, not a float (the floats below 2^30 are 64 apart): rounded once, to 2^30.
  EXPECT_EQ(record::applied_update(std::vector<float>{1.0f}, std::vector<float>{0x1p30f})[0], 0x1p30f);
  EXPECT_THROW(record::applied_update(std::vector<float>{1.0f}, std::vector<float>{}), std::invalid_argument);
}

TEST(RecordLostUpdates, ZeroAndSubnormalWeights) {
  // A u added to w = 0 that fp16 rounds to 0 is underflow, not a lost update.
  auto c = one(0.0f, 0x1p-30f, fp16);
  EXPECT_EQ(c.updates, 1u);
  EXPECT_EQ(c.lost, 0u);
  // A subnormal w has a fixed spacing (2^-24 in fp16): 2^-24 + 2^-26 rounds
  // back to 2^-24 at a ratio of only 4, so the needed bound holds for normal w only.
  c = one(0x1p-24f, 0x1p-26f, fp16);
  EXPECT_EQ(c.lost, 1u);
  EXPECT_EQ(c.ratio_needed, 0u);
}

TEST(RecordLostUpdates, Bf16ByHand) {
  // bf16: p = 8, spacing 2^-7 above 1, midpoint 1 + 2^-8.
  auto c = one(1.0f, 0x1p-9f, bf16);
  EXPECT_EQ(c.lost, 1u);
  EXPECT_EQ(c.ratio_needed, 1u);      // 2^9 >= 2^8
  EXPECT_EQ(c.ratio_sufficient, 0u);  // 2^9 is not above 2^9
  c = one(1.0f, 0x1p-8f, bf16);  // the tie: lost
  EXPECT_EQ(c.lost, 1u);
  EXPECT_EQ(c.ratio_needed, 1u);
  EXPECT_EQ(one(1.0f, 0x1p-7f, bf16).lost, 0u);
}

TEST(RecordLostUpdates, RatesAndMasterWeights) {
  // fp16 weights 1 with updates 2^-12, 2^-11, 2^-10, 0 (not an update), and a
  // weight 1 + 2^-12 that fp16 stores as 1.
  const std::vector<float> w = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f + 0x1p-12f};
  const std::vector<float> u = {0x1p-12f, 0x1p-11f, 0x1p-10f, 0.0f, 0x1p-12f};
  const auto s = record::lost_updates(w, u, fp16);
  EXPECT_EQ(s.without_master.precision, 11);
  EXPECT_EQ(s.without_master.elements, 5u);
  EXPECT_EQ(s.without_master.updates, 4u);  // u = 0 is not in the denominator
  EXPECT_EQ(s.without_master.lost, 3u);     // 2^-12 twice (the stored w is 1), the tie 2^-11
  EXPECT_EQ(s.without_master.ratio_needed, 3u);  // 2^12, 2^11, 2^12 (2^10 is below 2^11)
  EXPECT_EQ(s.without_master.ratio_sufficient, 0u);
  EXPECT_DOUBLE_EQ(s.without_master.lost_rate, 0.75);
  EXPECT_DOUBLE_EQ(s.without_master.ratio_needed_rate, 0.75);
  EXPECT_DOUBLE_EQ(s.without_master.ratio_sufficient_rate, 0.0);
  // fp32 masters: 1 + 2^-12, 1 + 2^-11, 1 + 2^-10 and 1 + 2^-11 all exist: nothing lost.
  EXPECT_EQ(s.with_master.precision, 24);
  EXPECT_EQ(s.with_master.updates, 4u);
  EXPECT_EQ(s.with_master.lost, 0u);
  EXPECT_EQ(s.with_master.ratio_needed, 0u);
  // fp32 loses 2^-25 from 1 (below the midpoint 1 + 2^-24) and the tie 2^-24.
  const formats::Format fp32 = formats::parse_format("fp32");
  EXPECT_EQ(one(1.0f, 0x1p-25f, fp32).lost, 1u);
  EXPECT_EQ(one(1.0f, 0x1p-25f, fp32).ratio_needed, 1u);
  EXPECT_EQ(one(1.0f, 0x1p-26f, fp32).ratio_sufficient, 1u);
  EXPECT_EQ(one(1.0f, 0x1p-24f, fp32).lost, 1u);
  EXPECT_EQ(one(1.0f, 0x1p-23f, fp32).lost, 0u);
  EXPECT_THROW(record::lost_updates(w, std::vector<float>{1.0f}, fp16), std::invalid_argument);
}

// --- run log ---------------------------------------------------------------------
class RecordRunLog : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            ("mpverify_record_" + std::to_string(::getpid()) + "_" + std::string(info->name()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static nlohmann::json step(int i) {
    return {{"step", i}, {"loss", 1.0 / (i + 1)}, {"scale", 65536.0}, {"skipped", i == 1}, {"note", "a\nb"}};
  }
  fs::path root_;
};

TEST_F(RecordRunLog, WritesStepsAndReadsThemBack) {
  const fs::path dir = root_ / "run" / "nested";
  {
    record::RunLog log(dir);
    for (int i = 0; i < 3; ++i) log.append(step(i));
    // Published at every append: readable while the writer lives.
    EXPECT_EQ(record::read_steps(dir).size(), 3u);
    log.write_summary({{"steps", 3}, {"final_loss", 0.25}});
  }
  const auto steps = record::read_steps(dir);
  ASSERT_EQ(steps.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(steps[static_cast<std::size_t>(i)], step(i));
  const std::string text = slurp(dir / "steps.jsonl");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);  // one line per step, the newline in "note" escaped
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(nlohmann::json::parse(slurp(dir / "summary.json"))["steps"], 3);
  EXPECT_FALSE(fs::exists(dir / "steps.jsonl.tmp"));
  EXPECT_FALSE(fs::exists(dir / "summary.json.tmp"));
}

TEST_F(RecordRunLog, PublishesEveryNStepsAndOnDestruction) {
  {
    record::RunLog log(root_, 2);
    for (int i = 0; i < 3; ++i) log.append(step(i));
    EXPECT_EQ(record::read_steps(root_).size(), 2u);  // the third is pending
  }
  EXPECT_EQ(record::read_steps(root_).size(), 3u);
}

TEST_F(RecordRunLog, AKilledRunLeavesOnlyCompleteLines) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child appends three steps, then dies by SIGKILL (no destructor, no
    // flush) while "publishing" a fourth: a half-written temp file is left.
    record::RunLog log(root_, 1);
    for (int i = 0; i < 3; ++i) log.append(step(i));
    std::ofstream(root_ / "steps.jsonl.tmp") << step(0).dump() << "\n{\"step\": 3, \"lo";
    std::raise(SIGKILL);
    ::_exit(3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  const auto steps = record::read_steps(root_);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[2], step(2));
  const std::string text = slurp(root_ / "steps.jsonl");
  EXPECT_EQ(text.back(), '\n');
  // A new log in the same directory replaces the stray temp file and starts afresh.
  record::RunLog again(root_);
  again.append(step(7));
  EXPECT_EQ(record::read_steps(root_), std::vector<nlohmann::json>{step(7)});
  EXPECT_FALSE(fs::exists(root_ / "steps.jsonl.tmp"));
}

TEST_F(RecordRunLog, ErrorsNameThePathAndTheReason) {
  fs::create_directories(root_);
  std::ofstream(root_ / "a_file") << "x";
  const fs::path bad = root_ / "a_file" / "run";  // a file where a directory should be (fails as root too)
  try {
    record::RunLog log(bad);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(bad.string()), std::string::npos) << what;
    EXPECT_NE(what.find("Not a directory"), std::string::npos) << what;
  }
  // The directory disappears under a live log: the next publication names the temp file.
  const fs::path gone = root_ / "gone";
  record::RunLog log(gone);
  fs::remove_all(gone);
  try {
    log.append(step(0));
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find((gone / "steps.jsonl.tmp").string()), std::string::npos) << what;
    EXPECT_NE(what.find("No such file or directory"), std::string::npos) << what;
  }
  EXPECT_THROW(record::read_steps(root_ / "nowhere"), std::runtime_error);
  fs::create_directories(root_ / "broken");
  std::ofstream(root_ / "broken" / "steps.jsonl") << "{\"step\": 0}\n{\"step\": 1, \"lo";
  EXPECT_THROW(record::read_steps(root_ / "broken"), std::runtime_error);
}

// The AVX2 kernels of the spacing rule and the ratio counts (record/lost_updates_avx2.cpp) against the
// portable loop (path spacing_portable), and the ratio counts against a count in double written here, on
// weights of several formats' grids with updates near the lost/kept threshold, specials and every length
// 0..40 (whole vectors and tails).
std::pair<std::vector<float>, std::vector<float>> grid_weights_and_updates(const formats::Format& f, std::uint32_t seed,
                                                                           std::size_t n) {
  std::mt19937 rng(seed);
  const float specials[] = {0.0f, -0.0f, inf, -inf, nan, 0x1p-149f, 0x1p-126f, 0x1.fffffep127f};
  std::vector<float> raw;
  for (std::size_t i = 0; i < n; ++i) {
    const float x = std::ldexp(1.0f + static_cast<float>(rng() % 4096) / 4096.0f, static_cast<int>(rng() % 40) - 20);
    raw.push_back(rng() % 8 == 0 ? specials[rng() % 8] : rng() % 2 ? x : -x);
  }
  const std::vector<float> w = emu::quantized_copy(raw, f);  // values of the format, as stored weights are
  std::vector<float> u;
  for (const float wi : w) {
    const int e = std::isfinite(wi) && wi != 0 ? std::ilogb(wi) : 0;
    const float half_gap = std::ldexp(1.0f, e - f.precision() - static_cast<int>(rng() % 2));  // near the threshold
    const float pick[] = {half_gap, std::nextafter(half_gap, 0.0f), std::nextafter(half_gap, HUGE_VALF),
                          half_gap * 3.0f, specials[rng() % 8]};
    const float ui = pick[rng() % 5];
    u.push_back(rng() % 2 ? ui : -ui);
  }
  return {w, u};
}

TEST(LostUpdatesAvx2, KernelsCountAsThePortableLoopAndTheRatiosAsDouble) {
  for (const char* name : {"fp32", "fp16", "bf16", "fp8-e5m2", "e4m3", "e3m2"}) {
    const formats::Format f = formats::parse_format(name);
    for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 15u, 16u, 17u, 40u, 5000u}) {
      auto [w, u] = grid_weights_and_updates(f, static_cast<std::uint32_t>(n) + 7u, n);
      const auto kernel = record::lost_update_counts(w, u, f, record::LostUpdatePath::spacing);
      const auto portable = record::lost_update_counts(w, u, f, record::LostUpdatePath::spacing_portable);
      EXPECT_EQ(kernel.updates, portable.updates) << name << " n=" << n;
      EXPECT_EQ(kernel.lost, portable.lost) << name << " n=" << n;
      std::uint64_t needed = 0, sufficient = 0;  // |w| / |u| against 2^p and 2^(p+1), as exact double products
      for (std::size_t i = 0; i < n; ++i) {
        const double wi = std::fabs(static_cast<double>(w[i])), ui = std::fabs(static_cast<double>(u[i]));
        if (ui == 0 || !std::isfinite(ui) || !std::isfinite(wi)) continue;
        needed += wi >= std::ldexp(ui, f.precision());
        sufficient += wi > std::ldexp(ui, f.precision() + 1);
      }
      EXPECT_EQ(kernel.ratio_needed, needed) << name << " n=" << n;
      EXPECT_EQ(kernel.ratio_sufficient, sufficient) << name << " n=" << n;
      EXPECT_EQ(portable.ratio_needed, needed) << name << " n=" << n;
      EXPECT_EQ(portable.ratio_sufficient, sufficient) << name << " n=" << n;
      if (n == 5000) {  // the sample reaches both outcomes
        EXPECT_GT(kernel.lost, 100u) << name;
        EXPECT_LT(kernel.lost + 100u, kernel.updates) << name;
      }
    }
  }
}

// A weight off the format's grid in a whole vector: the kernel refuses the spacing path as the loop does.
TEST(LostUpdatesAvx2, OffGridWeightInAVectorIsRefusedAsByTheLoop) {
  std::vector<float> w(16, 1.0f), u(16, 0x1p-12f);
  w[5] = 1.0f + 0x1p-20f;  // not an fp16 value
  EXPECT_THROW(record::lost_update_counts(w, u, fp16, record::LostUpdatePath::spacing), std::invalid_argument);
  EXPECT_THROW(record::lost_update_counts(w, u, fp16, record::LostUpdatePath::spacing_portable), std::invalid_argument);
}

}  // namespace

// --- JSON lines written as text -------------------------------------------------------

// Each value as nlohmann's dump() writes it in an object: shortest round-trip doubles ("1.0", "1e-05",
// "5e-324"), null for inf and NaN, the extremes of the integer types, escapes and replaced invalid UTF-8.
TEST(JsonLine, WritesWhatNlohmannDumpsForTheSameObject) {
  const auto replace = nlohmann::json::error_handler_t::replace;
  const std::vector<double> doubles = {0.0, -0.0, 1.0, 0.1, 1e-5, 123456789.0, 1e21, 1e300, 5e-324, -2.5,
                                       std::numeric_limits<double>::max(), std::numeric_limits<double>::infinity(),
                                       -std::numeric_limits<double>::infinity(), std::nan("")};
  const std::vector<std::string> strings = {"", "plain", "q\"uote", "back\\slash", "tab\tnew\nline", "\x01",
                                            "caf\xc3\xa9", "bad\xc3", "\x7f"};
  for (const double d : doubles)
    for (const std::string& str : strings) {
      const std::uint64_t counts[] = {0, 1, std::numeric_limits<std::uint64_t>::max()};
      const std::string text = record::JsonLine()
                                   .add("a", std::uint64_t{18446744073709551615u})
                                   .add("b", -2147483647 - 1)
                                   .add("c", d)
                                   .add("d", std::span<const std::uint64_t>(counts))
                                   .add("e", std::span<const std::uint64_t>())
                                   .add_null("f")
                                   .add(str.empty() ? "g" : "g" + str, str)
                                   .take();
      nlohmann::json expected = {{"a", std::numeric_limits<std::uint64_t>::max()},
                                 {"b", std::numeric_limits<int>::min()},
                                 {"c", d},
                                 {"d", {0, 1, std::numeric_limits<std::uint64_t>::max()}},
                                 {"e", nlohmann::json::array()},
                                 {"f", nullptr},
                                 {str.empty() ? "g" : "g" + str, str}};
      EXPECT_EQ(text, expected.dump(-1, ' ', false, replace)) << d << " " << str;
    }
  EXPECT_EQ(record::JsonLine().take(), "{}");
}

TEST(JsonLine, RefusesKeysOutOfOrderOrRepeated) {
  record::JsonLine line;
  line.add("b", 1);
  EXPECT_THROW(line.add("a", 2), std::logic_error);
  EXPECT_THROW(line.add("b", 2), std::logic_error);
  EXPECT_NO_THROW(line.add("ba", 2));
}
