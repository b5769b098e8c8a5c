// Losses (softmax cross-entropy, MSE, BCE with logits): the reference and the
// emulated side against FP64 within the bounds of emu/loss_bounds.h on seeded
// inputs, the FP64 backward against central finite differences of the FP64
// forward, hand-worked values and counters on crafted edge cases, input
// checks, and the GPU side against the emulator (skipped without a device).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "emu/loss_bounds.h"
#include "emu/loss_emu.h"
#include "emu/quantize.h"
#include "gpu/device.h"
#include "gpu/loss_gpu.h"
#include "ops/fp64_math.h"
#include "refs/loss_ref.h"

namespace {

using namespace mpverify;
using ops::SoftmaxCrossEntropyShape;

const formats::Format kFp16 = formats::parse_format("fp16");
const formats::Format kFp32 = formats::parse_format("fp32");

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<double> rounded_to(const std::vector<float>& v, const formats::Format& f) {
  std::vector<float> r = v;
  emu::quantize(r, r, emu::QuantizeSpec{f});
  return widen(r);
}

std::vector<float> normal(std::size_t n, double scale, std::mt19937_64& rng) {
  std::normal_distribution<double> d(0.0, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(rng));
  return v;
}

std::vector<float> uniform01(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A side's output against FP64 on its view of the inputs, element by element.
template <typename T>
void expect_within(const std::vector<T>& got, const std::vector<double>& fp64, const std::vector<double>& bound,
                   const std::string& what) {
  ASSERT_EQ(got.size(), fp64.size()) << what;
  ASSERT_EQ(bound.size(), fp64.size()) << what;
  int failures = 0;
  for (std::size_t k = 0; k < got.size(); ++k) {
    const double err = std::fabs(static_cast<double>(got[k]) - fp64[k]);
    if (!(err <= bound[k]) && ++failures <= 5)
      ADD_FAILURE() << what << " element " << k << ": " << got[k] << " vs " << fp64[k] << ", error " << err
                    << " > bound " << bound[k];
  }
}

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

// What every seeded case checks, given the outputs of the two host sides, the
// FP64 values on both views of the inputs, and the bounds:
//  - the input bound covers the FP64 difference between the views,
//  - each side is within its own bound of FP64 on its view,
//  - ref and emu agree within the tolerance `mpverify ops` uses,
//  - the emulator's bound is tight enough to mean something: relative
//    `max_relative` in norm (fp32 sums and loss: a few 2^-24 times the
//    length; fp16 gradients: half an fp16 ulp, 2^-11, plus the subnormal floor).
void check_sides(const std::vector<float>& ref, const std::vector<float>& emu_out, const std::vector<double>& exact,
                 const std::vector<double>& exact_rounded, const emu::LossErrorBounds& b, const formats::Format& out,
                 double max_relative, const std::string& what) {
  ASSERT_EQ(b.exact.size(), exact.size()) << what;
  for (std::size_t k = 0; k < exact.size(); ++k) ASSERT_DOUBLE_EQ(b.exact[k], exact[k]) << what;
  expect_within(exact_rounded, exact, b.input, what + " (input rounding)");
  expect_within(ref, exact, b.ref, what + " ref");
  expect_within(emu_out, exact_rounded, b.emu, what + " emu");
  const auto cmp = compare::compare(ref, emu_out, out, b.tolerance("ref", "emu"));
  EXPECT_TRUE(cmp.passed) << what << ": " << cmp.failure;
  EXPECT_LE(norm(b.emu), max_relative * norm(exact)) << what;
}

// --- emulated and reference sides against FP64, several seeds ----------------

TEST(LossEmu, SoftmaxCrossEntropyWithinBoundsOnSeveralSeeds) {
  int cases = 0;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    std::mt19937_64 rng(seed);
    // m > 256 in some cases: more classes than the GPU's threads per row.
    const SoftmaxCrossEntropyShape s{static_cast<int>(3 + seed * 5), static_cast<int>(7 + seed * 97)};
    // Standard deviation 4: rows span about e^+-20, so some dlogits underflow fp16.
    const auto z = normal(s.logits_size(), 4.0, rng);
    std::uniform_int_distribution<std::int32_t> label(0, s.classes - 1);
    std::vector<std::int32_t> labels(static_cast<std::size_t>(s.batch));
    for (auto& l : labels) l = label(rng);
    const std::string what = "seed " + std::to_string(seed);
    const emu::LossPolicy policy;
    const auto zr = rounded_to(z, policy.input);

    const std::vector<float> ref = {refs::softmax_cross_entropy_ref(s, z, labels)};
    const std::vector<float> emu_out = {emu::softmax_cross_entropy_emu(s, z, labels, policy)};
    // fp32 sums of m and b terms and an fp32 loss: (m + b + 2) 2^-24 relative
    // and the log's absolute error over a loss of order 1; 2^-12 covers both.
    check_sides(ref, emu_out, {ops::softmax_cross_entropy_fp64(s, widen(z), labels)},
                {ops::softmax_cross_entropy_fp64(s, zr, labels)},
                emu::softmax_cross_entropy_bounds(s, z, labels, policy, false), kFp32, 0x1p-12, what);

    std::vector<float> dref(z.size()), demu(z.size());
    refs::softmax_cross_entropy_backward_ref(s, z, labels, dref);
    emu::softmax_cross_entropy_backward_emu(s, z, labels, demu, policy);
    check_sides(dref, demu, ops::softmax_cross_entropy_backward_fp64(s, widen(z), labels),
                ops::softmax_cross_entropy_backward_fp64(s, zr, labels),
                emu::softmax_cross_entropy_bounds(s, z, labels, policy, true), kFp16, 0x1p-10, what + " backward");
    ++cases;
  }
  EXPECT_EQ(cases, 5);
}

TEST(LossEmu, MseWithinBoundsOnSeveralSeeds) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    std::mt19937_64 rng(seed);
    const std::size_t n = 100 + 500 * seed;
    const auto y = normal(n, 1.0, rng), t = normal(n, 1.0, rng);
    const std::string what = "seed " + std::to_string(seed);
    const emu::LossPolicy policy;
    const auto yr = rounded_to(y, policy.input);
    check_sides({refs::mse_ref(y, t)}, {emu::mse_emu(y, t, policy)}, {ops::mse_fp64(widen(y), widen(t))},
                {ops::mse_fp64(yr, widen(t))}, emu::mse_bounds(y, t, policy, false), kFp32, 0x1p-12, what);
    std::vector<float> dref(n), demu(n);
    refs::mse_backward_ref(y, t, dref);
    emu::mse_backward_emu(y, t, demu, policy);
    check_sides(dref, demu, ops::mse_backward_fp64(widen(y), widen(t)), ops::mse_backward_fp64(yr, widen(t)),
                emu::mse_bounds(y, t, policy, true), kFp16, 0x1p-10, what + " backward");
  }
}

TEST(LossEmu, BceWithLogitsWithinBoundsOnSeveralSeeds) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    std::mt19937_64 rng(seed);
    const std::size_t n = 100 + 500 * seed;
    const auto x = normal(n, 4.0, rng), t = uniform01(n, rng);
    const std::string what = "seed " + std::to_string(seed);
    const emu::LossPolicy policy;
    const auto xr = rounded_to(x, policy.input);
    check_sides({refs::bce_with_logits_ref(x, t)}, {emu::bce_with_logits_emu(x, t, policy)},
                {ops::bce_with_logits_fp64(widen(x), widen(t))}, {ops::bce_with_logits_fp64(xr, widen(t))},
                emu::bce_with_logits_bounds(x, t, policy, false), kFp32, 0x1p-12, what);
    std::vector<float> dref(n), demu(n);
    refs::bce_with_logits_backward_ref(x, t, dref);
    emu::bce_with_logits_backward_emu(x, t, demu, policy);
    check_sides(dref, demu, ops::bce_with_logits_backward_fp64(widen(x), widen(t)),
                ops::bce_with_logits_backward_fp64(xr, widen(t)), emu::bce_with_logits_bounds(x, t, policy, true),
                kFp16, 0x1p-10, what + " backward");
  }
}

TEST(LossEmu, Fp32AccumulationBoundRejectsAnFp16RunningSum) {
  // The bounds can fail: the emulator with an fp16 running sum (u = 2^-11)
  // is not within the fp32 bound (u = 2^-24) on the same MSE: 1000 terms of
  // size ~2 summing to ~2000, each addition rounded to 11 bits (spacing 1
  // past 1024), errs by ~1e-3 relative against the fp32 bound's ~6e-5.
  std::mt19937_64 rng(7);
  const auto y = normal(1000, 1.0, rng), t = normal(1000, 1.0, rng);
  emu::LossPolicy fp16_acc;
  fp16_acc.accumulate = kFp16;
  const auto yr = rounded_to(y, fp16_acc.input);
  const double exact_rounded = ops::mse_fp64(yr, widen(t));
  const auto fp32_bound = emu::mse_bounds(y, t, emu::LossPolicy{}, false).emu[0];
  const auto fp16_bound = emu::mse_bounds(y, t, fp16_acc, false).emu[0];
  const double err = std::fabs(emu::mse_emu(y, t, fp16_acc) - exact_rounded);
  EXPECT_GT(err, fp32_bound);
  EXPECT_LE(err, fp16_bound);
}

// --- FP64 backward against central finite differences of the FP64 forward ---

// Central differences with step h err by h^2/6 max|f'''| (truncation) plus
// 2 e / (2h), e the FP64 evaluation error of f (cancellation); each test
// states both and takes a tolerance above their sum.
template <typename Loss, typename Grad>
void expect_matches_finite_differences(std::vector<double> a, Loss loss, Grad grad, double h, double tol,
                                       const std::string& what) {
  const std::vector<double> g = grad(a);
  ASSERT_EQ(g.size(), a.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    const double keep = a[k];
    a[k] = keep + h;
    const double up = loss(a);
    a[k] = keep - h;
    const double down = loss(a);
    a[k] = keep;
    EXPECT_NEAR((up - down) / (2 * h), g[k], tol) << what << " element " << k;
  }
}

TEST(LossRef, SoftmaxCrossEntropyBackwardMatchesFiniteDifferences) {
  // d^3 logsumexp / dz_j^3 = p(1-p)(1-2p), at most 1/(6 sqrt 3) < 0.1, over
  // b: truncation h^2/6 * 0.1/b < 2^-28 / 60 for h = 2^-14. The loss (a few
  // units) evaluates to within 2^-45 (m + b steps of 2^-53): cancellation
  // 2^-45 / 2^-14 = 2^-31. Tolerance 1e-9 > 2^-31 + 2^-34.
  std::mt19937_64 rng(11);
  const SoftmaxCrossEntropyShape s{4, 9};
  const auto z = normal(s.logits_size(), 3.0, rng);
  const std::vector<std::int32_t> labels = {0, 8, 3, 3};
  expect_matches_finite_differences(
      widen(z), [&](const std::vector<double>& v) { return ops::softmax_cross_entropy_fp64(s, v, labels); },
      [&](const std::vector<double>& v) { return ops::softmax_cross_entropy_backward_fp64(s, v, labels); },
      0x1p-14, 1e-9, "softmax cross-entropy");
}

TEST(LossRef, MseBackwardMatchesFiniteDifferences) {
  // A quadratic: no truncation error at all. The loss (about 2) evaluates to
  // within n 2^-53 * 2 = 2^-46 for n = 50: cancellation 2^-46 / 2^-14 = 2^-32.
  std::mt19937_64 rng(12);
  const auto y = normal(50, 1.0, rng), t = normal(50, 1.0, rng);
  const auto tt = widen(t);
  expect_matches_finite_differences(
      widen(y), [&](const std::vector<double>& v) { return ops::mse_fp64(v, tt); },
      [&](const std::vector<double>& v) { return ops::mse_backward_fp64(v, tt); }, 0x1p-14, 1e-9, "mse");
}

TEST(LossRef, BceWithLogitsBackwardMatchesFiniteDifferences) {
  // The term's third derivative in x is sigmoid'' = s(1-s)(1-2s), below 0.1;
  // over n = 50: truncation h^2/6 * 0.1/50 < 2^-28 / 3000. The loss (a few
  // units) within 2^-45: cancellation 2^-31. Tolerance 1e-9.
  std::mt19937_64 rng(13);
  const auto x = normal(50, 4.0, rng), t = uniform01(50, rng);
  const auto tt = widen(t);
  expect_matches_finite_differences(
      widen(x), [&](const std::vector<double>& v) { return ops::bce_with_logits_fp64(v, tt); },
      [&](const std::vector<double>& v) { return ops::bce_with_logits_backward_fp64(v, tt); }, 0x1p-14, 1e-9,
      "bce with logits");
}

// --- hand-worked values and counters --------------------------------------------

TEST(LossEmu, SoftmaxOfTwoEqualLogitsIsExact) {
  // Two equal logits: loss log 2 per row, softmax 1/2: dlogits = (1/2 - 1)/b
  // and (1/2)/b, exact in fp16 for b = 2.
  const SoftmaxCrossEntropyShape s{2, 2};
  const std::vector<float> z = {3, 3, -1, -1};
  const std::vector<std::int32_t> labels = {0, 1};
  EXPECT_EQ(emu::softmax_cross_entropy_emu(s, z, labels, {}), static_cast<float>(std::log(2.0)));
  std::vector<float> d(4);
  emu::softmax_cross_entropy_backward_emu(s, z, labels, d, {});
  EXPECT_EQ(d, (std::vector<float>{-0.25f, 0.25f, 0.25f, -0.25f}));
}

TEST(LossEmu, LogitsNear65504StayFiniteThanksToTheMaxSubtraction) {
  // 65504 (fp16's largest), 65472 and 65440 are fp16 values: no overflow at
  // the input. exp(65504) overflows fp32 (and FP64), but exp(z - max) is
  // 1, e^-32, e^-64, e^-65504: the fp32 row sum is 1 + 1.3e-14 + ..., and
  // both small terms are lost (swamped: below half an ulp of 1, 2^-24);
  // exp(-65504) is 0 in FP64 and adds nothing. Label 1: loss = log 1 + 32 = 32.
  const SoftmaxCrossEntropyShape s{1, 4};
  const std::vector<float> z = {65504, 65472, 65440, 0};
  emu::CounterSet c;
  EXPECT_EQ(emu::softmax_cross_entropy_emu(s, z, std::vector<std::int32_t>{1}, {}, &c), 32.0f);
  EXPECT_EQ(c.find("softmax_cross_entropy.logits")->overflow, 0u);
  EXPECT_EQ(c.find("softmax_cross_entropy.sum_exp")->addends_nonzero, 3u);
  EXPECT_EQ(c.find("softmax_cross_entropy.sum_exp")->swamped, 2u);
  EXPECT_NEAR(ops::softmax_cross_entropy_fp64(s, widen(z), std::vector<std::int32_t>{1}), 32.0, 1e-12);

  // 65519 is below the rounding boundary 65520 (65504 + half its ulp of 32)
  // and rounds to 65504; 65520 is the tie, which rounds to even: infinity.
  // The overflowed logit makes max = inf and inf - inf a NaN: the loss is NaN.
  emu::CounterSet c2;
  const float loss = emu::softmax_cross_entropy_emu({1, 2}, std::vector<float>{65519, 65520},
                                                    std::vector<std::int32_t>{0}, {}, &c2);
  EXPECT_EQ(c2.find("softmax_cross_entropy.logits")->overflow, 1u);
  EXPECT_TRUE(std::isnan(loss));
}

TEST(LossEmu, TinyProbabilitiesUnderflowInTheFp16Gradient) {
  // b = 1, label 0, logits 0, -16, -20, -30, -10000 (all fp16 values).
  // The fp32 row sum: 1 + e^-16 (1.125e-7, 0.94 of fp32's spacing 2^-23 at
  // 1) rounds to S = 1 + 2^-23; e^-20 and e^-30 are then swamped. p_j = e^z_j / S:
  //  e^-16 / S = 1.125e-7: subnormal in fp16 (below 2^-14), rounds to 2^-23
  //    (1.89 spacings of 2^-24);
  //  e^-20 / S = 2.06e-9 and e^-30 / S = 9.4e-14: below 2^-25, half the
  //    smallest subnormal: underflow to zero;
  //  e^-10000 is 0 in FP64: an exact zero, not an underflow;
  //  p_0 - 1 = 1/S - 1 = -1.99999976 * 2^-24: subnormal, rounds to -2^-23.
  const std::vector<float> z = {0, -16, -20, -30, -10000};
  std::vector<float> d(z.size());
  emu::CounterSet c;
  emu::softmax_cross_entropy_backward_emu({1, 5}, z, std::vector<std::int32_t>{0}, d, {}, &c);
  const emu::Counters* out = c.find("softmax_cross_entropy_backward.dlogits");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->elements, 5u);
  EXPECT_EQ(out->underflow_to_zero, 2u);
  EXPECT_EQ(out->subnormal, 2u);
  EXPECT_EQ(out->zeros_in, 1u);
  EXPECT_EQ(d[1], 0x1p-23f);
  EXPECT_EQ(d[2], 0.0f);
  EXPECT_EQ(d[3], 0.0f);
  EXPECT_EQ(d[4], 0.0f);
  EXPECT_EQ(d[0], -0x1p-23f);
  // In fp32 the same gradient keeps the tiny probabilities.
  emu::LossPolicy fp32_out;
  fp32_out.output = kFp32;
  emu::softmax_cross_entropy_backward_emu({1, 5}, z, std::vector<std::int32_t>{0}, d, fp32_out);
  EXPECT_GT(d[2], 0.0f);
  EXPECT_GT(d[3], 0.0f);
}

TEST(LossEmu, OneClassFarAboveTheOthersGivesLossZero) {
  // Logits 50, 0, 0, 0, label 0: loss = log(1 + 3 e^-50) = 5.8e-22. In fp32
  // the row sum 1 + 3 e^-50 is 1 (each e^-50 swamped), so the emulated loss
  // is exactly 0; the reference (log1p of the small terms) keeps 5.8e-22, a
  // normal fp32 value, to within half its fp32 ulp (2^-95 = 2.5e-29).
  // Backward, with that S = 1: p_0 - 1 = 1/1 - 1 is an exact zero, and the
  // other three, e^-50 = 1.9e-22, lie below 2^-25: they underflow fp16.
  const SoftmaxCrossEntropyShape s{1, 4};
  const std::vector<float> z = {50, 0, 0, 0};
  const std::vector<std::int32_t> label = {0};
  emu::CounterSet c;
  EXPECT_EQ(emu::softmax_cross_entropy_emu(s, z, label, {}, &c), 0.0f);
  EXPECT_EQ(c.find("softmax_cross_entropy.sum_exp")->swamped, 3u);
  EXPECT_NEAR(refs::softmax_cross_entropy_ref(s, z, label), 3 * std::exp(-50.0), 3e-29);
  std::vector<float> d(4);
  emu::CounterSet cb;
  emu::softmax_cross_entropy_backward_emu(s, z, label, d, {}, &cb);
  EXPECT_EQ(cb.find("softmax_cross_entropy_backward.dlogits")->underflow_to_zero, 3u);
  EXPECT_EQ(cb.find("softmax_cross_entropy_backward.dlogits")->zeros_in, 1u);
  for (float v : d) EXPECT_EQ(v, 0.0f);
}

TEST(LossEmu, Fp16AccumulationOfALongSoftmaxSumSwamps) {
  // 4096 equal logits: S = 4096 exactly. An fp16 running sum of ones is
  // exact up to 2048, where the spacing becomes 2: 2048 + 1 is a tie that
  // rounds to even, 2048, so each of the last 2048 additions is lost.
  // The row loss log(2048) = 7.62462 is then rounded by the fp16 batch sum
  // (spacing 2^-8 in [4, 8)): 1951.9 spacings, 7.625. In fp32 throughout:
  // log(4096) rounded once to fp32.
  const SoftmaxCrossEntropyShape s{1, 4096};
  const std::vector<float> z(4096, 0.5f);
  emu::LossPolicy fp16_acc;
  fp16_acc.accumulate = kFp16;
  emu::CounterSet c;
  EXPECT_EQ(emu::softmax_cross_entropy_emu(s, z, std::vector<std::int32_t>{7}, fp16_acc, &c),
            7.625f);
  EXPECT_EQ(c.find("softmax_cross_entropy.sum_exp")->swamped, 2048u);
  EXPECT_EQ(emu::softmax_cross_entropy_emu(s, z, std::vector<std::int32_t>{7}, {}),
            static_cast<float>(std::log(4096.0)));
}

TEST(LossEmu, Fp16AccumulationOfALongMeanSwamps) {
  // MSE over 4096 elements with (y - t)^2 = 1: the fp16 running sum stops at
  // 2048 (as above): 2048 swamped additions, loss 2048 / 4096 = 0.5, not 1.
  const std::vector<float> y(4096, 1.0f), t(4096, 0.0f);
  emu::LossPolicy fp16_acc;
  fp16_acc.accumulate = kFp16;
  emu::CounterSet c;
  EXPECT_EQ(emu::mse_emu(y, t, fp16_acc, &c), 0.5f);
  EXPECT_EQ(c.find("mse.sum")->addends_nonzero, 4096u);
  EXPECT_EQ(c.find("mse.sum")->swamped, 2048u);
  emu::CounterSet c32;
  EXPECT_EQ(emu::mse_emu(y, t, {}, &c32), 1.0f);
  EXPECT_EQ(c32.find("mse.sum")->swamped, 0u);
}

TEST(LossEmu, MseSquareOverflowsAnFp16SumButNotFp32) {
  // (300 - 0)^2 = 90000 > 65504: the fp16 running sum overflows at its first
  // addition; fp32 holds it: loss (90000 + 0) / 2 = 45000 exactly.
  const std::vector<float> y = {300, 0}, t = {0, 0};
  emu::CounterSet c32;
  EXPECT_EQ(emu::mse_emu(y, t, {}, &c32), 45000.0f);
  EXPECT_EQ(c32.find("mse.sum")->overflow, 0u);
  emu::LossPolicy fp16_acc;
  fp16_acc.accumulate = kFp16;
  emu::CounterSet c16;
  EXPECT_TRUE(std::isinf(emu::mse_emu(y, t, fp16_acc, &c16)));
  EXPECT_EQ(c16.find("mse.sum")->overflow, 1u);
  // The gradient 2 * 300 / 2 = 300 is an fp16 value.
  std::vector<float> dy(2);
  emu::mse_backward_emu(y, t, dy, {});
  EXPECT_EQ(dy, (std::vector<float>{300.0f, 0.0f}));
}

TEST(LossEmu, BceWithLargeLogitsDoesNotOverflow) {
  // max(x,0) - x t + log1p(e^-|x|) at x = 60000, t = 1: 0 + log1p(e^-60000)
  // = 0; x = -60000, t = 0: 0; x = 100, t = 0.5: 50 + e^-100 (lost in fp32);
  // x = -100, t = 0.25: 25 + e^-100. Mean (0 + 0 + 50 + 25) / 4 = 18.75.
  // (-t log s - (1-t) log(1-s) would take log(0) = -inf at x = +-60000.)
  const std::vector<float> x = {60000, -60000, 100, -100}, t = {1, 0, 0.5f, 0.25f};
  emu::CounterSet c;
  EXPECT_EQ(emu::bce_with_logits_emu(x, t, {}, &c), 18.75f);
  EXPECT_EQ(c.find("bce_with_logits.x")->overflow, 0u);
  EXPECT_EQ(c.find("bce_with_logits.sum")->overflow, 0u);
  EXPECT_EQ(refs::bce_with_logits_ref(x, t), 18.75f);
  // dx = (sigmoid(x) - t) / 4: sigmoid(+-60000) is 1 and 0 (e^-60000 is 0
  // in FP64); sigmoid(100) = 1 - 3.7e-44 is 1; sigmoid(-100) = 3.7e-44.
  std::vector<float> dx(4);
  emu::bce_with_logits_backward_emu(x, t, dx, {});
  EXPECT_EQ(dx, (std::vector<float>{0.0f, 0.0f, 0.125f, -0.0625f}));
}

// --- bad input -----------------------------------------------------------------------

template <typename F>
std::string message_of(F f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

TEST(LossChecks, BadLabelsAreRejectedByIndex) {
  const SoftmaxCrossEntropyShape s{3, 4};
  const std::vector<float> z(12, 0.0f);
  std::vector<float> d(12);
  for (const std::vector<std::int32_t>& labels : {std::vector<std::int32_t>{0, 4, 1}, std::vector<std::int32_t>{0, -1, 1}}) {
    EXPECT_NE(message_of([&] { refs::softmax_cross_entropy_ref(s, z, labels); }).find("labels[1]"), std::string::npos);
    EXPECT_NE(message_of([&] { emu::softmax_cross_entropy_emu(s, z, labels, {}); }).find("labels[1]"),
              std::string::npos);
    EXPECT_NE(message_of([&] { emu::softmax_cross_entropy_backward_emu(s, z, labels, d, {}); }).find("labels[1]"),
              std::string::npos);
  }
}

TEST(LossChecks, SizeMismatchesAndBadTargetsThrow) {
  const SoftmaxCrossEntropyShape s{3, 4};
  const std::vector<std::int32_t> labels = {0, 1, 2};
  std::vector<float> z(12), d(11), y(5), t(4), out(5);
  EXPECT_NE(message_of([&] { emu::softmax_cross_entropy_emu(s, std::vector<float>(11), labels, {}); }).find("logits"),
            std::string::npos);
  EXPECT_NE(message_of([&] { refs::softmax_cross_entropy_ref(s, z, std::vector<std::int32_t>{0, 1}); }).find("labels"),
            std::string::npos);
  EXPECT_NE(message_of([&] { emu::softmax_cross_entropy_backward_emu(s, z, labels, d, {}); }).find("dlogits"),
            std::string::npos);
  EXPECT_THROW(refs::softmax_cross_entropy_ref({0, 4}, {}, {}), std::invalid_argument);
  EXPECT_NE(message_of([&] { emu::mse_emu(y, t, {}); }).find("t has 4"), std::string::npos);
  EXPECT_NE(message_of([&] { emu::mse_backward_emu(y, y, t, {}); }).find("dy"),
            std::string::npos);
  EXPECT_THROW(refs::mse_ref({}, {}), std::invalid_argument);
  EXPECT_THROW(emu::bce_with_logits_emu(y, t, {}), std::invalid_argument);
  EXPECT_THROW(refs::bce_with_logits_backward_ref(y, t, out), std::invalid_argument);
  // A target outside [0, 1] is named by its index.
  const std::vector<float> bad = {0.5f, 0.0f, 1.5f, 1.0f, 0.2f};
  EXPECT_NE(message_of([&] { emu::bce_with_logits_emu(y, bad, {}); }).find("t[2]"), std::string::npos);
  EXPECT_NE(message_of([&] { refs::bce_with_logits_ref(y, bad); }).find("t[2]"), std::string::npos);
}

// --- the GPU side against the emulator --------------------------------------------

#define SKIP_WITHOUT_GPU()                                                        \
  do {                                                                            \
    if (const std::string reason = gpu::gpu_unavailable_reason(); !reason.empty()) \
      GTEST_SKIP() << reason;                                                     \
  } while (0)

// Both within their a priori bounds of FP64 on the same fp16-rounded inputs
// (emu/loss_bounds.cpp derives the GPU's from CUDA's documented expf / logf /
// log1pf errors and fp32 arithmetic): the emu-gpu tolerance is their sum.
TEST(LossGpu, WithinTheBoundsOfTheEmulatorAndReproducible) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(21);
  const SoftmaxCrossEntropyShape s{37, 1000};
  const auto z = normal(s.logits_size(), 4.0, rng);
  std::uniform_int_distribution<std::int32_t> label(0, s.classes - 1);
  std::vector<std::int32_t> labels(37);
  for (auto& l : labels) l = label(rng);
  const auto y = normal(20000, 1.0, rng), ty = normal(20000, 1.0, rng);
  const auto x = normal(20000, 4.0, rng), tx = uniform01(20000, rng);
  const emu::LossPolicy policy;

  auto check = [](const std::vector<float>& e, const std::vector<float>& g, const emu::LossErrorBounds& b,
                  const formats::Format& out, const std::string& what) {
    const auto cmp = compare::compare(e, g, out, b.tolerance("emu", "gpu"));
    EXPECT_TRUE(cmp.passed) << what << ": " << cmp.failure;
  };
  check({emu::softmax_cross_entropy_emu(s, z, labels, policy)}, {gpu::softmax_cross_entropy_gpu(s, z, labels)},
        emu::softmax_cross_entropy_bounds(s, z, labels, policy, false), kFp32, "softmax cross-entropy");
  check({emu::mse_emu(y, ty, policy)}, {gpu::mse_gpu(y, ty)}, emu::mse_bounds(y, ty, policy, false), kFp32, "mse");
  check({emu::bce_with_logits_emu(x, tx, policy)}, {gpu::bce_with_logits_gpu(x, tx)},
        emu::bce_with_logits_bounds(x, tx, policy, false), kFp32, "bce");

  std::vector<float> de(z.size()), dg(z.size()), dg2(z.size());
  emu::softmax_cross_entropy_backward_emu(s, z, labels, de, policy);
  gpu::softmax_cross_entropy_backward_gpu(s, z, labels, dg);
  check(de, dg, emu::softmax_cross_entropy_bounds(s, z, labels, policy, true), kFp16, "dlogits");
  gpu::softmax_cross_entropy_backward_gpu(s, z, labels, dg2);
  EXPECT_EQ(dg, dg2);  // deterministic
  std::vector<float> ye(y.size()), yg(y.size()), xe(x.size()), xg(x.size());
  emu::mse_backward_emu(y, ty, ye, policy);
  gpu::mse_backward_gpu(y, ty, yg);
  check(ye, yg, emu::mse_bounds(y, ty, policy, true), kFp16, "dy");
  emu::bce_with_logits_backward_emu(x, tx, xe, policy);
  gpu::bce_with_logits_backward_gpu(x, tx, xg);
  check(xe, xg, emu::bce_with_logits_bounds(x, tx, policy, true), kFp16, "dx");

  // The fixed-order reductions: a rerun is bitwise identical.
  const float l1 = gpu::softmax_cross_entropy_gpu(s, z, labels), l2 = gpu::softmax_cross_entropy_gpu(s, z, labels);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(l1), std::bit_cast<std::uint32_t>(l2));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(gpu::mse_gpu(y, ty)), std::bit_cast<std::uint32_t>(gpu::mse_gpu(y, ty)));
}

TEST(LossGpu, EdgeCasesMatchTheEmulator) {
  SKIP_WITHOUT_GPU();
  // Logits near 65504 stay finite; BCE at |x| = 60000 stays finite; the
  // values are exact on both sides (see the emulator tests above).
  EXPECT_EQ(gpu::softmax_cross_entropy_gpu({1, 4}, std::vector<float>{65504, 65472, 65440, 0},
                                           std::vector<std::int32_t>{1}),
            32.0f);
  EXPECT_EQ(gpu::bce_with_logits_gpu(std::vector<float>{60000, -60000, 100, -100},
                                     std::vector<float>{1, 0, 0.5f, 0.25f}),
            18.75f);
}

}  // namespace
