// SGD and Adam: the FP32 reference against a scalar transcription of
// PyTorch's steps (bit-exact) and against the FP64 reference (running error
// bounds), the emulator against the reference (bit-exact with fp32 formats,
// within the bounds otherwise), hand-worked swamping in fp16 and bf16,
// PyTorch's first-step, nesterov and bias-correction semantics, non-finite
// gradients, argument errors, and the GPU side (skipped without a device).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "compare/compare.h"
#include "emu/optimizer_emu.h"
#include "emu/quantize.h"
#include "gpu/device.h"
#include "gpu/optimizer_gpu.h"
#include "refs/optimizer_bound.h"
#include "refs/optimizer_ref.h"
#include "support/tensors.h"

namespace {

using namespace mpverify::test_support;

using namespace mpverify;
using ops::AdamParams;
using ops::SgdParams;
using Grads = std::vector<std::vector<float>>;

const formats::Format kFp16 = formats::parse_format("fp16");
const formats::Format kBf16 = formats::parse_format("bf16");
const formats::Format kFp32 = formats::parse_format("fp32");

struct Problem {
  std::vector<float> w0;
  Grads grads;
};

// Weights ~ N(0,1) in `weights`, T gradients ~ N(0, 1e-3).
Problem problem(std::uint64_t seed, std::size_t n, int steps, const formats::Format& weights = kFp32) {
  std::mt19937_64 rng(seed);
  Problem p{in_format(normal(n, rng, 1.0), weights), {}};
  for (int t = 0; t < steps; ++t) p.grads.push_back(normal(n, rng, 1e-3));
  return p;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

std::vector<SgdParams> sgd_variants() {
  std::vector<SgdParams> v;
  v.push_back({1e-3, 0, 0, 0, false});
  v.push_back({1e-3, 0.9, 0, 0, false});
  v.push_back({1e-2, 0.9, 0.3, 1e-2, false});
  v.push_back({1e-3, 0.9, 0, 5e-2, true});
  return v;
}

std::vector<AdamParams> adam_variants() {
  std::vector<AdamParams> v;
  v.push_back({});
  v.push_back({1e-2, 0.9, 0.999, 1e-8, 1e-2, false});
  v.push_back({1e-3, 0.3, 0.99, 1e-6, 0, false});  // lerp weight 0.7: ATen's other branch
  v.push_back({1e-3, 0.9, 0.999, 1e-8, 0.1, true});
  return v;
}

// --- PyTorch's steps, transcribed one tensor operation per line --------------
// Each line is one ATen kernel on float tensors (scalar CPU form): the
// hyperparameter is a Python float, converted to float by the kernel.

void torch_sgd_step(const SgdParams& p, bool first, std::vector<float>& w, std::vector<float>& buf,
                    const std::vector<float>& grad_in) {
  for (std::size_t i = 0; i < w.size(); ++i) {
    float grad = grad_in[i];
    if (p.weight_decay != 0) {  // grad = grad.add(param, alpha=weight_decay)
      const float alpha = static_cast<float>(p.weight_decay);
      const float product = alpha * w[i];
      grad = grad + product;
    }
    if (p.momentum != 0) {
      if (first) {
        buf[i] = grad;  // buf = torch.clone(grad).detach()
      } else {
        const float scaled = buf[i] * static_cast<float>(p.momentum);  // buf.mul_(momentum)
        const float alpha = static_cast<float>(1 - p.dampening);       // .add_(grad, alpha=1-dampening)
        const float product = alpha * grad;
        buf[i] = scaled + product;
      }
      if (p.nesterov) {  // grad = grad.add(buf, alpha=momentum)
        const float product = static_cast<float>(p.momentum) * buf[i];
        grad = grad + product;
      } else {
        grad = buf[i];
      }
    }
    const float alpha = static_cast<float>(-p.lr);  // param.add_(grad, alpha=-lr)
    const float product = alpha * grad;
    w[i] = w[i] + product;
  }
}

void torch_adam_step(const AdamParams& p, int step, std::vector<float>& w, std::vector<float>& exp_avg,
                     std::vector<float>& exp_avg_sq, const std::vector<float>& grad_in) {
  const double bias_correction1 = 1 - std::pow(p.beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(p.beta2, static_cast<double>(step));
  const double step_size = p.lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (p.adamw && p.weight_decay != 0) w[i] = w[i] * static_cast<float>(1 - p.lr * p.weight_decay);
    float grad = grad_in[i];
    if (!p.adamw && p.weight_decay != 0) {
      const float product = static_cast<float>(p.weight_decay) * w[i];
      grad = grad + product;
    }
    // exp_avg.lerp_(grad, 1 - beta1): ATen Lerp.h
    const float weight = static_cast<float>(1 - p.beta1);
    const float diff = grad - exp_avg[i];
    if (std::fabs(weight) < 0.5f) {
      const float product = weight * diff;
      exp_avg[i] = exp_avg[i] + product;
    } else {
      const float complement = 1.0f - weight;
      const float product = diff * complement;
      exp_avg[i] = grad - product;
    }
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2): self + value * t1 * t2
    exp_avg_sq[i] = exp_avg_sq[i] * static_cast<float>(p.beta2);
    const float value_t1 = static_cast<float>(1 - p.beta2) * grad;
    const float value_t1_t2 = value_t1 * grad;
    exp_avg_sq[i] = exp_avg_sq[i] + value_t1_t2;
    // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    float denom = std::sqrt(exp_avg_sq[i]);
    denom = denom / static_cast<float>(bias_correction2_sqrt);
    denom = denom + static_cast<float>(p.eps);
    // param.addcdiv_(exp_avg, denom, value=-step_size): self + value * t1 / t2
    const float value_m = static_cast<float>(-step_size) * exp_avg[i];
    const float quotient = value_m / denom;
    w[i] = w[i] + quotient;
  }
}

// --- the FP32 reference is PyTorch's step --------------------------------------

TEST(OptimizerRef, SgdEqualsPyTorchTranscriptionBitForBit) {
  int checked = 0;
  for (const SgdParams& p : sgd_variants())
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      const Problem pr = problem(seed, 1000, 6);
      std::vector<float> w = pr.w0, v(1000, 0.0f), tw = pr.w0, tv(1000, 0.0f);
      for (int t = 0; t < 6; ++t) {
        refs::sgd_step_ref(p, t + 1, w, v, pr.grads[static_cast<std::size_t>(t)]);
        torch_sgd_step(p, t == 0, tw, tv, pr.grads[static_cast<std::size_t>(t)]);
      }
      EXPECT_TRUE(same_bits(w, tw)) << "momentum " << p.momentum << " seed " << seed;
      EXPECT_TRUE(same_bits(v, tv)) << "momentum " << p.momentum << " seed " << seed;
      EXPECT_FALSE(same_bits(w, pr.w0));  // the steps did move the weights
      ++checked;
    }
  EXPECT_EQ(checked, 12);
}

TEST(OptimizerRef, AdamEqualsPyTorchTranscriptionBitForBit) {
  int checked = 0;
  for (const AdamParams& p : adam_variants())
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      const Problem pr = problem(seed, 1000, 6);
      std::vector<float> w = pr.w0, m(1000, 0.0f), v(1000, 0.0f), tw = pr.w0, tm(1000, 0.0f), tv(1000, 0.0f);
      for (int t = 0; t < 6; ++t) {
        refs::adam_step_ref(p, t + 1, w, m, v, pr.grads[static_cast<std::size_t>(t)]);
        torch_adam_step(p, t + 1, tw, tm, tv, pr.grads[static_cast<std::size_t>(t)]);
      }
      EXPECT_TRUE(same_bits(w, tw)) << "beta1 " << p.beta1 << " seed " << seed;
      EXPECT_TRUE(same_bits(m, tm));
      EXPECT_TRUE(same_bits(v, tv));
      ++checked;
    }
  EXPECT_EQ(checked, 12);
}

// --- FP32 against FP64, within the running error bounds -------------------------

// |fp32 - fp64| <= bound_fp32 + bound_fp64 element by element (both bounds
// are against the exact steps; see refs/optimizer_bound.h). The bound must
// also say something: over 30 steps it stays below 2^-16 of ||w||
// (about 30 steps of a few u = 2^-24 each, relative to weights of order 1).
void expect_within(const refs::TensorBound& a, const refs::TensorBound& b, const std::vector<double>& x64,
                   const std::vector<float>& x32, const char* what) {
  ASSERT_EQ(x64.size(), x32.size());
  int violations = 0;
  for (std::size_t i = 0; i < x32.size(); ++i)
    violations += !(std::fabs(static_cast<double>(x32[i]) - x64[i]) <= a.bound[i] + b.bound[i]);
  EXPECT_EQ(violations, 0) << what;
}

TEST(OptimizerRef, Fp32WithinBoundOfFp64OverManySteps) {
  const int steps = 30;
  const std::size_t n = 2000;
  for (const SgdParams& p : sgd_variants()) {
    const Problem pr = problem(7, n, steps);
    std::vector<float> w = pr.w0, v(n, 0.0f);
    std::vector<double> w64(pr.w0.begin(), pr.w0.end()), v64(n, 0.0);
    for (int t = 0; t < steps; ++t) {
      const auto& g = pr.grads[static_cast<std::size_t>(t)];
      refs::sgd_step_ref(p, t + 1, w, v, g);
      refs::sgd_step_fp64(p, t + 1, w64, v64, std::vector<double>(g.begin(), g.end()));
    }
    const auto b32 = refs::sgd_error_bounds(p, refs::SideRounding::fp32_reference(), pr.w0, pr.grads);
    const auto b64 = refs::sgd_error_bounds(p, refs::SideRounding::fp64_reference(), pr.w0, pr.grads);
    expect_within(b32.w, b64.w, w64, w, "sgd w");
    if (p.momentum != 0) expect_within(b32.v, b64.v, v64, v, "sgd v");
    EXPECT_LT(refs::normwise_bound(b64.w, b32.w), 0x1p-16);
    EXPECT_GT(refs::normwise_bound(b64.w, b32.w), 0.0);
  }
  for (const AdamParams& p : adam_variants()) {
    const Problem pr = problem(8, n, steps);
    std::vector<float> w = pr.w0, m(n, 0.0f), v(n, 0.0f);
    std::vector<double> w64(pr.w0.begin(), pr.w0.end()), m64(n, 0.0), v64(n, 0.0);
    for (int t = 0; t < steps; ++t) {
      const auto& g = pr.grads[static_cast<std::size_t>(t)];
      refs::adam_step_ref(p, t + 1, w, m, v, g);
      refs::adam_step_fp64(p, t + 1, w64, m64, v64, std::vector<double>(g.begin(), g.end()));
    }
    const auto b32 = refs::adam_error_bounds(p, refs::SideRounding::fp32_reference(), pr.w0, pr.grads);
    const auto b64 = refs::adam_error_bounds(p, refs::SideRounding::fp64_reference(), pr.w0, pr.grads);
    expect_within(b32.w, b64.w, w64, w, "adam w");
    expect_within(b32.m, b64.m, m64, m, "adam m");
    expect_within(b32.v, b64.v, v64, v, "adam v");
    EXPECT_LT(refs::normwise_bound(b64.w, b32.w), 0x1p-16);
  }
}

// The bound of a lost update is the update, not u_w |w|: fp16 weight 1, one
// SGD step with u = -2^-12 exactly (lr = 2^-12, g = 1). The emulator keeps 1
// (see the swamping test), 2^-12 from the exact 1 - 2^-12; its bound is that
// |u| plus the fp32 rounding of u (none: -2^-12 * 1 is exact, but the bound
// adds u32 |u| + 2^-150), far below u_fp16 |w| = 2^-11.
TEST(OptimizerBound, LostUpdateIsBoundedByTheUpdate) {
  const SgdParams p{0x1p-12, 0, 0, 0, false};
  const std::vector<float> w0{1.0f};
  const Grads grads{{1.0f}};
  const auto b = refs::sgd_error_bounds(p, refs::SideRounding::stored(kFp16, kFp32, kFp32), w0, grads);
  EXPECT_EQ(b.w.exact[0], 1.0 - 0x1p-12);
  const double u_bound = 0x1p-24 * 0x1p-12 + 0x1p-150;
  EXPECT_DOUBLE_EQ(b.w.bound[0], u_bound + std::min(0x1p-11 * (1 - 0x1p-12 + u_bound) + 0x1p-25, 0x1p-12 + u_bound));
  EXPECT_GE(b.w.bound[0], 0x1p-12);
  EXPECT_LT(b.w.bound[0], 0x1p-11);
}

// --- the emulator ---------------------------------------------------------------

TEST(OptimizerEmu, Fp32FormatsEqualTheReferenceBitForBit) {
  const emu::OptimizerPolicy fp32;  // every format fp32
  for (std::uint64_t seed : {11u, 12u}) {
    for (const SgdParams& p : sgd_variants()) {
      const Problem pr = problem(seed, 3000, 8);
      std::vector<float> w = pr.w0, v(3000, 0.0f), ew = pr.w0, ev(3000, 0.0f);
      for (int t = 0; t < 8; ++t) {
        refs::sgd_step_ref(p, t + 1, w, v, pr.grads[static_cast<std::size_t>(t)]);
        emu::sgd_step_emu(p, t + 1, ew, ev, pr.grads[static_cast<std::size_t>(t)], fp32);
      }
      EXPECT_TRUE(same_bits(w, ew)) << "sgd momentum " << p.momentum;
      EXPECT_TRUE(same_bits(v, ev)) << "sgd momentum " << p.momentum;
    }
    for (const AdamParams& p : adam_variants()) {
      const Problem pr = problem(seed, 3000, 8);
      std::vector<float> w = pr.w0, m(3000, 0.0f), v(3000, 0.0f), ew = pr.w0, em(3000, 0.0f), ev(3000, 0.0f);
      for (int t = 0; t < 8; ++t) {
        refs::adam_step_ref(p, t + 1, w, m, v, pr.grads[static_cast<std::size_t>(t)]);
        emu::adam_step_emu(p, t + 1, ew, em, ev, pr.grads[static_cast<std::size_t>(t)], fp32);
      }
      EXPECT_TRUE(same_bits(w, ew)) << "adam beta1 " << p.beta1 << " adamw " << p.adamw;
      EXPECT_TRUE(same_bits(m, em));
      EXPECT_TRUE(same_bits(v, ev));
    }
  }
}

// Narrow formats: every element of every output within bound_ref + bound_emu.
TEST(OptimizerEmu, NarrowFormatsWithinTheRunningErrorBounds) {
  const std::size_t n = 3000;
  const int steps = 12;
  struct Case {
    formats::Format weights, state, grad;
  };
  const Case cases[] = {{kFp16, kFp32, kFp16}, {kBf16, kFp32, kFp32}, {kFp32, kBf16, kFp16}, {kFp16, kFp16, kFp16}};
  int checked = 0;
  for (const Case& c : cases) {
    const emu::OptimizerPolicy policy{c.weights, c.state, c.grad};
    const auto ref_rounding = refs::SideRounding::fp32_reference();
    const auto emu_rounding = refs::SideRounding::stored(c.weights, c.state, c.grad);
    for (const SgdParams& p : sgd_variants()) {
      const Problem pr = problem(21, n, steps, c.weights);
      std::vector<float> w = pr.w0, v(n, 0.0f), ew = pr.w0, ev(n, 0.0f);
      for (int t = 0; t < steps; ++t) {
        refs::sgd_step_ref(p, t + 1, w, v, pr.grads[static_cast<std::size_t>(t)]);
        emu::sgd_step_emu(p, t + 1, ew, ev, pr.grads[static_cast<std::size_t>(t)], policy);
      }
      const auto br = refs::sgd_error_bounds(p, ref_rounding, pr.w0, pr.grads);
      const auto be = refs::sgd_error_bounds(p, emu_rounding, pr.w0, pr.grads);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_LE(std::fabs(static_cast<double>(ew[i]) - w[i]), br.w.bound[i] + be.w.bound[i]) << i;
        if (p.momentum != 0) {
          ASSERT_LE(std::fabs(static_cast<double>(ev[i]) - v[i]), br.v.bound[i] + be.v.bound[i]);
        }
      }
      ++checked;
    }
    for (const AdamParams& p : adam_variants()) {
      const Problem pr = problem(22, n, steps, c.weights);
      std::vector<float> w = pr.w0, m(n, 0.0f), v(n, 0.0f), ew = pr.w0, em(n, 0.0f), ev(n, 0.0f);
      for (int t = 0; t < steps; ++t) {
        refs::adam_step_ref(p, t + 1, w, m, v, pr.grads[static_cast<std::size_t>(t)]);
        emu::adam_step_emu(p, t + 1, ew, em, ev, pr.grads[static_cast<std::size_t>(t)], policy);
      }
      const auto br = refs::adam_error_bounds(p, ref_rounding, pr.w0, pr.grads);
      const auto be = refs::adam_error_bounds(p, emu_rounding, pr.w0, pr.grads);
      for (std::size_t i = 0; i < n; ++i) {
        // An infinite bound (fp16 state: v underflows and the denominator is
        // eps) promises nothing; the emulator's w may then be anything.
        ASSERT_LE(std::fabs(static_cast<double>(ew[i]) - w[i]), br.w.bound[i] + be.w.bound[i]) << i;
        ASSERT_LE(std::fabs(static_cast<double>(em[i]) - m[i]), br.m.bound[i] + be.m.bound[i]) << i;
        ASSERT_LE(std::fabs(static_cast<double>(ev[i]) - v[i]), br.v.bound[i] + be.v.bound[i]) << i;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * 8);
}

// Swamping by hand. w = 1; one SGD step without momentum, g = +-1, lr = 2^-k,
// so u = -+2^-k exactly.
//  fp16 (p = 11): the spacing is 2^-11 below 1 and 2^-10 above.
//   u = -2^-12: 1 - 2^-12 is the midpoint of 1 - 2^-11 and 1; ties to even
//     give 1 (significand ...000, even): lost.
//   u = -2^-11: 1 - 2^-11 is a value of fp16: kept.
//   u = +2^-11: 1 + 2^-11 is the midpoint of 1 and 1 + 2^-10: 1, lost.
//   u = +2^-10: 1 + 2^-10: kept.
//  bf16 (p = 8): spacing 2^-8 below 1: u = -2^-9 is a tie, lost; -2^-8 kept.
//  fp32 master weights: 1 - 2^-12 and 1 + 2^-11 are fp32 values: nothing lost.
struct SwampCase {
  formats::Format weights;
  int log2_lr;
  float g;
  float expected_w;
  bool lost;
};

TEST(OptimizerEmu, SwampingWorkedByHand) {
  const SwampCase cases[] = {
      {kFp16, -12, 1.0f, 1.0f, true},           {kFp16, -11, 1.0f, 1.0f - 0x1p-11f, false},
      {kFp16, -11, -1.0f, 1.0f, true},          {kFp16, -10, -1.0f, 1.0f + 0x1p-10f, false},
      {kBf16, -9, 1.0f, 1.0f, true},            {kBf16, -8, 1.0f, 1.0f - 0x1p-8f, false},
      {kFp32, -12, 1.0f, 1.0f - 0x1p-12f, false}, {kFp32, -11, -1.0f, 1.0f + 0x1p-11f, false},
  };
  for (const SwampCase& c : cases) {
    const SgdParams p{std::ldexp(1.0, c.log2_lr), 0, 0, 0, false};
    std::vector<float> w{1.0f}, v;
    emu::CounterSet counters;
    emu::sgd_step_emu(p, 1, w, v, std::vector<float>{c.g}, {c.weights, kFp32, kFp32}, &counters);
    EXPECT_EQ(w[0], c.expected_w) << c.weights.name << " lr 2^" << c.log2_lr << " g " << c.g;
    const emu::Counters* update = counters.find("sgd.update");
    ASSERT_NE(update, nullptr);
    EXPECT_EQ(update->addends_nonzero, 1u);
    EXPECT_EQ(update->swamped, c.lost ? 1u : 0u) << c.weights.name << " lr 2^" << c.log2_lr << " g " << c.g;
  }
  // Adam counts at its own site: an fp16 weight of 2048 (spacing 2) cannot
  // take a step of about lr = 1e-3 (bias-corrected first step, see below).
  std::vector<float> w{2048.0f}, m{0.0f}, v{0.0f};
  emu::CounterSet counters;
  emu::adam_step_emu({}, 1, w, m, v, std::vector<float>{0.5f}, {kFp16, kFp32, kFp32}, &counters);
  EXPECT_EQ(w[0], 2048.0f);
  EXPECT_EQ(counters.find("adam.update")->swamped, 1u);
}

// Seeded weights N(0,1), gradients N(0,1e-3), lr = 1e-3, momentum 0.9, 10
// steps: v = sum 0.9^k g has standard deviation at most
// 1e-3 / sqrt(1 - 0.81) = 2.3e-3, so |u| = lr |v| < 4 * 2.3e-6 = 9.2e-6 but
// for a 6e-5 fraction. An fp16 update is lost whenever |u| < 2^-12 |w|, so
// for all |w| > 4096 * 9.2e-6 = 0.038: all but about 3% of N(0,1) weights.
// At least 90% of the updates are lost. With fp32 weights an update is lost
// only if |u| < 2^-25 |w|, i.e. |v| < 3e-5 |w|: about 3e-5 |w| / sd(v) * 0.8
// of them, 2.4% at the first step (sd(v) = 1e-3, |w| ~ 1) and less later:
// under 5%.
TEST(OptimizerEmu, Fp16PureLosesMostSmallUpdatesMasterWeightsDoNot) {
  const SgdParams p{1e-3, 0.9, 0, 0, false};
  const std::size_t n = 4096;
  for (const formats::Format& weights : {kFp16, kFp32}) {
    const Problem pr = problem(5, n, 10, weights);
    std::vector<float> w = pr.w0, v(n, 0.0f);
    emu::CounterSet counters;
    for (int t = 0; t < 10; ++t)
      emu::sgd_step_emu(p, t + 1, w, v, pr.grads[static_cast<std::size_t>(t)], {weights, kFp32, kFp16}, &counters);
    const emu::Counters& u = *counters.find("sgd.update");
    EXPECT_EQ(u.elements, n * 10);
    EXPECT_EQ(counters.find("sgd.grad")->elements, n * 10);
    const double lost = static_cast<double>(u.swamped) / static_cast<double>(u.addends_nonzero);
    if (weights == kFp16) {
      EXPECT_GT(lost, 0.9);
    } else {
      EXPECT_LT(lost, 0.05);
    }
  }
}

// --- PyTorch's semantics, by hand (values exact in binary) -----------------------

// Momentum 0.5, dampening 0.5, lr 0.25, w = 4, g = 1 then 2.
// Step 1: the buffer is a clone of g (no dampening, no decay of a zero
// buffer): v = 1, w = 4 - 0.25 = 3.75. Step 2: v = 0.5*1 + 0.5*2 = 1.5,
// w = 3.75 - 0.375 = 3.375. A zero-initialised buffer would give v = 0.5.
TEST(OptimizerSemantics, FirstStepMomentumIsTheGradient) {
  const SgdParams p{0.25, 0.5, 0.5, 0, false};
  std::vector<float> w{4.0f}, v{123.0f};  // whatever v holds before the first step is ignored
  std::vector<double> w64{4.0}, v64{-7.0};
  std::vector<float> ew{4.0f}, ev{99.0f};
  const float g[] = {1.0f, 2.0f};
  const float expected_v[] = {1.0f, 1.5f}, expected_w[] = {3.75f, 3.375f};
  for (int t = 0; t < 2; ++t) {
    const std::vector<float> gt{g[t]};
    refs::sgd_step_ref(p, t + 1, w, v, gt);
    refs::sgd_step_fp64(p, t + 1, w64, v64, std::vector<double>{g[t]});
    emu::sgd_step_emu(p, t + 1, ew, ev, gt, {});
    EXPECT_EQ(v[0], expected_v[t]) << "step " << t + 1;
    EXPECT_EQ(w[0], expected_w[t]) << "step " << t + 1;
    EXPECT_EQ(v64[0], expected_v[t]);
    EXPECT_EQ(w64[0], expected_w[t]);
    EXPECT_EQ(ev[0], expected_v[t]);
    EXPECT_EQ(ew[0], expected_w[t]);
  }
}

// Nesterov, momentum 0.5, lr 0.25, w = 4, g = 1 then 2:
// step 1: v = 1, g'' = 1 + 0.5*1 = 1.5, w = 4 - 0.375 = 3.625;
// step 2: v = 0.5*1 + 2 = 2.5, g'' = 2 + 0.5*2.5 = 3.25, w = 3.625 - 0.8125 = 2.8125.
TEST(OptimizerSemantics, NesterovLooksAhead) {
  const SgdParams p{0.25, 0.5, 0, 0, true};
  std::vector<float> w{4.0f}, v{0.0f}, ew{4.0f}, ev{0.0f};
  const float g[] = {1.0f, 2.0f};
  const float expected_v[] = {1.0f, 2.5f}, expected_w[] = {3.625f, 2.8125f};
  for (int t = 0; t < 2; ++t) {
    refs::sgd_step_ref(p, t + 1, w, v, std::vector<float>{g[t]});
    emu::sgd_step_emu(p, t + 1, ew, ev, std::vector<float>{g[t]}, {});
    EXPECT_EQ(v[0], expected_v[t]);
    EXPECT_EQ(w[0], expected_w[t]);
    EXPECT_EQ(ew[0], expected_w[t]);
  }
}

// At t = 1, m = (1-b1) g and v = (1-b2) g^2; the bias corrections divide them
// out: m / c1 = g, sqrt(v / c2) = |g|, so the step is lr g / (|g| + eps):
// |dw| = lr / (1 + eps/|g|), within eps/|g| <= 1e-5 of lr for |g| >= 1e-3,
// whatever the scale of g. The float operations add about 10 roundings, under
// 2^-20 relative. Without the corrections the step would be
// lr (1-b1)/sqrt(1-b2) = 3.16 lr.
TEST(OptimizerSemantics, AdamFirstStepMovesByLr) {
  const AdamParams p;  // lr 1e-3, betas 0.9 / 0.999, eps 1e-8
  const std::vector<float> g{1e-3f, -0.02f, 1.0f, -100.0f, 3e4f};
  std::vector<float> w(g.size(), 0.5f), m(g.size(), 0.0f), v(g.size(), 0.0f);
  std::vector<float> ew = w, em = m, ev = v;
  refs::adam_step_ref(p, 1, w, m, v, g);
  emu::adam_step_emu(p, 1, ew, em, ev, g, {});
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double dw = static_cast<double>(w[i]) - 0.5;
    EXPECT_NEAR(std::fabs(dw), p.lr, p.lr * (p.eps / std::fabs(g[i]) + 0x1p-20) + 0x1p-24 /* one ulp of w near 0.5 */)
        << "g = " << g[i];
    EXPECT_LT(dw * g[i], 0.0);  // downhill
    EXPECT_EQ(ew[i], w[i]);
  }
}

// A NaN or infinite gradient is not filtered: it reaches the state and the
// weights (SGD: -lr * inf = -inf; Adam: m and v infinite, m / denom = inf/inf
// = NaN). Other elements are unaffected. Counted as non-finite input.
TEST(OptimizerSemantics, NonFiniteGradientsPropagate) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> g{nan, inf, 1e-3f};
  const SgdParams sp{1e-3, 0.9, 0, 0, false};
  std::vector<float> w{1.0f, 1.0f, 1.0f}, v(3, 0.0f), ew = w, ev = v;
  emu::CounterSet counters;
  refs::sgd_step_ref(sp, 1, w, v, g);
  emu::sgd_step_emu(sp, 1, ew, ev, g, {kFp16, kFp32, kFp16}, &counters);
  for (const auto* x : {&w, &ew}) {
    EXPECT_TRUE(std::isnan((*x)[0]));
    EXPECT_EQ((*x)[1], -inf);
    EXPECT_TRUE(std::isfinite((*x)[2]));
  }
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(ev[1], inf);
  EXPECT_EQ(counters.find("sgd.grad")->nonfinite_in, 2u);

  std::vector<float> aw{1.0f, 1.0f, 1.0f}, am(3, 0.0f), av(3, 0.0f), eaw = aw, eam = am, eav = av;
  refs::adam_step_ref({}, 1, aw, am, av, g);
  emu::adam_step_emu({}, 1, eaw, eam, eav, g, {kFp16, kFp32, kFp32});
  for (const auto* x : {&aw, &eaw}) {
    EXPECT_TRUE(std::isnan((*x)[0]));
    EXPECT_TRUE(std::isnan((*x)[1]));
    EXPECT_TRUE(std::isfinite((*x)[2]));
  }
  EXPECT_EQ(am[1], inf);
  EXPECT_EQ(av[1], inf);
}

TEST(OptimizerErrors, SizesStepsAndHyperparametersAreChecked) {
  std::vector<float> w(4), v(4), m(4), g(4), short3(3);
  const SgdParams sp{1e-3, 0.9, 0, 0, false};
  EXPECT_THROW(refs::sgd_step_ref(sp, 1, w, short3, g), std::invalid_argument);
  EXPECT_THROW(refs::sgd_step_ref(sp, 1, w, v, short3), std::invalid_argument);
  EXPECT_THROW(refs::sgd_step_ref(sp, 0, w, v, g), std::invalid_argument);
  EXPECT_THROW(emu::sgd_step_emu(sp, 1, w, short3, g, {}), std::invalid_argument);
  EXPECT_THROW(gpu::sgd_step_gpu(sp, 1, w, v, short3), std::invalid_argument);
  EXPECT_THROW(refs::adam_step_ref({}, 1, w, m, short3, g), std::invalid_argument);
  EXPECT_THROW(refs::adam_step_ref({}, 1, w, short3, v, g), std::invalid_argument);
  EXPECT_THROW(emu::adam_step_emu({}, 1, w, m, v, short3, {}), std::invalid_argument);
  EXPECT_THROW(gpu::adam_step_gpu({}, 1, w, m, short3, g), std::invalid_argument);
  EXPECT_THROW(gpu::sgd_step_gpu(sp, 1, w, v, g, {}, short3), std::invalid_argument);  // `update` too
  EXPECT_THROW(gpu::adam_step_gpu({}, 1, w, m, v, g, {}, short3), std::invalid_argument);
  try {
    refs::sgd_step_ref(sp, 1, w, short3, g);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(" v "), std::string::npos) << e.what();  // names the span
  }
  // Without momentum there is no buffer: an empty v is accepted.
  EXPECT_NO_THROW(refs::sgd_step_ref({1e-3, 0, 0, 0, false}, 1, w, {}, g));
  // What torch.optim rejects.
  EXPECT_THROW(refs::sgd_step_ref({1e-3, 0.9, 0.1, 0, true}, 1, w, v, g), std::invalid_argument);
  EXPECT_THROW(refs::sgd_step_ref({1e-3, 0, 0, 0, true}, 1, w, v, g), std::invalid_argument);
  EXPECT_THROW(refs::sgd_step_ref({-1e-3, 0, 0, 0, false}, 1, w, v, g), std::invalid_argument);
  EXPECT_THROW(refs::adam_step_ref({1e-3, 1.0, 0.999, 1e-8, 0, false}, 1, w, m, v, g), std::invalid_argument);
  EXPECT_THROW(refs::adam_step_ref({1e-3, 0.9, 0.999, -1, 0, false}, 1, w, m, v, g), std::invalid_argument);
}

// --- GPU -------------------------------------------------------------------------

// fp32 weights: the kernels perform the emulator's float operations in the same
// order with non-contractible intrinsics, and round an fp16 gradient with RNE
// as the emulator does: bit-exact. fp16 weights: the GPU rounds w + u twice
// (fp32, then fp16), the emulator once; both lie within their running error
// bounds of the exact steps, so they differ by at most the sum, per element.
TEST(OptimizerGpu, MatchesTheEmulator) {
  if (const std::string reason = gpu::gpu_unavailable_reason(); !reason.empty()) GTEST_SKIP() << reason;
  using F = gpu::OptimizerStorageFormat;
  const std::size_t n = 5000;
  const int steps = 10;
  for (const formats::Format& weights : {kFp32, kFp16})
    for (const formats::Format& grad : {kFp32, kFp16}) {
      const emu::OptimizerPolicy policy{weights, kFp32, grad};
      const gpu::OptimizerStorage storage{weights == kFp16 ? F::fp16 : F::fp32, grad == kFp16 ? F::fp16 : F::fp32};
      const auto emu_rounding = refs::SideRounding::stored(weights, kFp32, grad);
      const auto gpu_rounding = refs::SideRounding::stored(weights, kFp32, grad, true);
      for (const SgdParams& p : sgd_variants()) {
        const Problem pr = problem(31, n, steps, weights);
        std::vector<float> ew = pr.w0, ev(n, 0.0f), gw = pr.w0, gv(n, 0.0f), eu(n), gu(n);
        for (int t = 0; t < steps; ++t) {
          emu::sgd_step_emu(p, t + 1, ew, ev, pr.grads[static_cast<std::size_t>(t)], policy, nullptr, eu);
          gpu::sgd_step_gpu(p, t + 1, gw, gv, pr.grads[static_cast<std::size_t>(t)], storage, gu);
        }
        if (weights == kFp32) {
          EXPECT_TRUE(same_bits(ew, gw)) << "sgd momentum " << p.momentum << " grad " << grad.name;
          EXPECT_TRUE(same_bits(ev, gv));
          EXPECT_TRUE(same_bits(eu, gu)) << "the last step's updates";
        } else {
          const auto be = refs::sgd_error_bounds(p, emu_rounding, pr.w0, pr.grads);
          const auto bg = refs::sgd_error_bounds(p, gpu_rounding, pr.w0, pr.grads);
          for (std::size_t i = 0; i < n; ++i)
            ASSERT_LE(std::fabs(static_cast<double>(gw[i]) - ew[i]), be.w.bound[i] + bg.w.bound[i]) << i;
          const double identical = compare::compare(ew, gw, kFp16, compare::Tolerance::ulps(1e9, "report")).bit_identical_fraction;
          std::cout << "sgd fp16 weights, momentum " << p.momentum << ": bit-identical fraction " << identical << "\n";
        }
      }
      for (const AdamParams& p : adam_variants()) {
        const Problem pr = problem(32, n, steps, weights);
        std::vector<float> ew = pr.w0, em(n, 0.0f), ev(n, 0.0f), gw = pr.w0, gm(n, 0.0f), gv(n, 0.0f), eu(n), gu(n);
        for (int t = 0; t < steps; ++t) {
          emu::adam_step_emu(p, t + 1, ew, em, ev, pr.grads[static_cast<std::size_t>(t)], policy, nullptr, eu);
          gpu::adam_step_gpu(p, t + 1, gw, gm, gv, pr.grads[static_cast<std::size_t>(t)], storage, gu);
        }
        if (weights == kFp32) {
          EXPECT_TRUE(same_bits(ew, gw)) << "adam beta1 " << p.beta1 << " grad " << grad.name;
          EXPECT_TRUE(same_bits(em, gm));
          EXPECT_TRUE(same_bits(ev, gv));
          EXPECT_TRUE(same_bits(eu, gu)) << "the last step's updates";
        } else {
          const auto be = refs::adam_error_bounds(p, emu_rounding, pr.w0, pr.grads);
          const auto bg = refs::adam_error_bounds(p, gpu_rounding, pr.w0, pr.grads);
          for (std::size_t i = 0; i < n; ++i)
            ASSERT_LE(std::fabs(static_cast<double>(gw[i]) - ew[i]), be.w.bound[i] + bg.w.bound[i]) << i;
        }
      }
    }
}

}  // namespace
