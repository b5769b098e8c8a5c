// Each loss-scale strategy walked step by step through its rule
// (../shared/reference/loss-scalers.md). Every expected value is worked out
// by hand in the comments from the rule, never taken from the code.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "training/loss_scaler.h"
#include "training/scaler_replay.h"

namespace {

using namespace mpverify::training;

constexpr double inf = std::numeric_limits<double>::infinity();

// Runs `clean` clean steps and checks each ran with `scale` and was applied.
void clean_steps(LossScaler& s, int clean, double scale) {
  for (int i = 0; i < clean; ++i) {
    const StepResult r = s.step(false);
    ASSERT_EQ(r.scale_used, scale) << "clean step " << i;
    ASSERT_FALSE(r.skipped) << "clean step " << i;
  }
}

void expect_step(LossScaler& s, bool found_inf, double scale_used, bool skipped) {
  const StepResult r = s.step(found_inf);
  EXPECT_EQ(r.scale_used, scale_used);
  EXPECT_EQ(r.skipped, skipped);
  EXPECT_FALSE(r.aborted);
}

// --- none, static -----------------------------------------------------------

TEST(StaticScaler, NeverChangesAndSkipsOnlyWhenAsked) {
  StaticScaler s(128.0, /*skip_nonfinite=*/true);
  expect_step(s, true, 128.0, true);
  expect_step(s, false, 128.0, false);
  StaticScaler applied(1.0);
  expect_step(applied, true, 1.0, false);  // plain PyTorch without a scaler applies the step
  // By name: none and static apply the update unless skip=true.
  auto none = make_scaler("none");
  expect_step(static_cast<LossScaler&>(*none), true, 1.0, false);
  auto skipping = make_scaler("static", {{"scale", "2^7"}, {"skip", "true"}});
  expect_step(static_cast<LossScaler&>(*skipping), true, 128.0, true);
  EXPECT_THROW(StaticScaler(0.0), std::invalid_argument);
}

// --- PyTorch ------------------------------------------------------------------

TEST(TorchScaler, TwoThousandCleanStepsDoubleTheScale) {
  TorchScaler s;
  // Steps 1..1999: t counts 1..1999 < 2000, s stays 2^16.
  clean_steps(s, 1999, 65536.0);
  EXPECT_EQ(s.growth_tracker(), 1999);
  // Step 2000: t + 1 == 2000, s = 2^16 * 2 = 2^17 (finite), t = 0. The step
  // itself ran with 2^16.
  expect_step(s, false, 65536.0, false);
  EXPECT_EQ(s.scale(), 131072.0);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(TorchScaler, InfHalvesTheScaleAndRestartsTheCount) {
  TorchScaler s;
  clean_steps(s, 1500, 65536.0);
  expect_step(s, true, 65536.0, true);  // s = 2^16 * 0.5 = 2^15, t = 0
  EXPECT_EQ(s.growth_tracker(), 0);
  // The 1500 earlier clean steps no longer count: 1999 more stay at 2^15,
  // the 2000th grows to 2^16.
  clean_steps(s, 1999, 32768.0);
  expect_step(s, false, 32768.0, false);
  EXPECT_EQ(s.scale(), 65536.0);
}

TEST(TorchScaler, GrowthPastFltMaxIsRefusedByTheGuard) {
  TorchConfig c;
  c.init_scale = 0x1p127;
  c.growth_interval = 1;
  TorchScaler s(c);
  // 2^127 * 2 = 2^128 overflows fp32 to inf: not finite, so s stays 2^127,
  // and t restarts at 0 all the same.
  expect_step(s, false, 0x1p127, false);
  EXPECT_EQ(s.scale(), 0x1p127);
  EXPECT_EQ(s.growth_tracker(), 0);
  expect_step(s, false, 0x1p127, false);
  // FLT_MAX (not a power of two): FLT_MAX * 2 overflows too.
  c.init_scale = FLT_MAX;
  TorchScaler m(c);
  expect_step(m, false, FLT_MAX, false);
  EXPECT_EQ(m.scale(), FLT_MAX);
}

TEST(TorchScaler, FactorProductIsDoubleRoundedToFp32) {
  // ATen computes float scale * double factor in double, then stores fp32.
  // s = 3, b = 0.3: fp64(0.3) = 0.29999999999999998890, 3 * it rounds in
  // double to 0.89999999999999996669; its fp32 neighbours are
  // 7549747 * 2^-23 = 0.89999997615814208984 (2.4e-8 below 0.9) and
  // 15099495 * 2^-24 = 0.90000003576278686523 (3.6e-8 above): the lower one.
  // (fp32 arithmetic would give 3 * fp32(0.3) = 3 * 5033165 * 2^-24 =
  // 15099495 * 2^-24 exactly: Megatron's answer, tested below.)
  TorchConfig c;
  c.init_scale = 3.0;
  c.backoff_factor = 0.3;
  TorchScaler s(c);
  expect_step(s, true, 3.0, true);
  EXPECT_EQ(s.scale(), 7549747 * 0x1p-23);
}

TEST(TorchScaler, NoFloorTheScaleUnderflowsToZero) {
  TorchConfig c;
  c.init_scale = 0x1p-148;
  TorchScaler s(c);
  // 2^-148 * 0.5 = 2^-149, the least fp32 subnormal; * 0.5 again = 2^-150,
  // a tie between 0 and 2^-149 that rounds to even: 0.
  expect_step(s, true, 0x1p-148, true);
  expect_step(s, true, 0x1p-149, true);
  EXPECT_EQ(s.scale(), 0.0);
}

// --- Apex -------------------------------------------------------------------------

TEST(ApexScaler, GrowthIsCappedAt2To24) {
  ApexConfig c;
  c.scale_window = 1;
  ApexScaler s(c);
  // Every clean step doubles: 2^16 -> 2^17 ... the 8th clean step takes 2^23
  // to min(2^24, 2^24) = 2^24; the 9th: min(2^24, 2^25) = 2^24.
  for (int k = 16; k < 24; ++k) expect_step(s, false, std::ldexp(1.0, k), false);
  expect_step(s, false, 0x1p24, false);
  EXPECT_EQ(s.scale(), 0x1p24);
  // An initial scale above the cap is clipped: min(2^24, 2^30).
  c.init_scale = 0x1p30;
  EXPECT_EQ(ApexScaler(c).scale(), 0x1p24);
}

TEST(ApexScaler, DefaultWindowAndOptionalFloor) {
  ApexScaler s;
  clean_steps(s, 1999, 65536.0);
  expect_step(s, false, 65536.0, false);  // the 2000th clean step: 2^17
  EXPECT_EQ(s.scale(), 131072.0);
  expect_step(s, true, 131072.0, true);  // no floor: 2^16
  EXPECT_EQ(s.scale(), 65536.0);

  ApexConfig c;
  c.min_scale = 32768.0;
  ApexScaler f(c);
  expect_step(f, true, 65536.0, true);  // max(2^15, 2^15) = 2^15
  expect_step(f, true, 32768.0, true);  // max(2^15, 2^14) = 2^15
  EXPECT_EQ(f.scale(), 32768.0);
}

// --- Keras ------------------------------------------------------------------------

TEST(KerasScaler, Keras3GrowsEvery2000StepsAndHalvesOnInf) {
  KerasScaler s;
  clean_steps(s, 1999, 32768.0);  // counter 0..1998 != 1999
  expect_step(s, false, 32768.0, false);  // counter == 1999: 2^15 * 2
  EXPECT_EQ(s.scale(), 65536.0);
  expect_step(s, true, 65536.0, true);
  EXPECT_EQ(s.scale(), 32768.0);
}

TEST(KerasScaler, Keras3HasNoGuardAndInfIsForever) {
  KerasConfig c;
  c.init_scale = 0x1p127;
  c.growth_steps = 1;
  KerasScaler s(c);
  // 2^127 * 2 = inf in fp32, kept (no guard); inf / 2 = inf; inf * 2 = inf.
  expect_step(s, false, 0x1p127, false);
  EXPECT_EQ(s.scale(), inf);
  expect_step(s, true, inf, true);
  EXPECT_EQ(s.scale(), inf);
  expect_step(s, false, inf, false);
  EXPECT_EQ(s.scale(), inf);
}

TEST(KerasScaler, TfKerasHasFloorOneAndTheGuard) {
  KerasConfig c;
  c.variant = KerasVariant::tf_keras;
  c.init_scale = 2.0;
  KerasScaler s(c);
  expect_step(s, true, 2.0, true);  // max(1, 1) = 1
  expect_step(s, true, 1.0, true);  // max(0.5, 1) = 1
  EXPECT_EQ(s.scale(), 1.0);
  c.init_scale = 0x1p127;
  c.growth_steps = 1;
  KerasScaler g(c);
  expect_step(g, false, 0x1p127, false);  // 2^128 is not finite: not assigned
  EXPECT_EQ(g.scale(), 0x1p127);
}

// --- DeepSpeed --------------------------------------------------------------------

TEST(DeepSpeedScaler, HysteresisTwoFirstInfOnlyDecrementsButStillSkips) {
  DeepSpeedScaler s;  // 2^16, H = 2
  // Iteration 0, inf: H != 1 and h = 2 != 1, so h = 1; s unchanged; skipped.
  expect_step(s, true, 65536.0, true);
  EXPECT_EQ(s.hysteresis(), 1);
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.last_overflow_iteration(), 0);
  // Iteration 1, inf: h == 1: s = max(2^16 / 2, 1) = 2^15; h stays 1.
  expect_step(s, true, 65536.0, true);
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_EQ(s.hysteresis(), 1);
  // Iteration 2, inf: h is still 1 (not restored without growth): 2^14.
  expect_step(s, true, 32768.0, true);
  EXPECT_EQ(s.scale(), 16384.0);
}

// DeepSpeed up to 0.17.0 (deepspeed.version=0.17.0); the rule of 0.17.1 and later is held against its
// transcription in scaler_upstream_test.
TEST(DeepSpeedScaler, GrowthBefore0171IsModuloOfIterationsSinceTheLastOverflow) {
  DeepSpeedConfig c;
  c.scale_window = 4;
  c.growth_before_0_17_1 = true;
  DeepSpeedScaler s(c);
  // last_overflow starts at -1: iteration 3 has (3 - -1) % 4 == 0, so the
  // first growth comes at iteration 3 (4 clean steps), 2^16 -> 2^17.
  clean_steps(s, 3, 65536.0);
  expect_step(s, false, 65536.0, false);
  EXPECT_EQ(s.scale(), 131072.0);
  // No counter is reset by the growth: iteration 7 has (7+1) % 4 == 0: 2^18.
  clean_steps(s, 3, 131072.0);
  expect_step(s, false, 131072.0, false);
  EXPECT_EQ(s.scale(), 262144.0);
  // Iterations 8, 9 clean; 10 overflows but only takes h from 2 to 1: the
  // scale did not change, yet last_overflow = 10 restarts the window. A rule
  // of "4 clean steps since the last scale change" would grow at iteration
  // 12 (clean 8, 9, 11, 12); here 11 (1), 12 (2), 13 (3) do not grow, and
  // 14 does: (14 - 10) % 4 == 0. Growth restores h = H = 2.
  clean_steps(s, 2, 262144.0);
  expect_step(s, true, 262144.0, true);
  EXPECT_EQ(s.hysteresis(), 1);
  EXPECT_EQ(s.last_overflow_iteration(), 10);
  clean_steps(s, 3, 262144.0);
  EXPECT_EQ(s.hysteresis(), 1);  // not consecutive: clean steps leave h alone
  expect_step(s, false, 262144.0, false);
  EXPECT_EQ(s.scale(), 524288.0);
  EXPECT_EQ(s.hysteresis(), 2);
  EXPECT_EQ(s.iteration(), 15);
}

TEST(DeepSpeedScaler, ConsecutiveHysteresisRestoresHOnEveryCleanStep) {
  DeepSpeedConfig c;
  c.consecutive_hysteresis = true;
  DeepSpeedScaler s(c);
  // inf (h 2 -> 1), clean (h = 2), inf (h -> 1), clean (h = 2): the scale
  // never drops while overflows are never consecutive; all infs skipped.
  for (int i = 0; i < 3; ++i) {
    expect_step(s, true, 65536.0, true);
    EXPECT_EQ(s.hysteresis(), 1);
    expect_step(s, false, 65536.0, false);
    EXPECT_EQ(s.hysteresis(), 2);
  }
  // Without consecutive_hysteresis the same trace drops at the second inf:
  // h stays 1 across the clean step.
  DeepSpeedScaler n;
  expect_step(n, true, 65536.0, true);
  expect_step(n, false, 65536.0, false);
  EXPECT_EQ(n.hysteresis(), 1);
  expect_step(n, true, 65536.0, true);
  EXPECT_EQ(n.scale(), 32768.0);
}

TEST(DeepSpeedScaler, AbortsAtTheMinimumWithRaise) {
  DeepSpeedConfig c;
  c.init_scale = 4.0;
  c.min_scale = 2.0;
  c.hysteresis = 1;
  DeepSpeedScaler s(c);
  expect_step(s, true, 4.0, true);  // s = max(2, 2) = 2
  EXPECT_EQ(s.scale(), 2.0);
  // s == min and raise: DeepSpeed raises; modelled as an aborted step that
  // ran with 2 and applied nothing.
  const StepResult r = s.step(true);
  EXPECT_EQ(r.scale_used, 2.0);
  EXPECT_TRUE(r.skipped);
  EXPECT_TRUE(r.aborted);
  EXPECT_TRUE(s.aborted());
  EXPECT_THROW(s.step(false), std::logic_error);

  // Without raise: max(1, 2) = 2 again, and the step is skipped although
  // nothing changed.
  c.raise_error_at_min_scale = false;
  DeepSpeedScaler q(c);
  expect_step(q, true, 4.0, true);
  expect_step(q, true, 2.0, true);
  expect_step(q, true, 2.0, true);
  EXPECT_EQ(q.scale(), 2.0);
}

TEST(DeepSpeedScaler, AtTheMinimumHysteresisComesFirst) {
  // With H = 2 at the minimum, the first inf only decrements h (no raise);
  // the second, with h == 1, raises.
  DeepSpeedConfig c;
  c.init_scale = 1.0;
  DeepSpeedScaler s(c);
  expect_step(s, true, 1.0, true);
  EXPECT_TRUE(s.step(true).aborted);
}

TEST(DeepSpeedScaler, ConfigWithoutKeysPreset) {
  // DynamicLossScaler's own defaults: 2^32 and H = 1, so the very first inf
  // halves the scale.
  const auto s = make_scaler("deepspeed", {{"preset", "no-keys"}});
  auto& ds = dynamic_cast<DeepSpeedScaler&>(*s);
  EXPECT_EQ(ds.scale(), 4294967296.0);
  expect_step(ds, true, 4294967296.0, true);
  EXPECT_EQ(ds.scale(), 2147483648.0);
  // Keys refine the preset whatever their order in the options.
  const auto h = make_scaler("deepspeed", {{"hysteresis", "3"}, {"preset", "no-keys"}});
  EXPECT_EQ(dynamic_cast<DeepSpeedScaler&>(*h).hysteresis(), 3);
}

// --- Megatron ---------------------------------------------------------------------

TEST(MegatronScaler, HysteresisResetsOnlyOnGrowth) {
  MegatronScaler s;  // 2^32, H = 2, N = 1000
  // inf: h = 1, s unchanged. clean: t = 1, h stays 1. inf: h = 0 <= 0, so
  // s = max(2^32 * 0.5, 1) = 2^31, although a clean step came between.
  expect_step(s, true, 4294967296.0, true);
  EXPECT_EQ(s.hysteresis(), 1);
  expect_step(s, false, 4294967296.0, false);
  EXPECT_EQ(s.hysteresis(), 1);
  expect_step(s, true, 4294967296.0, true);
  EXPECT_EQ(s.scale(), 2147483648.0);
  // h keeps falling (-1): every further inf halves, 2^31 -> 2^30.
  expect_step(s, true, 2147483648.0, true);
  EXPECT_EQ(s.scale(), 1073741824.0);
  EXPECT_EQ(s.hysteresis(), -1);
  // 1000 clean steps: the 1000th grows to 2^31 and restores h = 2; the next
  // inf then only decrements.
  clean_steps(s, 999, 1073741824.0);
  expect_step(s, false, 1073741824.0, false);
  EXPECT_EQ(s.scale(), 2147483648.0);
  EXPECT_EQ(s.hysteresis(), 2);
  expect_step(s, true, 2147483648.0, true);
  EXPECT_EQ(s.scale(), 2147483648.0);
}

TEST(MegatronScaler, FloorAndFp32Factors) {
  MegatronConfig c;
  c.init_scale = 2.0;
  c.hysteresis = 1;
  MegatronScaler s(c);
  expect_step(s, true, 2.0, true);  // max(1, 1) = 1
  expect_step(s, true, 1.0, true);  // max(0.5, 1) = 1
  EXPECT_EQ(s.scale(), 1.0);
  // fp32 factor tensors: 3 * fp32(0.3) = 3 * 5033165 * 2^-24 = 15099495 *
  // 2^-24 exactly (15099495 < 2^24): PyTorch's double product gives
  // 7549747 * 2^-23 instead (see TorchScaler above).
  c.init_scale = 3.0;
  c.min_scale = 0.125;
  c.backoff_factor = 0.3;
  MegatronScaler f(c);
  expect_step(f, true, 3.0, true);
  EXPECT_EQ(f.scale(), 15099495 * 0x1p-24);
}

// --- Transformer Engine delayed scaling -------------------------------------------

// The history is scanned every step and sized by a number from the command line or a config file: bounded.
TEST(DelayedScaler, HistoryIsBounded) {
  DelayedConfig c;
  c.history = kMaxDelayedHistory;
  EXPECT_NO_THROW(DelayedScaler{c});
  c.history = 2147483647;  // once allocated 8.6 GB before anything checked it
  EXPECT_THROW(DelayedScaler{c}, std::invalid_argument);
  try {
    make_scaler("delayed", {{"history", "65537"}});
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("up to 65536"), std::string::npos) << e.what();
  }
}

TEST(DelayedScaler, HistoryWindowOfMaxima) {
  DelayedConfig c;
  c.history = 3;
  DelayedScaler s(c);
  // The step runs with the scale of earlier steps (1 at first); then
  // s = 448 / max(last 3 amaxes).
  const float amax[] = {1, 4, 2, 0.5f, 0.25f, 0.25f};
  // window after each push: {1} {1,4} {1,4,2} {4,2,.5} {2,.5,.25} {.5,.25,.25}
  const double used[] = {1, 448, 112, 112, 112, 224};
  for (int k = 0; k < 6; ++k) EXPECT_EQ(s.step(amax[k]).scale_used, used[k]) << k;
  EXPECT_EQ(s.scale(), 896.0);  // 448 / 0.5
}

TEST(DelayedScaler, MostRecentAndMargin) {
  DelayedConfig c;
  c.algo = AmaxAlgo::most_recent;
  c.margin = 1;  // scaled max 448 / 2 = 224
  DelayedScaler s(c);
  s.step(4);
  EXPECT_EQ(s.scale(), 56.0);  // 224 / 4
  s.step(0.5f);
  EXPECT_EQ(s.scale(), 448.0);  // 224 / 0.5: the 4 no longer counts
  // E5M2 for gradients: 57344 = 7 * 8192, so amax 7 gives 8192 exactly.
  c.fp8_max = kE5M2Max;
  c.margin = 0;
  DelayedScaler g(c);
  g.step(7);
  EXPECT_EQ(g.scale(), 8192.0);
}

TEST(DelayedScaler, ZeroInfAndNanAmaxKeepTheScale) {
  DelayedConfig c;
  c.algo = AmaxAlgo::most_recent;
  DelayedScaler s(c);
  s.step(2);  // 224
  s.step(0);
  EXPECT_EQ(s.scale(), 224.0);
  s.step(std::numeric_limits<float>::infinity());
  EXPECT_EQ(s.scale(), 224.0);
  s.step(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(s.scale(), 224.0);
  // "max": an inf stays in the window and freezes s for `history` steps; a
  // NaN is dropped by fmaxf.
  DelayedConfig m;
  m.history = 2;
  DelayedScaler w(m);
  w.step(2);  // window {2}: 224
  w.step(std::numeric_limits<float>::infinity());  // {2, inf}: keep 224
  EXPECT_EQ(w.scale(), 224.0);
  w.step(4);  // {inf, 4}: keep 224
  EXPECT_EQ(w.scale(), 224.0);
  w.step(std::numeric_limits<float>::quiet_NaN());  // {4, nan}: fmaxf -> 4: 112
  EXPECT_EQ(w.scale(), 112.0);
}

TEST(DelayedScaler, InfiniteScaleBecomesFltMax) {
  DelayedScaler s;
  // 448 / 2^-126 = 1.75 * 2^134 overflows fp32.
  s.step(0x1p-126f);
  EXPECT_EQ(s.scale(), FLT_MAX);
}

// --- current scaling ----------------------------------------------------------------

TEST(CurrentScaling, ScaleFromThisTensorsAmax) {
  EXPECT_EQ(current_scale(448), 1.0f);
  EXPECT_EQ(current_scale(7), 64.0f);
  // 448 / 3 = 149.333...; fp32 spacing in [128, 256) is 2^-16, and
  // 149.333... * 2^16 = 9786709.33, so the nearest fp32 is 9786709 * 2^-16
  // = 149.3333282470703125.
  EXPECT_EQ(current_scale(3), 9786709 * 0x1p-16f);
  CurrentConfig p;
  p.pow2 = true;
  EXPECT_EQ(current_scale(3, p), 128.0f);  // 2^7 <= 149.33 < 2^8
  EXPECT_EQ(current_scale(448, p), 1.0f);
  EXPECT_EQ(current_scale(449, p), 0.5f);  // 0.9977...: rounded down to 2^-1
  // amax 0 or non-finite: 1.
  EXPECT_EQ(current_scale(0), 1.0f);
  EXPECT_EQ(current_scale(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(current_scale(std::numeric_limits<float>::quiet_NaN()), 1.0f);
  // Tiny amax: 448 / 2^-149 overflows: FLT_MAX, and 2^127 in pow2 mode.
  EXPECT_EQ(current_scale(0x1p-149f), FLT_MAX);
  EXPECT_EQ(current_scale(0x1p-149f, p), 0x1p127f);
  // epsilon lifts a small amax first: 0 -> 1 gives 448.
  CurrentConfig e;
  e.epsilon = 1;
  EXPECT_EQ(current_scale(0, e), 448.0f);
  CurrentScaler s;
  EXPECT_EQ(s.step(7).scale_used, 64.0);
  EXPECT_FALSE(s.step(std::numeric_limits<float>::infinity()).skipped);
}

// --- MXFP8 ------------------------------------------------------------------------------

TEST(Mxfp8, BlockScalesOnCraftedBlocks) {
  std::vector<float> v(6 * 32 + 5, 0.0f);
  v[3] = -448;             // block 0: amax 448 = 448 * 2^0 -> 2^0
  v[32 + 7] = 449;         // block 1: 448 < 449 <= 896 -> 2^1
  // block 2: all zeros -> 2^-127 (E8M0 code 0)
  v[96] = 1;               // block 3: 448 * 2^-9 = 0.875 < 1 <= 1.75 -> 2^-8
  v[128] = 1;              // block 4: a NaN does not count (fmaxf): amax 1 -> 2^-8
  v[129] = std::numeric_limits<float>::quiet_NaN();
  v[160] = 0x1p-149f;      // block 5: 2^-149 / 448 ~ 2^-157.8 -> clamped to 2^-127
  v[192] = 897;            // trailing 5 elements: 896 < 897 -> 2^2
  const auto x = mxfp8_block_scales(v);
  ASSERT_EQ(x.size(), 7u);
  EXPECT_EQ(x[0], 1.0);
  EXPECT_EQ(x[1], 2.0);
  EXPECT_EQ(x[2], 0x1p-127);
  EXPECT_EQ(x[3], 0x1p-8);
  EXPECT_EQ(x[4], 0x1p-8);
  EXPECT_EQ(x[5], 0x1p-127);
  EXPECT_EQ(x[6], 4.0);
  EXPECT_EQ(mxfp8_block_scale(896), 2.0);  // exactly 448 * 2
  // FLT_MAX / 448 ~ 2^119.2: 448 * 2^119 = 1.75 * 2^127 < FLT_MAX <= 1.75 * 2^128.
  EXPECT_EQ(mxfp8_block_scale(FLT_MAX), 0x1p120);
  EXPECT_EQ(mxfp8_block_scale(std::numeric_limits<float>::infinity()), 0x1p127);  // E8M0 code 0xFE
  EXPECT_TRUE(std::isnan(mxfp8_block_scale(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(mxfp8_block_scale(57344, kE5M2Max), 1.0);
}

// --- by name, options, traces ---------------------------------------------------------

TEST(MakeScaler, OptionsAndErrors) {
  const auto t = make_scaler("torch", {{"init", "2^10"}, {"interval", "1"}});
  auto& torch = dynamic_cast<TorchScaler&>(*t);
  expect_step(torch, false, 1024.0, false);
  EXPECT_EQ(torch.scale(), 2048.0);
  for (const auto& name : scaler_names()) {
    const ScalerOptions options = name == "static" ? ScalerOptions{{"scale", "128"}} : ScalerOptions{};
    EXPECT_NO_THROW(make_scaler(name, options)) << name;
  }
  EXPECT_EQ(make_scaler("delayed")->drive(), Drive::amax);
  EXPECT_EQ(make_scaler("megatron")->drive(), Drive::found_inf);
  auto message = [](const std::string& name, const ScalerOptions& o) {
    try {
      make_scaler(name, o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("tensorflow", {}).find("unknown strategy 'tensorflow' (strategies: none, static, torch"),
            std::string::npos);
  EXPECT_NE(message("torch", {{"hysteresis", "2"}}).find("unknown key 'hysteresis' (keys: init, growth, backoff, "
                                                          "interval)"),
            std::string::npos);
  EXPECT_NE(message("deepspeed", {{"hysteresis", "two"}}).find("deepspeed.hysteresis: 'two'"), std::string::npos);
  EXPECT_NE(message("keras", {{"variant", "keras2"}}).find("keras3, tf-keras"), std::string::npos);
  EXPECT_NE(message("static", {}).find("static.scale"), std::string::npos);
  EXPECT_NE(message("torch", {{"growth", "1"}}).find("growth"), std::string::npos);

  const ScalerOption o = parse_scaler_option("deepspeed.hysteresis=2");
  EXPECT_EQ(o.strategy, "deepspeed");
  EXPECT_EQ(o.key, "hysteresis");
  EXPECT_EQ(o.value, "2");
  EXPECT_THROW(parse_scaler_option("deepspeed=2"), std::invalid_argument);
  EXPECT_THROW(parse_scaler_option(".x=2"), std::invalid_argument);
}

TEST(Trace, ParsesFlagsAmaxesCommentsAndReportsTheLine) {
  std::istringstream in("# a trace\n0\n\n1  # overflow\n 2.5\ninf\nnan\n");
  const auto t = parse_trace(in);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[1].line, 4);
  EXPECT_EQ(t[1].value, 1.0);
  EXPECT_EQ(t[2].value, 2.5);
  EXPECT_EQ(t[3].value, inf);
  EXPECT_TRUE(std::isnan(t[4].value));
  for (const char* bad : {"0\n1\nx\n", "0\n\n-1\n", "0\n1\n1 0\n"}) {
    std::istringstream b(bad);
    try {
      parse_trace(b);
      ADD_FAILURE() << bad;
    } catch (const TraceError& e) {
      EXPECT_EQ(std::string(e.what()).substr(0, 7), "line 3:") << e.what();
    }
  }
  // A found_inf strategy refuses an amax, naming the line.
  DeepSpeedScaler ds;
  try {
    replay(ds, t, "deepspeed");
    ADD_FAILURE();
  } catch (const TraceError& e) {
    EXPECT_EQ(std::string(e.what()).substr(0, 7), "line 5:") << e.what();
  }
}

TEST(Replay, SummaryCountsAndStopsAtAbort) {
  DeepSpeedConfig c;
  c.init_scale = 2.0;
  c.hysteresis = 1;
  DeepSpeedScaler s(c);
  // 2 (inf) -> 1; 1 (clean); 1 (inf, at min: abort); the last step is not run.
  const std::vector<TraceStep> trace{{1, 1}, {2, 0}, {3, 1}, {4, 0}};
  const Replay r = replay(s, trace, "deepspeed");
  ASSERT_EQ(r.steps.size(), 3u);
  EXPECT_EQ(r.skipped_steps, 2u);
  EXPECT_EQ(r.steps_at_min, 2u);  // steps 1 and 2 ran at 1
  ASSERT_TRUE(r.aborted_at.has_value());
  EXPECT_EQ(*r.aborted_at, 2u);
  EXPECT_TRUE(r.steps[2].aborted);
  EXPECT_EQ(r.final_scale, 1.0);
}

}  // namespace
