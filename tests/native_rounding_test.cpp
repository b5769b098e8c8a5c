// The native binary32/binary16 rounding (emu/native_rounding.h) against the
// generic emulator (formats::from_double, formats::sum_to_format): wherever
// the native path answers, its value must have the same bits and the same
// inexactness as the generic one, and the generic rounding must have raised
// no flag but inexact and given a zero or a normal number (the domain the
// native counts assume). Values are crafted on every boundary the native
// path tests (rounding midpoints of both formats, the smallest normals,
// the largest finite values and the overflow thresholds) and drawn at
// random over the formats' whole range; sums include addends far below the
// running sum's last place, where TwoSum's error term decides.
#include "emu/native_rounding.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "emu/accumulate.h"
#include "emu/counters.h"
#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/format.h"

namespace {

using mpverify::emu::NativeFormat;
using mpverify::emu::NativeResult;
namespace formats = mpverify::formats;

struct Generic {
  double value;
  formats::Flags flags;
  std::uint32_t bits;
};

Generic generic_round(const formats::Format& f, double x) {
  formats::Flags flags;
  const std::uint32_t bits = formats::from_double(f, x, {}, flags);
  return {formats::to_double(f, bits), flags, bits};
}

Generic generic_sum(const formats::Format& f, double a, double b) {
  formats::Flags flags;
  const std::uint32_t bits = formats::sum_to_format(f, a, b, {}, flags);
  return {formats::to_double(f, bits), flags, bits};
}

// Returns whether the native path answered; checks it against the generic one when it did.
bool check_same(const formats::Format& f, const NativeResult& native, const Generic& generic, double a, double b) {
  EXPECT_EQ(std::bit_cast<std::uint64_t>(native.value), std::bit_cast<std::uint64_t>(generic.value))
      << f.name << ": " << a << " + " << b << " native " << native.value << " generic " << generic.value;
  EXPECT_EQ(native.inexact, generic.flags.has(formats::Flags::inexact)) << f.name << ": " << a << " + " << b;
  EXPECT_EQ(generic.flags.bits & ~formats::Flags::inexact, 0) << f.name << ": " << a << " + " << b;
  EXPECT_FALSE(formats::is_subnormal(f, generic.bits)) << f.name << ": " << a << " + " << b;
  return true;
}

bool check_round(const formats::Format& f, double x) {
  NativeResult r;
  if (!mpverify::emu::round_natively(mpverify::emu::native_format(f), x, r)) return false;
  return check_same(f, r, generic_round(f, x), x, 0.0);
}

bool check_sum(const formats::Format& f, double a, double b) {
  NativeResult r;
  if (!mpverify::emu::sum_natively(mpverify::emu::native_format(f), a, b, r)) return false;
  return check_same(f, r, generic_sum(f, a, b), a, b);
}

// Every value a rounding decision of format f turns on near `v`: v itself,
// the midpoints to its neighbours, and doubles one and a few ulps either side.
std::vector<double> around(double v, double format_ulp) {
  std::vector<double> out;
  for (double c : {v, v + format_ulp / 2, v - format_ulp / 2, v + format_ulp, v - format_ulp / 4})
    for (int steps : {-3, -1, 0, 1, 3}) {
      double x = c;
      for (int i = 0; i < std::abs(steps); ++i) x = std::nextafter(x, steps < 0 ? -INFINITY : INFINITY);
      out.push_back(x);
      out.push_back(-x);
    }
  return out;
}

TEST(NativeRounding, FormatsAreRecognisedByLayoutOnly) {
  EXPECT_EQ(mpverify::emu::native_format(formats::parse_format("fp32")), NativeFormat::binary32);
  EXPECT_EQ(mpverify::emu::native_format(formats::parse_format("fp16")), NativeFormat::binary16);
  EXPECT_EQ(mpverify::emu::native_format(formats::parse_format("e5m10")), NativeFormat::binary16);
  for (const char* other : {"bf16", "tf32", "fp8-e4m3", "fp8-e5m2", "fp16:saturate", "fp16:ftz", "e8m22"})
    EXPECT_EQ(mpverify::emu::native_format(formats::parse_format(other)), NativeFormat::none) << other;
}

TEST(NativeRounding, BoundariesAgreeWithTheGenericEmulator) {
  struct Case {
    const char* format;
    std::vector<std::pair<double, double>> anchors;  // value, the format's ulp there
  };
  const Case cases[] = {
      {"fp16",
       {{1.0, 0x1p-10}, {1.5, 0x1p-10}, {0x1p-14, 0x1p-24}, {0x1p-14 + 0x1p-24, 0x1p-24}, {65504.0, 32.0},
        {65520.0, 32.0}, {2048.0, 2.0}, {0x1p-13, 0x1p-23}, {1000.0, 0.5}}},
      {"fp32",
       {{1.0, 0x1p-23}, {3.0, 0x1p-22}, {0x1p-126, 0x1p-149}, {0x1p-126 + 0x1p-149, 0x1p-149},
        {0x1.fffffep127, 0x1p104}, {0x1p-100, 0x1p-123}, {12345.678, 0x1p-10}}},
  };
  for (const Case& c : cases) {
    const formats::Format f = formats::parse_format(c.format);
    int answered = 0, tried = 0;
    for (auto [v, ulp] : c.anchors)
      for (double x : around(v, ulp)) {
        ++tried;
        answered += check_round(f, x);
        // the same values as sums: a format value plus what is left
        const double a = generic_round(f, x).value;
        if (std::isfinite(a)) answered += check_sum(f, a, x - a), ++tried;
      }
    // Sums whose exact value lies a hair off a midpoint of the format, the
    // hair below double's last place: a plain double sum would land on the
    // midpoint and round to even (the double rounding that round-to-odd avoids).
    for (auto [v, ulp] : c.anchors)
      for (double hair : {std::ldexp(ulp, -40), -std::ldexp(ulp, -40)})
        for (double sign : {1.0, -1.0}) {
          ++tried;
          answered += check_sum(f, sign * v, sign * (ulp / 2 + hair));
          ++tried;
          answered += check_sum(f, sign * v, sign * (ulp * 1.5 + hair));
        }
    EXPECT_EQ(check_round(f, 0.0) + check_round(f, -0.0), 2) << c.format;
    // Most boundary values lie inside the domain; if the native path turned
    // everything down, this test would check nothing.
    EXPECT_GT(answered, tried / 2) << c.format;
  }
}

TEST(NativeRounding, RandomValuesAndSumsAgreeWithTheGenericEmulator) {
  std::mt19937_64 rng(20261122);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (const char* name : {"fp16", "fp32"}) {
    const formats::Format f = formats::parse_format(name);
    const int lo = name[2] == '1' ? -30 : -140, hi = name[2] == '1' ? 17 : 128;
    std::uniform_int_distribution<int> exponent(lo, hi);
    int answered = 0;
    constexpr int n = 200000;
    for (int i = 0; i < n; ++i) {
      const double x = std::ldexp(unit(rng), exponent(rng));
      answered += check_round(f, x);
      // a running sum of the format plus an exact product of two of its values
      const double s = generic_round(f, std::ldexp(unit(rng), exponent(rng) / 2)).value;
      const double p = generic_round(f, std::ldexp(unit(rng), exponent(rng) / 2)).value *
                       generic_round(f, std::ldexp(unit(rng), exponent(rng) / 2)).value;
      if (std::isfinite(s) && std::isfinite(p)) answered += check_sum(f, s, p);
      if (testing::Test::HasFailure()) return;
    }
    EXPECT_GT(answered, n) << name;  // of 2n tries, the most are in the domain
  }
}

// End to end: the Accumulator and round_value (which take the native path)
// count exactly what the generic definitions count.
TEST(NativeRounding, AccumulatorCountsAsTheGenericDefinition) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const char* name : {"fp16", "fp32"}) {
    const formats::Format f = formats::parse_format(name);
    mpverify::emu::Counters native_counts, generic_counts;
    mpverify::emu::Accumulator acc(f, &native_counts);
    double sum = 0;
    for (int i = 0; i < 20000; ++i) {
      // addends from 2^-30 to 2^6: many swamped in fp16, some tiny
      const double addend = std::ldexp(normal(rng), static_cast<int>(rng() % 36) - 30);
      acc.add(addend);
      const Generic g = generic_sum(f, sum, addend);
      mpverify::emu::count_rounding(generic_counts, f, sum + addend, g.bits, g.flags);
      if (addend != 0 && std::isfinite(sum)) {
        generic_counts.addends_nonzero += 1;
        generic_counts.swamped += g.value == sum;
      }
      sum = g.value;
      ASSERT_EQ(std::bit_cast<std::uint64_t>(acc.value()), std::bit_cast<std::uint64_t>(sum)) << name << " step " << i;
    }
    EXPECT_EQ(native_counts, generic_counts) << name;
    EXPECT_GT(generic_counts.inexact, 0u);
    if (name[2] == '1') {
      EXPECT_GT(generic_counts.swamped, 0u);
    }

    mpverify::emu::Counters native_round, generic_round_counts;
    for (int i = 0; i < 20000; ++i) {
      const double x = std::ldexp(normal(rng), static_cast<int>(rng() % 60) - 40);
      const float got = mpverify::emu::round_value(f, x, &native_round);
      const Generic g = generic_round(f, x);
      mpverify::emu::count_rounding(generic_round_counts, f, x, g.bits, g.flags);
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(static_cast<float>(g.value))) << x;
    }
    EXPECT_EQ(native_round, generic_round_counts) << name;
    if (name[2] == '1') {
      EXPECT_GT(generic_round_counts.subnormal + generic_round_counts.underflow_to_zero, 0u);
    }
  }
}

}  // namespace

namespace {

// add_lanes' AVX-512 kernel against its portable loop: many lanes, several
// steps, terms of every kind the kernel must hand back (zeros, subnormal and
// tiny results, overflow, infinities, NaN, sums a hair off a midpoint).
TEST(NativeRounding, AddLanesKernelEqualsThePortableLoop) {
  std::mt19937_64 rng(99);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const char* name : {"fp16", "fp32"}) {
    const formats::Format f = formats::parse_format(name);
    const bool half = name[2] == '1';
    constexpr std::size_t n = 8 * 500 + 5;
    std::vector<double> simd(n, 0.0), portable(n, 0.0), terms(n);
    mpverify::emu::Counters simd_counts, portable_counts;
    for (int step = 0; step < 6; ++step) {
      for (std::size_t i = 0; i < n; ++i) {
        const auto kind = rng() % 16;
        const double ulp = half ? 0x1p-10 : 0x1p-23;
        if (kind == 0) terms[i] = 0.0;
        else if (kind == 1) terms[i] = std::ldexp(normal(rng), half ? -26 : -140);  // tiny
        else if (kind == 2) terms[i] = half ? 70000.0 : 0x1p127;                     // toward overflow
        else if (kind == 3 && rng() % 50 == 0) terms[i] = rng() % 2 ? INFINITY : NAN;
        else if (kind == 4) terms[i] = ulp / 2 + std::ldexp(ulp, -40);             // a hair above a midpoint of 1
        else if (kind == 5) terms[i] = -simd[i];                                   // an exact zero sum
        else if (kind == 6) terms[i] = (half ? 65520.0 : 0x1.ffffffp127) - simd[i];  // the overflow threshold
        else if (kind == 7) terms[i] = (half ? 65519.0 : 0x1.fffffep127) - simd[i];  // just below it
        else terms[i] = normal(rng) * std::ldexp(1.0, static_cast<int>(rng() % 20) - 10);
      }
      mpverify::emu::add_lanes(f, simd.data(), terms.data(), n, &simd_counts);
      mpverify::emu::add_lanes(f, portable.data(), terms.data(), n, &portable_counts,
                               mpverify::emu::LanePath::portable);
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(std::bit_cast<std::uint64_t>(simd[i]), std::bit_cast<std::uint64_t>(portable[i]))
            << name << " step " << step << " lane " << i << ": " << simd[i] << " vs " << portable[i];
      // Restart lanes that became non-finite, so that later steps test finite sums again.
      for (std::size_t i = 0; i < n; ++i)
        if (!std::isfinite(simd[i])) simd[i] = portable[i] = 1.0;
    }
    EXPECT_EQ(simd_counts, portable_counts) << name;
    EXPECT_GT(portable_counts.inexact, 0u);
    EXPECT_GT(portable_counts.swamped, 0u);
    EXPECT_GT(portable_counts.overflow + portable_counts.nonfinite_in, 0u);
    // Without the counters too (the kernel has a second instantiation).
    std::vector<double> a(n, 0.5), b(n, 0.5);
    mpverify::emu::add_lanes(f, a.data(), terms.data(), n, nullptr);
    mpverify::emu::add_lanes(f, b.data(), terms.data(), n, nullptr, mpverify::emu::LanePath::portable);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(std::bit_cast<std::uint64_t>(a[i]), std::bit_cast<std::uint64_t>(b[i]));
  }
}

TEST(NativeRounding, AddLanesKernelRunsWhereTheCpuHasIt) {
  std::vector<double> lanes(20, 1.0), terms(20, 0x1p-30);
  const std::size_t done = mpverify::emu::detail::add_lanes_avx512(formats::parse_format("fp32"), NativeFormat::binary32,
                                                                   lanes.data(), terms.data(), lanes.size(), nullptr);
  if (done == 0) GTEST_SKIP() << "this CPU has no AVX-512: add_lanes takes the portable loop only";
  EXPECT_EQ(done, 16u);  // the whole vectors of 8
  for (std::size_t i = 0; i < done; ++i) EXPECT_EQ(lanes[i], 1.0);  // 2^-30 is swamped in fp32
}

}  // namespace

namespace {

// round_values (AVX-512 over whole vectors where the CPU has it) against the
// generic rounding of each value, counts included.
TEST(NativeRounding, RoundValuesEqualsTheGenericRounding) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const char* name : {"fp16", "fp32"}) {
    const formats::Format f = formats::parse_format(name);
    std::vector<double> exact(8 * 300 + 3);
    for (double& x : exact) {
      const auto kind = rng() % 12;
      x = kind == 0 ? 0.0 : kind == 1 ? -0.0 : kind == 2 && rng() % 20 == 0 ? NAN
        : std::ldexp(normal(rng), static_cast<int>(rng() % 70) - (name[2] == '1' ? 40 : 20));
      if (kind == 3) x = name[2] == '1' ? 65520.0 : 0x1.ffffffp127;
    }
    std::vector<float> out(exact.size());
    mpverify::emu::Counters got, want;
    mpverify::emu::round_values(exact, out, f, &got);
    for (std::size_t i = 0; i < exact.size(); ++i) {
      const Generic g = generic_round(f, exact[i]);
      mpverify::emu::count_rounding(want, f, exact[i], g.bits, g.flags);
      if (std::isnan(exact[i])) {
        EXPECT_TRUE(std::isnan(out[i]));
        continue;
      }
      ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(static_cast<float>(g.value)))
          << name << " " << exact[i];
    }
    EXPECT_EQ(got, want) << name;
    EXPECT_GT(want.inexact, 0u);
    EXPECT_GT(want.overflow, 0u);
    if (name[2] == '1') {
      EXPECT_GT(want.subnormal, 0u);
    }
  }
}

}  // namespace
