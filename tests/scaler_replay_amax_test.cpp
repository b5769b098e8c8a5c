// Replays decided from a recorded amax: where a scaled tensor overflows or
// flushes in fp16, bf16 and FP8 (training/scaled_range.h), fp16 strategies
// that skip different steps because their scales differ, the FP8 strategies'
// overflow and flush counts, one scaler per optimizer, and a replay started
// from a saved state. Every expected value is worked by hand in the comments
// (the format boundaries from the formats' definitions, the scales from each
// framework's rule) or held against an independent count.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "formats/format.h"
#include "training/loss_scaler.h"
#include "training/scaled_range.h"
#include "training/scaler_replay.h"
#include "training/scaler_state.h"

namespace {

using namespace mpverify;
using training::ScaledProduct;
using training::scaled_fit;

const formats::Format& fmt(const char* name) {
  static std::vector<formats::Format> kept;
  kept.reserve(16);
  kept.push_back(formats::parse_format(name));
  return kept.back();
}

bool overflows(const char* format, double value, double scale = 1.0, ScaledProduct p = ScaledProduct::exact) {
  return scaled_fit(fmt(format), value, scale, p).overflow;
}
bool flushes(const char* format, double value, double scale = 1.0, ScaledProduct p = ScaledProduct::exact) {
  return scaled_fit(fmt(format), value, scale, p).zero;
}

// fp16: max 65504 = (2 - 2^-10) 2^15, ulp 32 there. Round to nearest even:
// below 65520 (= 65504 + 16, half an ulp) rounds down to 65504; 65520 is a
// tie between 65504 (odd significand 0x3ff) and 2^16 (even): it rounds up
// to 2^16, past the format, so it overflows.
TEST(ScaledRange, Fp16OverflowBoundaries) {
  EXPECT_FALSE(overflows("fp16", 65504));
  EXPECT_FALSE(overflows("fp16", 65519.99));
  EXPECT_TRUE(overflows("fp16", 65520));
  // The same boundary reached through a scale: 65520 / 2^15 x 2^15.
  EXPECT_TRUE(overflows("fp16", 65520.0 / 32768.0, 32768.0));
  EXPECT_FALSE(overflows("fp16", 65519.99 / 32768.0, 32768.0));
  // The product is rounded once, exactly: a = 65520 + 2999 2^-37 and
  // s = 1 - 3000 2^-53 multiply to 65520 - 2^-37 + 3000 2^-49 - 2999 3000 2^-90,
  // about 65520 - 0.27 2^-37: below 65520, so no overflow, although the
  // double product a * s rounds to 65520 exactly (a tie that would overflow).
  const double a = 65520.0 + 2999.0 * 0x1p-37, s = 1.0 - 3000.0 * 0x1p-53;
  ASSERT_EQ(a * s, 65520.0);
  EXPECT_FALSE(overflows("fp16", a, s));
  // Non-finite: an overflow at any scale, and with any value.
  EXPECT_TRUE(overflows("fp16", std::numeric_limits<double>::infinity(), 1e-30));
  EXPECT_TRUE(overflows("fp16", std::nan(""), 1.0));
  EXPECT_TRUE(overflows("fp16", 0.0, std::numeric_limits<double>::infinity()));
  EXPECT_TRUE(overflows("fp16", 1e300, 1e300));  // the product overflows double itself
}

// bf16: max (2 - 2^-7) 2^127 = 0x1.fep127 (significand 1.1111111b, odd);
// the tie (2 - 2^-8) 2^127 = 0x1.ffp127 rounds to even, up to 2^128: past it.
TEST(ScaledRange, Bf16OverflowBoundaries) {
  EXPECT_FALSE(overflows("bf16", 0x1.fep127));
  EXPECT_FALSE(overflows("bf16", 0x1.fefffffffffffp127));
  EXPECT_TRUE(overflows("bf16", 0x1.ffp127));
  EXPECT_FALSE(overflows("bf16", 65520.0));  // fp16's overflow is nothing in bf16
}

// FP8, through fl32(x * s) as Transformer Engine casts. E4M3: max 448 =
// 1.75 2^8, ulp 32; 464 is a tie between 448 (significand 1.110, even) and
// 480 (1.111, odd, the NaN encoding): it rounds to 448; above it overflows.
// E5M2: max 57344 = 1.75 2^15, ulp 8192; 61440 ties between 57344 (1.11, odd)
// and 2^16 (even): it overflows, as everything above.
TEST(ScaledRange, Fp8OverflowBoundaries) {
  const auto fp32 = ScaledProduct::fp32;
  EXPECT_FALSE(overflows("fp8-e4m3", 448, 1, fp32));
  EXPECT_FALSE(overflows("fp8-e4m3", 464, 1, fp32));
  EXPECT_TRUE(overflows("fp8-e4m3", 464.0001, 1, fp32));
  EXPECT_FALSE(overflows("fp8-e5m2", 61439.99, 1, fp32));
  EXPECT_TRUE(overflows("fp8-e5m2", 61440, 1, fp32));
  // fl32 first: 448 (1 + 2^-25) is 448 in fp32, so it does not overflow E4M3
  // even where the exact product would (it does not here either: <= 464).
  EXPECT_FALSE(overflows("fp8-e4m3", 448.0 * (1 + 0x1p-25), 1, fp32));
  // A product beyond fp32 (FLT_MAX x 2) is an overflow.
  EXPECT_TRUE(overflows("fp8-e4m3", 2.0, std::numeric_limits<float>::max(), fp32));
}

// Flushed: the value rounds to zero. Smallest subnormals: fp16 2^-24, E4M3
// 2^-9, E5M2 2^-16; half of it is a tie with zero (even) and flushes; above
// half rounds up to the subnormal. Zero itself is not "flushed".
TEST(ScaledRange, FlushBoundaries) {
  EXPECT_TRUE(flushes("fp16", 0x1p-25));
  EXPECT_FALSE(flushes("fp16", 0x1p-25 * (1 + 0x1p-20)));
  EXPECT_TRUE(flushes("fp8-e4m3", 0x1p-10, 1, ScaledProduct::fp32));
  EXPECT_FALSE(flushes("fp8-e4m3", 0x1.01p-10, 1, ScaledProduct::fp32));
  EXPECT_TRUE(flushes("fp8-e5m2", 0x1p-17, 1, ScaledProduct::fp32));
  EXPECT_FALSE(flushes("fp8-e5m2", 0x1p-16, 1, ScaledProduct::fp32));
  EXPECT_FALSE(flushes("fp16", 0.0));
  EXPECT_FALSE(flushes("fp16", 1.0, 0x1p-24));  // 2^-24 is the subnormal itself
}

std::vector<training::TraceStep> amax_rows(const std::vector<double>& amax) {
  std::vector<training::TraceStep> trace;
  for (std::size_t k = 0; k < amax.size(); ++k) {
    training::TraceStep t;
    t.line = static_cast<int>(k) + 2;
    t.bare = false;
    t.amax = amax[k];
    trace.push_back(t);
  }
  return trace;
}

training::Replay run(const std::string& name, const training::ScalerOptions& options,
                     const std::vector<training::TraceStep>& trace, training::GradFormat format = training::GradFormat::fp16) {
  auto scaler = training::make_scaler(name, options);
  return training::replay(*scaler, trace, name, {training::OverflowSource::amax, format});
}

// amax 0.5 every step. At 2^18: 131072 overflows fp16; 2^17: 65536 (>= 65520)
// overflows; 2^16: 32768 fits. torch from 2^18 backs off twice (skipping steps
// 0 and 1), then runs at 2^16; static 2^16 never overflows; static 2^18
// overflows every step (applied: skip=false; skipped with skip=true).
TEST(AmaxReplay, StrategiesSkipWhatOverflowsAtTheirOwnScale) {
  const auto trace = amax_rows({0.5, 0.5, 0.5, 0.5});
  const auto torch = run("torch", {{"init", "2^18"}}, trace);
  const double torch_scales[] = {0x1p18, 0x1p17, 0x1p16, 0x1p16};
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(torch.steps[k].scale, torch_scales[k]) << k;
    EXPECT_EQ(torch.steps[k].skipped, k < 2) << k;
    EXPECT_EQ(torch.steps[k].overflow, k < 2) << k;
  }
  EXPECT_EQ(torch.overflow_steps, 2u);
  EXPECT_EQ(torch.range_format, "fp16");
  const auto low = run("static", {{"scale", "2^16"}, {"skip", "true"}}, trace);
  EXPECT_EQ(low.skipped_steps, 0u);
  EXPECT_EQ(low.overflow_steps, 0u);
  const auto high = run("static", {{"scale", "2^18"}}, trace);
  EXPECT_EQ(high.skipped_steps, 0u);  // applied: the non-finite update reaches the weights
  EXPECT_EQ(high.overflow_steps, 4u);
  EXPECT_EQ(run("static", {{"scale", "2^18"}, {"skip", "true"}}, trace).skipped_steps, 4u);
  // In bf16 nothing of this overflows.
  EXPECT_EQ(run("torch", {{"init", "2^18"}}, trace, training::GradFormat::bf16).skipped_steps, 0u);
}

// A recorded inf or NaN amax overflows at every scale, even 1 (none).
TEST(AmaxReplay, NonFiniteAmaxOverflowsAtAnyScale) {
  const auto trace = amax_rows({1.0, std::numeric_limits<double>::infinity(), std::nan(""), 1.0});
  const auto none = run("none", {{"skip", "true"}}, trace);
  EXPECT_EQ(none.skipped_steps, 2u);
  EXPECT_TRUE(none.steps[1].skipped);
  EXPECT_TRUE(none.steps[2].skipped);
  // Megatron from scale 1 (hysteresis 1): both back off, 1 -> 0.5 -> 0.25.
  const auto megatron = run("megatron", {{"init", "1"}, {"min", "2^-10"}, {"hysteresis", "1"}}, trace);
  EXPECT_EQ(megatron.overflow_steps, 2u);
  EXPECT_EQ(megatron.steps[3].scale, 0.25);  // halved twice: 1 -> 0.5 -> 0.25
}

// The found_inf mode is the old one: the recorded flag, whatever the amax.
TEST(AmaxReplay, FoundInfModeReadsTheRecordedFlag) {
  auto trace = amax_rows({0.5, 0.5});
  trace[0].found_inf = 0;
  trace[1].found_inf = 1;
  EXPECT_EQ(training::default_overflow_source(trace), training::OverflowSource::amax);
  auto scaler = training::make_scaler("torch", {{"init", "2^18"}});
  const auto r = training::replay(*scaler, trace, "torch", {training::OverflowSource::found_inf});
  EXPECT_FALSE(r.steps[0].skipped);
  EXPECT_TRUE(r.steps[1].skipped);
  EXPECT_TRUE(r.range_format.empty());
  EXPECT_FALSE(r.flush_steps.has_value());
  // Bare lines are flags: found_inf is the default.
  training::TraceStep bare;
  bare.value = 1;
  EXPECT_EQ(training::default_overflow_source(std::vector{bare}), training::OverflowSource::found_inf);
}

// delayed (history 16, E4M3), a spike: amaxes 1 x 4, 100, 1 x 3. The scale
// after the first step is 448 / 1 = 448; the spike 100 x 448 = 44800 overflows
// E4M3 (the step ran with the old scale); after it the history holds 100:
// s = 4.48, and 1 x 4.48 fits. One overflow; no flush. current scales each
// step from its own amax: never an overflow.
TEST(AmaxReplay, DelayedScalingCountsFp8Overflows) {
  const std::vector<double> amax{1, 1, 1, 1, 100, 1, 1, 1};
  const auto trace = amax_rows(amax);
  const auto delayed = run("delayed", {{"history", "16"}}, trace);
  EXPECT_EQ(delayed.range_format, "fp8-e4m3");
  EXPECT_EQ(delayed.overflow_steps, 1u);
  EXPECT_TRUE(delayed.steps[4].overflow);
  EXPECT_EQ(delayed.skipped_steps, 0u);  // FP8 scaling skips nothing
  EXPECT_EQ(delayed.flush_steps, 0u);
  EXPECT_EQ(run("current", {}, trace).overflow_steps, 0u);
  EXPECT_EQ(run("mxfp8", {}, trace).overflow_steps, 0u);
  // An independent count: each step's fl32(amax x s) against 464 (the
  // largest value that still rounds to 448), s the scale the step ran with.
  std::size_t expected = 0;
  for (std::size_t k = 0; k < amax.size(); ++k)
    expected += static_cast<float>(amax[k]) * static_cast<float>(delayed.steps[k].scale) > 464.0f ? 1 : 0;
  EXPECT_EQ(delayed.overflow_steps, expected);
}

// Flushed and underflow. delayed after an amax of 1000 runs with s = 448 /
// 1000 = 0.448 (fp32); a next amax of 2^-11 gives 2^-11 x 0.448, below 2^-10
// (half E4M3's smallest subnormal 2^-9): the whole tensor flushes. With an
// amin column, current scaling from amax 448 runs with s = 1: an amin of 2^-10
// (a tie) flushes, 2^-9 does not.
TEST(AmaxReplay, FlushAndUnderflowCounts) {
  const auto delayed = run("delayed", {{"history", "4"}}, amax_rows({1000, 0x1p-11, 1000}));
  EXPECT_EQ(delayed.flush_steps, 1u);
  EXPECT_TRUE(*delayed.steps[1].flushed);
  EXPECT_FALSE(delayed.underflow_steps.has_value());  // no amin column
  auto trace = amax_rows({448, 448, 448});
  trace[0].amin = 0x1p-10;
  trace[1].amin = 0x1p-9;
  trace[2].amin = 0x1p-12;
  const auto current = run("current", {}, trace);
  EXPECT_EQ(current.underflow_steps, 2u);
  EXPECT_TRUE(*current.steps[0].underflow);
  EXPECT_FALSE(*current.steps[1].underflow);
  EXPECT_EQ(current.flush_steps, 0u);
  // mxfp8 from amax 448: X = 2^0, elements x / 1; the same amin verdicts.
  EXPECT_EQ(run("mxfp8", {}, trace).underflow_steps, 2u);
  // In an fp16 replay the amin is judged in fp16 at the loss scale (torch: 2^16).
  auto fp16 = amax_rows({0.25});
  fp16[0].amin = 0x1p-40;  // x 2^16 = 2^-24: the smallest subnormal, kept
  EXPECT_EQ(run("torch", {}, fp16).underflow_steps, 0u);
  fp16[0].amin = 0x1p-41;  // 2^-25: a tie with zero, flushed
  EXPECT_EQ(run("torch", {}, fp16).underflow_steps, 1u);
}

// One scaler per optimizer: rows in order, grouped by name.
TEST(AmaxReplay, SplitByOptimizer) {
  auto trace = amax_rows({1, 2, 3, 4, 5});
  const char* names[] = {"D", "G", "D", "D", "G"};
  for (int k = 0; k < 5; ++k) trace[k].optimizer = names[k];
  const auto groups = training::split_by_optimizer(trace);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].first, "D");
  ASSERT_EQ(groups[0].second.size(), 3u);
  EXPECT_EQ(*groups[0].second[2].amax, 4.0);
  EXPECT_EQ(groups[1].first, "G");
  EXPECT_EQ(*groups[1].second[1].amax, 5.0);
  trace[3].optimizer.reset();
  EXPECT_THROW(training::split_by_optimizer(trace), training::TraceError);
}

}  // namespace
