// The exponent histogram (host) on hand-placed values, and the device counting
// kernels against the emulator: emu::quantize's counters and the host
// histogram of the same fp32 values x * S, emu::add_arrays' counters for the
// swamping kernel. The kernels' per-element code also runs on the host
// (detail::*_host_emulation) wherever the build has CUDA, so their counting
// logic is checked even without a device; the kernels themselves are skipped
// with the reason where there is none.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "emu/counters.h"
#include "emu/exponent_histogram.h"
#include "emu/quantize.h"
#include "formats/format.h"
#include "gpu/device.h"
#include "gpu/tensor_counters_gpu.h"

namespace {

using namespace mpverify;
using emu::ExponentHistogram;

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const char* const kDeviceFormats[] = {"fp16", "bf16", "fp8-e4m3", "fp8-e5m2"};

float pow2f(int e) { return std::ldexp(1.0f, e); }

// --- host histogram ----------------------------------------------------------

TEST(ExponentHistogram, PowersOfTwoLandOnTheirExponent) {
  ExponentHistogram h;
  for (int e = -149; e <= 127; ++e) {
    h.add(std::vector<float>{pow2f(e), -pow2f(e)});
    EXPECT_EQ(h.at(e), 2u) << "2^" << e;
  }
  EXPECT_EQ(h.total(), 2u * 277u);
}

TEST(ExponentHistogram, ValuesBetweenPowersOfTwoGoToTheLowerExponent) {
  ExponentHistogram h;
  h.add(std::vector<float>{0.75f});
  EXPECT_EQ(h.at(-1), 1u);  // 2^-1 <= 0.75 < 2^0
  h.add(std::vector<float>{1.5f, -1.9999999f});
  EXPECT_EQ(h.at(0), 2u);
  h.add(std::vector<float>{std::nextafter(2.0f, 0.0f), 3.0f});  // just below 2 -> 0; 3 -> 1
  EXPECT_EQ(h.at(0), 3u);
  EXPECT_EQ(h.at(1), 1u);
  h.add(std::vector<float>{FLT_MAX});  // (2 - 2^-23) 2^127
  EXPECT_EQ(h.at(127), 1u);
  EXPECT_EQ(h.total(), 6u);
}

TEST(ExponentHistogram, SubnormalFloatsHaveTheExponentOfTheirTopBit) {
  ExponentHistogram h;
  const float true_min = std::numeric_limits<float>::denorm_min();  // 2^-149
  h.add(std::vector<float>{true_min, 3 * true_min, FLT_MIN - true_min, std::ldexp(1.5f, -140)});
  EXPECT_EQ(h.at(-149), 1u);
  EXPECT_EQ(h.at(-148), 1u);  // 3 * 2^-149 = 1.5 * 2^-148
  EXPECT_EQ(h.at(-127), 1u);  // largest subnormal, (1 - 2^-23) 2^-126
  EXPECT_EQ(h.at(-140), 1u);
  h.add(std::vector<float>{FLT_MIN});
  EXPECT_EQ(h.at(-126), 1u);
}

TEST(ExponentHistogram, ZerosNaNsAndInfinitiesHaveTheirOwnBins) {
  ExponentHistogram h;
  h.add(std::vector<float>{0.0f, -0.0f, kNaN, -kNaN, kInf, -kInf, 1.0f});
  EXPECT_EQ(h.zeros, 2u);
  EXPECT_EQ(h.nans, 2u);
  EXPECT_EQ(h.infinities, 2u);
  EXPECT_EQ(h.at(0), 1u);
  EXPECT_EQ(h.below_range + h.above_range, 0u);
  EXPECT_EQ(h.total(), 7u);
}

TEST(ExponentHistogram, ScaleUsesTheExactProduct) {
  // (1 - 2^-23)(1 + 2^-23) = 1 - 2^-46: exponent -1, though the product
  // rounded to fp32 is 1.0 (exponent 0).
  const float below_one = 1.0f - pow2f(-23), above_one = 1.0f + pow2f(-23);
  ASSERT_EQ(below_one * above_one, 1.0f);  // what fp32 would hide
  ExponentHistogram h;
  h.add(std::vector<float>{below_one}, above_one);
  EXPECT_EQ(h.at(-1), 1u);
  EXPECT_EQ(h.at(0), 0u);
  // A power-of-two scale moves every exponent by its own.
  ExponentHistogram scaled;
  scaled.add(std::vector<float>{0.75f, 1.0f, 96.0f}, 1024.0f);
  EXPECT_EQ(scaled.at(9), 1u);
  EXPECT_EQ(scaled.at(10), 1u);
  EXPECT_EQ(scaled.at(16), 1u);
}

TEST(ExponentHistogram, ScaledProductsCanLeaveFloatRange) {
  ExponentHistogram h;
  h.add(std::vector<float>{std::numeric_limits<float>::denorm_min(), FLT_MIN}, 0.5f);  // 2^-150, 2^-127
  EXPECT_EQ(h.below_range, 1u);
  EXPECT_EQ(h.at(-127), 1u);
  h.add(std::vector<float>{FLT_MAX, 1.0f}, 2.0f);  // (2 - 2^-23) 2^128 is finite in double
  EXPECT_EQ(h.above_range, 1u);
  EXPECT_EQ(h.infinities, 0u);
  EXPECT_EQ(h.at(1), 1u);
  EXPECT_EQ(h.total(), 4u);
}

// add(values, scale) reads exponents off the float bits where the product is
// a finite float; it must bin exactly as add(double) of each exact product,
// over every binade of float (subnormals included), zeros, NaNs, infinities,
// and scales that push products out of float's range or off its grid.
TEST(ExponentHistogram, ArrayPathBinsAsTheScalarDefinition) {
  std::mt19937 rng(11);
  std::vector<float> values;
  for (int i = 0; i < 20000; ++i) values.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  for (int e = -149; e <= 127; ++e) values.push_back(pow2f(e)), values.push_back(-std::nextafter(pow2f(e), 0.0f));
  values.insert(values.end(), {0.0f, -0.0f, kInf, -kInf, kNaN, FLT_MAX, FLT_MIN, std::numeric_limits<float>::denorm_min()});
  for (const float scale : {1.0f, 0.5f, 1024.0f, pow2f(-30), pow2f(24), 3.0f, 1.0f + pow2f(-23), 1e-30f}) {
    ExponentHistogram array, scalar;
    array.add(values, scale);
    for (const float x : values) scalar.add(static_cast<double>(x) * scale);
    EXPECT_EQ(array.bins, scalar.bins) << "scale " << scale;
    EXPECT_EQ(array.zeros, scalar.zeros) << "scale " << scale;
    EXPECT_EQ(array.nans, scalar.nans) << "scale " << scale;
    EXPECT_EQ(array.infinities, scalar.infinities) << "scale " << scale;
    EXPECT_EQ(array.below_range, scalar.below_range) << "scale " << scale;
    EXPECT_EQ(array.above_range, scalar.above_range) << "scale " << scale;
    EXPECT_EQ(array.total(), values.size());
  }
}

TEST(ExponentHistogram, MergeAddsEveryBin) {
  ExponentHistogram a, b;
  a.add(std::vector<float>{1.0f, 0.0f, kNaN});
  b.add(std::vector<float>{1.5f, 4.0f, -kInf, -0.0f});
  b.add(std::vector<float>{std::numeric_limits<float>::denorm_min()}, 0.25f);
  ExponentHistogram sum = a;
  sum += b;
  EXPECT_EQ(sum.at(0), 2u);
  EXPECT_EQ(sum.at(2), 1u);
  EXPECT_EQ(sum.zeros, 2u);
  EXPECT_EQ(sum.nans, 1u);
  EXPECT_EQ(sum.infinities, 1u);
  EXPECT_EQ(sum.below_range, 1u);
  EXPECT_EQ(sum.total(), a.total() + b.total());
  EXPECT_EQ(sum.total(), 8u);
  ExponentHistogram all;  // the same values in one histogram
  all.add(std::vector<float>{1.0f, 0.0f, kNaN, 1.5f, 4.0f, -kInf, -0.0f});
  all.add(std::vector<float>{std::numeric_limits<float>::denorm_min()}, 0.25f);
  EXPECT_EQ(sum, all);
}

TEST(ExponentHistogram, BinsSumToTheCount) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> bits;
  std::vector<float> v(100000);
  for (auto& x : v) x = std::bit_cast<float>(bits(rng));  // every class of float, NaNs included
  ExponentHistogram h;
  h.add(v);
  std::uint64_t in_bins = 0;
  for (int e = ExponentHistogram::min_exponent; e <= ExponentHistogram::max_exponent; ++e) in_bins += h.at(e);
  EXPECT_EQ(in_bins + h.zeros + h.nans + h.infinities, v.size());
  EXPECT_EQ(h.total(), v.size());
  EXPECT_GT(h.nans, 0u);  // about 2^-9 of random patterns are NaN
}

TEST(ExponentHistogram, RangeChecks) {
  ExponentHistogram h;
  EXPECT_THROW(h.at(-150), std::out_of_range);
  EXPECT_THROW(h.at(128), std::out_of_range);
  EXPECT_THROW(emu::floor_log2(0.0), std::invalid_argument);
  EXPECT_THROW(emu::floor_log2(std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
  EXPECT_EQ(emu::floor_log2(0x1p-1074), -1074);  // a double subnormal
}

TEST(FormatThresholds, FollowTheFormatFields) {
  const auto fp16 = emu::format_thresholds(formats::parse_format("fp16"));
  EXPECT_EQ(fp16.min_subnormal, 0x1p-24);
  EXPECT_EQ(fp16.min_normal, 0x1p-14);
  EXPECT_EQ(fp16.max_finite, 65504.0);
  EXPECT_EQ(fp16.min_subnormal_exponent, -24);
  EXPECT_EQ(fp16.min_normal_exponent, -14);
  EXPECT_EQ(fp16.max_finite_exponent, 15);
  const auto bf16 = emu::format_thresholds(formats::parse_format("bf16"));
  EXPECT_EQ(bf16.min_subnormal, 0x1p-133);
  EXPECT_EQ(bf16.min_normal, 0x1p-126);
  EXPECT_EQ(bf16.max_finite, 0x1.fep127);
  EXPECT_EQ(bf16.max_finite_exponent, 127);
  const auto e4m3 = emu::format_thresholds(formats::parse_format("fp8-e4m3"));
  EXPECT_EQ(e4m3.min_subnormal, 0x1p-9);
  EXPECT_EQ(e4m3.min_normal, 0x1p-6);
  EXPECT_EQ(e4m3.max_finite, 448.0);  // fn: 1.110 * 2^8, the all-ones pattern is NaN
  EXPECT_EQ(e4m3.max_finite_exponent, 8);
  const auto e5m2 = emu::format_thresholds(formats::parse_format("fp8-e5m2"));
  EXPECT_EQ(e5m2.min_subnormal, 0x1p-16);
  EXPECT_EQ(e5m2.max_finite, 57344.0);
  const auto ftz = emu::format_thresholds(formats::parse_format("fp16:ftz"));
  EXPECT_EQ(ftz.min_subnormal, 0x1p-14);  // no subnormals: the smallest non-zero is the smallest normal
  EXPECT_EQ(ftz.min_subnormal_exponent, -14);
}

// --- which formats the device rounds to ---------------------------------------

TEST(DeviceFormat, PresetsAndFormatsWithTheSameFields) {
  EXPECT_EQ(gpu::device_format(formats::parse_format("fp16")), gpu::DeviceFormat::fp16);
  EXPECT_EQ(gpu::device_format(formats::parse_format("e5m10")), gpu::DeviceFormat::fp16);
  EXPECT_EQ(gpu::device_format(formats::parse_format("bf16")), gpu::DeviceFormat::bf16);
  EXPECT_EQ(gpu::device_format(formats::parse_format("fp8-e4m3")), gpu::DeviceFormat::fp8_e4m3);
  EXPECT_EQ(gpu::device_format(formats::parse_format("fp8-e5m2")), gpu::DeviceFormat::fp8_e5m2);
}

TEST(DeviceFormat, UnsupportedFormatsAreNamedWithTheSupportedList) {
  for (const char* name : {"tf32", "fp8-e4m3:saturate", "fp16:ftz", "fp8-e4m3fnuz", "fp32", "e4m5"}) {
    const auto f = formats::parse_format(name);
    try {
      gpu::device_format(f);
      ADD_FAILURE() << name << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("'" + f.name + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("fp16, bf16, fp8-e4m3, fp8-e5m2"), std::string::npos) << e.what();
    }
    // The entry points reject the format before looking for a device.
    const std::vector<float> x(4, 1.0f);
    EXPECT_THROW(gpu::tensor_counters_gpu(x, f), std::invalid_argument) << name;
    EXPECT_THROW(gpu::swamping_counters_gpu(x, x, f), std::invalid_argument) << name;
  }
}

// --- the device side against the emulator --------------------------------------

using CountFn = std::function<gpu::TensorCounts(std::span<const float>, const formats::Format&, float)>;
using SwampFn =
    std::function<emu::Counters(std::span<const float>, std::span<const float>, const formats::Format&)>;

const CountFn kOnHost = [](std::span<const float> x, const formats::Format& f, float s) {
  return gpu::detail::tensor_counters_host_emulation(x, f, s);
};
const CountFn kOnGpu = [](std::span<const float> x, const formats::Format& f, float s) {
  return gpu::tensor_counters_gpu(x, f, s);
};
const SwampFn kSwampOnHost = [](std::span<const float> w, std::span<const float> u, const formats::Format& f) {
  return gpu::detail::swamping_counters_host_emulation(w, u, f);
};
const SwampFn kSwampOnGpu = [](std::span<const float> w, std::span<const float> u, const formats::Format& f) {
  return gpu::swamping_counters_gpu(w, u, f);
};

std::string text(const emu::Counters& c) {
  std::ostringstream s;
  s << "elements " << c.elements << ", zeros_in " << c.zeros_in << ", nonfinite_in " << c.nonfinite_in
    << ", inexact " << c.inexact << ", underflow " << c.underflow << ", underflow_to_zero " << c.underflow_to_zero
    << ", subnormal " << c.subnormal << ", overflow " << c.overflow << ", nan_created " << c.nan_created
    << ", addends_nonzero " << c.addends_nonzero << ", swamped " << c.swamped;
  return s.str();
}

::testing::AssertionResult same_counters(const emu::Counters& expected, const emu::Counters& got) {
  if (expected == got) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\n  emulator: " << text(expected) << "\n  device:   " << text(got);
}

::testing::AssertionResult same_histogram(const ExponentHistogram& expected, const ExponentHistogram& got) {
  if (expected == got) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure();
  for (int e = ExponentHistogram::min_exponent; e <= ExponentHistogram::max_exponent; ++e)
    if (expected.at(e) != got.at(e))
      failure << "\n  exponent " << e << ": host " << expected.at(e) << ", device " << got.at(e);
  failure << "\n  zeros " << expected.zeros << "/" << got.zeros << ", nans " << expected.nans << "/" << got.nans
          << ", infinities " << expected.infinities << "/" << got.infinities << ", out of range "
          << expected.below_range + expected.above_range << "/" << got.below_range + got.above_range;
  return failure;
}

// The host twin: v = x * S rounded to fp32 (as the device multiplies; this
// file is built without contraction), counted by emu::quantize and binned by
// the host histogram.
gpu::TensorCounts emulator_twin(std::span<const float> x, const formats::Format& f, float scale) {
  std::vector<float> v(x.size()), out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) v[i] = x[i] * scale;
  gpu::TensorCounts t;
  emu::quantize(v, out, emu::QuantizeSpec{f}, &t.counters);
  t.histogram.add(v);
  return t;
}

void expect_matches_emulator(const CountFn& run, std::span<const float> x, const formats::Format& f, float scale) {
  const gpu::TensorCounts expected = emulator_twin(x, f, scale);
  const gpu::TensorCounts got = run(x, f, scale);
  EXPECT_TRUE(same_counters(expected.counters, got.counters)) << f.name << " at scale " << scale;
  EXPECT_TRUE(same_histogram(expected.histogram, got.histogram)) << f.name << " at scale " << scale;
}

// fp16's boundaries, written out, and each format's own (from its fields),
// with their float neighbours and negatives.
std::vector<float> boundary_values(const formats::Format& f) {
  std::vector<double> centres = {
      0x1p-25,             // fp16: tie between 0 and 2^-24 -> 0
      0x1p-24,             // fp16 smallest subnormal
      0x1.8p-25,           // fp16: above the tie -> 2^-24
      0x1p-14 - 0x1p-25,   // fp16: subnormal tie -> 2^-14, tiny after rounding -> underflow
      0x1p-14 - 0x1p-26,   // fp16: the tininess boundary, not tiny
      0x1p-14 - 0x1p-24,   // fp16 largest subnormal
      0x1p-14,             // fp16 smallest normal
      65504, 65519, 65520,  // fp16 max, below the tie, the tie to infinity
      65536, 1e5, 1, 1.0 / 3, 0x1.002p0 /* fp16 tie */};
  const int p = f.precision();
  const double ulp_top = std::ldexp(1.0, f.emax() - f.mantissa_bits);
  for (double c : {f.min_subnormal() / 2, f.min_subnormal(), 1.5 * f.min_subnormal(),
                   f.min_normal() - f.min_subnormal() / 2, f.min_normal() * (1 - std::ldexp(1.0, -p - 1)),
                   f.min_normal() - f.min_subnormal(), f.min_normal(), f.max_finite(), f.max_finite() + ulp_top / 2,
                   f.max_finite() + ulp_top})
    centres.push_back(c);
  std::vector<float> v;
  for (double c : centres) {
    const float x = static_cast<float>(c);
    for (float y : {x, std::nextafter(x, 0.0f), std::nextafter(x, kInf)}) {
      v.push_back(y);
      v.push_back(-y);
    }
  }
  const float true_min = std::numeric_limits<float>::denorm_min();
  for (float y : {0.0f, -0.0f, kNaN, -kNaN, kInf, -kInf, true_min, -true_min, FLT_MIN, FLT_MAX, -FLT_MAX, 1e-40f})
    v.push_back(y);
  return v;
}

std::vector<float> seeded_normals(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(normal(rng));
  return v;
}

// Hand-worked fp16 counts, independent of the emulator.
void hand_worked_fp16(const CountFn& run) {
  const auto fp16 = formats::parse_format("fp16");
  const std::vector<float> x = {0x1p-25f, 0x1p-14f - 0x1p-25f, 0x1p-14f - 0x1p-26f, 65520.0f, kNaN,
                                kInf,     -0.0f,              0x1p-24f,            1.0f};
  const gpu::TensorCounts got = run(x, fp16, 1.0f);
  emu::Counters want;
  want.elements = 9;
  want.zeros_in = 1;      // -0
  want.nonfinite_in = 2;  // NaN, inf
  // 2^-25 -> 0 (tie to even), 2^-14 - 2^-25 -> 2^-14 (tie to even),
  // 2^-14 - 2^-26 -> 2^-14, 65520 -> inf (tie to even, 2^16 overflows).
  want.inexact = 4;
  // Tiny after rounding (< 2^-14 (1 - 2^-12) = 2^-14 - 2^-26) and inexact:
  // 2^-25 and 2^-14 - 2^-25; 2^-14 - 2^-26 rounds up at 11 bits: not tiny.
  want.underflow = 2;
  want.underflow_to_zero = 1;  // 2^-25
  want.subnormal = 1;          // 2^-24
  want.overflow = 1;           // 65520
  EXPECT_TRUE(same_counters(want, got.counters));
  EXPECT_EQ(got.histogram.at(-25), 1u);
  EXPECT_EQ(got.histogram.at(-15), 2u);  // both just below 2^-14
  EXPECT_EQ(got.histogram.at(15), 1u);   // 65520 = 1.999 * 2^15
  EXPECT_EQ(got.histogram.at(-24), 1u);
  EXPECT_EQ(got.histogram.at(0), 1u);
  EXPECT_EQ(got.histogram.nans, 1u);
  EXPECT_EQ(got.histogram.infinities, 1u);
  EXPECT_EQ(got.histogram.zeros, 1u);
  EXPECT_EQ(got.histogram.total(), 9u);
  // And the emulator agrees with the hand count.
  EXPECT_TRUE(same_counters(want, emulator_twin(x, fp16, 1.0f).counters));
}

void boundaries_match(const CountFn& run) {
  for (const char* name : kDeviceFormats) {
    const auto f = formats::parse_format(name);
    expect_matches_emulator(run, boundary_values(f), f, 1.0f);
    // Boundary values scaled: 2^-10 pushes normals into subnormals, 1024
    // pushes large values past the overflow threshold.
    expect_matches_emulator(run, boundary_values(f), f, 0x1p-10f);
    expect_matches_emulator(run, boundary_values(f), f, 1024.0f);
  }
}

void normals_match(const CountFn& run) {
  const std::vector<float> x = seeded_normals(1000000, 2024);
  for (const char* name : kDeviceFormats) {
    const auto f = formats::parse_format(name);
    for (float scale : {1.0f, 1024.0f, 0x1p-10f}) {
      expect_matches_emulator(run, x, f, scale);
      // A power-of-two scale inside float's range: the fp32 product is the
      // exact product, so the histogram also equals the host's at scale S.
      ExponentHistogram exact;
      exact.add(x, scale);
      EXPECT_TRUE(same_histogram(exact, run(x, f, scale).histogram)) << name << " at scale " << scale;
    }
  }
  // A scale that is not a power of two: the fp32 product rounds, in both.
  expect_matches_emulator(run, x, formats::parse_format("fp16"), 3000.7f);
}

// Weights in the format and updates around the lost-update ratio 2^p, crafted
// additions (ties, a sum that a plain double addition would round onto a
// midpoint, overflow, cancellation, non-finite operands).
void swamping_matches(const SwampFn& run) {
  for (const char* name : kDeviceFormats) {
    const auto f = formats::parse_format(name);
    std::vector<float> w = seeded_normals(200000, 11), u(w.size());
    emu::quantize(w, w, emu::QuantizeSpec{f});
    std::mt19937_64 rng(12);
    std::uniform_int_distribution<int> shift(f.precision() - 3, f.precision() + 3);
    std::uniform_real_distribution<float> mantissa(-2.0f, 2.0f);
    for (std::size_t i = 0; i < w.size(); ++i) u[i] = w[i] * std::ldexp(mantissa(rng), -shift(rng));
    for (std::size_t i = 0; i < w.size(); i += 97) u[i] = 0.0f;
    const float e = static_cast<float>(f.epsilon());
    const struct {
      float w, u;
    } crafted[] = {
        {1.0f, e / 4},                 // swamped
        {1.0f, e / 2},                 // tie, to even: swamped
        {1.0f, e / 2 + 0x1p-30f},      // just above the tie: not swamped
        {1.0f + e, e / 2},             // tie, to even: rounds up, not swamped
        {1.0f, -e / 4},                // swamped from below
        {0x1p-25f, 0x1p-80f},          // just above the fp16 zero/2^-24 tie; a double sum lands on it
        {0x1p-25f, -0x1p-80f},         // just below it
        {1.0f + e / 2, 0x1p-60f},      // w off the format, sum just above a midpoint
        {65504.0f, 16.0f},             // fp16: 65520, the tie to infinity
        {FLT_MAX, FLT_MAX},            // beyond float's range, exactly
        {3.0f, -3.0f},                 // exact zero
        {0.0f, 0x1p-30f},              // from zero
        {kInf, 1.0f}, {1.0f, kInf}, {kInf, -kInf}, {kNaN, 1.0f}, {1.0f, kNaN}, {-0.0f, 0.0f},
    };
    for (const auto& c : crafted) {
      w.push_back(c.w);
      u.push_back(c.u);
    }
    std::vector<float> out(w.size());
    emu::Counters expected;
    emu::add_arrays(w, u, out, emu::QuantizeSpec{f}, &expected);
    ASSERT_GT(expected.swamped, 1000u) << name;  // the data does exercise swamping
    ASSERT_GT(expected.addends_nonzero - expected.swamped, 1000u) << name;
    EXPECT_TRUE(same_counters(expected, run(w, u, f))) << name;
  }
}

#define SKIP_WITHOUT_CUDA_BUILD()                                                     \
  do {                                                                                \
    if (!gpu::built_with_cuda()) GTEST_SKIP() << gpu::gpu_unavailable_reason();       \
  } while (0)

#define SKIP_WITHOUT_GPU()                                                            \
  do {                                                                                \
    if (const std::string reason = gpu::gpu_unavailable_reason(); !reason.empty())    \
      GTEST_SKIP() << reason;                                                         \
  } while (0)

// The kernels' per-element code on the host (needs a CUDA build, no device).
TEST(DeviceCountingLogicOnHost, HandWorkedFp16Cases) {
  SKIP_WITHOUT_CUDA_BUILD();
  hand_worked_fp16(kOnHost);
}
TEST(DeviceCountingLogicOnHost, BoundaryValuesMatchTheEmulator) {
  SKIP_WITHOUT_CUDA_BUILD();
  boundaries_match(kOnHost);
}
TEST(DeviceCountingLogicOnHost, SeededNormalsAtThreeScalesMatchTheEmulator) {
  SKIP_WITHOUT_CUDA_BUILD();
  normals_match(kOnHost);
}
TEST(DeviceCountingLogicOnHost, SwampingMatchesAddArrays) {
  SKIP_WITHOUT_CUDA_BUILD();
  swamping_matches(kSwampOnHost);
}

// The kernels on the device.
TEST(TensorCountersGpu, HandWorkedFp16Cases) {
  SKIP_WITHOUT_GPU();
  hand_worked_fp16(kOnGpu);
}
TEST(TensorCountersGpu, BoundaryValuesMatchTheEmulator) {
  SKIP_WITHOUT_GPU();
  boundaries_match(kOnGpu);
}
TEST(TensorCountersGpu, SeededNormalsAtThreeScalesMatchTheEmulator) {
  SKIP_WITHOUT_GPU();
  normals_match(kOnGpu);
}
TEST(TensorCountersGpu, SwampingMatchesAddArrays) {
  SKIP_WITHOUT_GPU();
  swamping_matches(kSwampOnGpu);
}
TEST(TensorCountersGpu, EmptyTensorCountsNothing) {
  SKIP_WITHOUT_GPU();
  const auto got = gpu::tensor_counters_gpu(std::span<const float>{}, formats::parse_format("fp16"));
  EXPECT_TRUE(same_counters(emu::Counters{}, got.counters));
  EXPECT_EQ(got.histogram.total(), 0u);
}
TEST(TensorCountersGpu, SwampingSizesMustAgree) {
  const std::vector<float> w(3), u(4);
  EXPECT_THROW(gpu::swamping_counters_gpu(w, u, formats::parse_format("fp16")), std::invalid_argument);
}

}  // namespace
