// Activations: the emulated side against the FP64 reference (ULP tier), the
// FP64 backward against finite differences, hand-worked underflow cases, and
// the GPU side (skipped without a device).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "compare/compare.h"
#include "emu/activation_emu.h"
#include "emu/quantize.h"
#include "gpu/activation_gpu.h"
#include "gpu/device.h"
#include "ops/fp64_math.h"
#include "refs/activation_ref.h"

namespace {

using namespace mpverify;
using ops::Activation;
using ops::ActivationParams;

constexpr Activation kAll[] = {Activation::relu, Activation::leaky_relu, Activation::tanh, Activation::sigmoid};

// x over [-20, 20] (sigmoid underflows fp16 below about -17) and small values near 0.
std::vector<float> inputs() {
  std::vector<float> x;
  for (int i = -4000; i <= 4000; ++i) x.push_back(static_cast<float>(i) * 0.005f);
  for (int e = -30; e <= -1; ++e) {
    x.push_back(std::ldexp(1.3f, e));
    x.push_back(-std::ldexp(1.3f, e));
  }
  return x;
}

std::vector<float> rounded_to_fp16(std::vector<float> v) {
  emu::quantize(v, v, emu::QuantizeSpec{formats::parse_format("fp16")});
  return v;
}

// The emulator rounds the FP64 value of f once to fp16, so it is within half
// an fp16 ulp of it (the ulp of the binade of the exact value; below 2^-14 the
// subnormal spacing). The FP64 evaluation of tanh/exp errs by a few double
// ulps, 2^-50 relative, which is 2^-39 of an fp16 ulp: bound 0.5 + 2^-30.
const compare::Tolerance kHalfUlp = compare::Tolerance::ulps(0.5 + 0x1p-30, "one rounding of the FP64 value to fp16");

TEST(ActivationEmu, ForwardWithinHalfAnUlpOfFp64) {
  const auto fp16 = formats::parse_format("fp16");
  const auto x = inputs();
  const auto xr = rounded_to_fp16(x);  // the emulator sees fp16 inputs; so does the oracle
  int checked = 0;
  for (Activation a : kAll) {
    const ActivationParams p{a};
    std::vector<double> exact(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) exact[i] = ops::activation_fp64(p, xr[i]);
    std::vector<float> y(x.size());
    emu::activation_emu(p, x, y, {}, nullptr);
    const auto cmp = compare::compare(std::span<const double>(exact), y, fp16, kHalfUlp);
    EXPECT_TRUE(cmp.passed) << ops::to_string(a) << ": " << cmp.failure;
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(ActivationEmu, BackwardWithinHalfAnUlpOfFp64) {
  const auto fp16 = formats::parse_format("fp16");
  const auto x = inputs();
  std::vector<float> dy(x.size());
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = std::sin(static_cast<float>(i)) * 3.0f;
  const auto xr = rounded_to_fp16(x), dyr = rounded_to_fp16(dy);
  for (Activation a : kAll) {
    const ActivationParams p{a};
    std::vector<double> exact(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) exact[i] = ops::activation_derivative_fp64(p, xr[i]) * dyr[i];
    std::vector<float> dx(x.size());
    emu::activation_backward_emu(p, x, dy, dx, {}, nullptr);
    const auto cmp = compare::compare(std::span<const double>(exact), dx, fp16, kHalfUlp);
    EXPECT_TRUE(cmp.passed) << ops::to_string(a) << ": " << cmp.failure;
  }
}

TEST(ActivationRef, DerivativeMatchesFiniteDifferences) {
  // Central differences with h = 2^-20: truncation error h^2/6 |f'''| <= 2^-40/3
  // (|f'''| <= 2 for tanh, <= 1/8 for sigmoid, 0 away from the kink of the
  // piecewise-linear ones) plus cancellation 2 * 2^-53 |f| / (2h) <= 2^-33 for
  // |f| <= 1 (|f| <= 20 for relu: 20 * 2^-33); so 1e-8 is above the sum.
  const double h = 0x1p-20;
  int checked = 0;
  for (Activation a : kAll) {
    const ActivationParams p{a};
    for (int i = -2000; i <= 2000; ++i) {
      const double x = i * 0.01 + 0.003;  // never within 2h of the kink at 0
      const double fd = (ops::activation_fp64(p, x + h) - ops::activation_fp64(p, x - h)) / (2 * h);
      EXPECT_NEAR(fd, ops::activation_derivative_fp64(p, x), 1e-8) << ops::to_string(a) << " x=" << x;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * 4001);
}

// Where |x| is large, 1 - tanh^2 and s (1 - s) cancel; the reference's
// derivative must keep its relative accuracy there, since dy up to 65504
// carries f' down to 2^-40 into fp16's range. The true values come from long
// double (64-bit significand): 1 - tanhl(x)^2 errs by about 2^-64 / f', at
// most 4e-8 relative for f' >= 2.8e-12 (tanh up to x = 14, sigmoid up to
// x = 26); the cancelling double forms err by 2^-53 / f', about 1e-4 there.
TEST(ActivationRef, DerivativeKeepsItsRelativeAccuracyForLargeInputs) {
  for (const double x : {5.0, 8.0, 10.0, 12.0, 14.0, -14.0}) {
    const long double t = tanhl(static_cast<long double>(x));
    const double truth = static_cast<double>(1.0L - t * t);
    EXPECT_NEAR(ops::activation_derivative_fp64({Activation::tanh}, x) / truth, 1.0, 1e-6) << "tanh x=" << x;
  }
  for (const double x : {10.0, 18.0, 22.0, 26.0, -26.0}) {
    const long double s = 1.0L / (1.0L + expl(-static_cast<long double>(x)));
    const double truth = static_cast<double>(s * (1.0L - s));
    EXPECT_NEAR(ops::activation_derivative_fp64({Activation::sigmoid}, x) / truth, 1.0, 1e-6) << "sigmoid x=" << x;
  }
}

TEST(ActivationEmu, UnderflowAndOverflowAreCounted) {
  // sigmoid(-20) = 2.06e-9, below half of fp16's smallest subnormal 2^-24
  // (5.96e-8): rounds to zero. sigmoid(-17) = 4.14e-8 lies between 2^-25 and
  // 2^-24: rounds to 2^-24, a subnormal. 70000 overflows fp16 at the input.
  const std::vector<float> x = {-20.0f, -17.0f, 1.0f, 70000.0f};
  std::vector<float> y(x.size());
  emu::CounterSet counters;
  emu::activation_emu({Activation::sigmoid}, x, y, {}, &counters);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0x1p-24f);
  EXPECT_EQ(counters.find("activation.y")->underflow_to_zero, 1u);
  EXPECT_EQ(counters.find("activation.y")->subnormal, 1u);
  EXPECT_EQ(counters.find("activation.x")->overflow, 1u);
  EXPECT_EQ(y[3], 1.0f);  // sigmoid(inf) = 1
  // leaky ReLU: -0.001 * 0.01 = -1e-5 is subnormal in fp16 (below 2^-14 = 6.1e-5).
  emu::CounterSet leaky;
  std::vector<float> one(1);
  emu::activation_emu({Activation::leaky_relu, 0.01}, std::vector<float>{-0.001f}, one, {}, &leaky);
  EXPECT_EQ(leaky.find("activation.y")->subnormal, 1u);
  EXPECT_LT(one[0], 0.0f);
}

// torch.relu(nan) is nan (relu is clamp_min(0), which propagates NaN); a
// ReLU written as "x > 0 ? x : 0" would turn it into 0 and hide a non-finite
// activation from the trainer's origin tracking.
TEST(ActivationRef, ReluAndLeakyReluKeepNaN) {
  const std::vector<float> x = {NAN, -1.0f, 2.0f};
  std::vector<float> y(x.size()), y_emu(x.size());
  for (const ActivationParams p : {ActivationParams{Activation::relu}, ActivationParams{Activation::leaky_relu, 0.2}}) {
    refs::activation_ref(p, x, y);
    emu::activation_emu(p, x, y_emu, {});
    EXPECT_TRUE(std::isnan(y[0])) << ops::to_string(p.kind);
    EXPECT_TRUE(std::isnan(y_emu[0])) << ops::to_string(p.kind);
    EXPECT_EQ(y[2], 2.0f);
  }
}

TEST(ActivationEmu, MismatchedSizesAreRejected) {
  std::vector<float> x(3), y(2);
  EXPECT_THROW(emu::activation_emu({Activation::tanh}, x, y, {}), std::invalid_argument);
  EXPECT_THROW(refs::activation_ref({Activation::tanh}, x, y), std::invalid_argument);
}

// CUDA's tanhf and expf err by at most 2 fp32 ulps (CUDA C Programming Guide,
// "Mathematical functions"), and the sigmoid's division and 1 + e^x (the
// derivatives' e / (1 + e)^2 forms, which do not cancel) add a few more:
// under 2^-20 relative, far below half an fp16 ulp (2^-11), so the
// fp16 rounding of the GPU's fp32 value is the correctly rounded fp16 value or
// its neighbour: within 1 ulp of the emulator.
TEST(ActivationGpu, WithinOneUlpOfTheEmulator) {
  if (const std::string reason = gpu::gpu_unavailable_reason(); !reason.empty()) GTEST_SKIP() << reason;
  const auto fp16 = formats::parse_format("fp16");
  const auto x = inputs();
  std::vector<float> dy(x.size());
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = std::cos(static_cast<float>(i)) * 2.0f;
  for (Activation a : kAll) {
    const ActivationParams p{a};
    std::vector<float> emu_y(x.size()), gpu_y(x.size()), emu_dx(x.size()), gpu_dx(x.size());
    emu::activation_emu(p, x, emu_y, {}, nullptr);
    gpu::activation_gpu(p, x, gpu_y);
    emu::activation_backward_emu(p, x, dy, emu_dx, {}, nullptr);
    gpu::activation_backward_gpu(p, x, dy, gpu_dx);
    const auto tol = compare::Tolerance::ulps(1, "fp32 math within 2^-20 relative, then one fp16 rounding");
    const auto fwd = compare::compare(emu_y, gpu_y, fp16, tol);
    const auto bwd = compare::compare(emu_dx, gpu_dx, fp16, tol);
    EXPECT_TRUE(fwd.passed) << ops::to_string(a) << " forward: " << fwd.failure;
    EXPECT_TRUE(bwd.passed) << ops::to_string(a) << " backward: " << bwd.failure;
    RecordProperty(std::string(ops::to_string(a)) + "_bit_identical", std::to_string(fwd.bit_identical_fraction));
  }
}

}  // namespace
