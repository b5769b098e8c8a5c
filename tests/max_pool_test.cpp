// Max pooling: the emulated forward against the rounded reference
// (bit-exact: rounding commutes with max), the backward against the FP64
// oracle (gamma_K normwise) and finite differences, crafted ties, NaN,
// overlapping windows and values near 65504, size errors, and the GPU side
// against the emulator (skipped without a device).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "compare/compare.h"
#include "emu/max_pool_emu.h"
#include "emu/quantize.h"
#include "gpu/device.h"
#include "gpu/max_pool_gpu.h"
#include "ops/max_pool_argmax.h"
#include "refs/max_pool_ref.h"
#include "support/tensors.h"

namespace {

using namespace mpverify::test_support;

using namespace mpverify;
using ops::PoolShape;

const formats::Format kFp16 = formats::parse_format("fp16");

// Non-overlapping, overlapping (stride < window), padded, rectangular windows.
const PoolShape kShapes[] = {
    {2, 3, 8, 8, 2, 2, 2, 0},
    {2, 3, 9, 9, 3, 3, 2, 1},
    {1, 4, 7, 10, 3, 2, 1, 1},
    {3, 2, 6, 5, 2, 3, 3, 1},
};

TEST(MaxPoolEmu, ForwardEqualsTheReferenceRoundedOnce) {
  // fl16 is monotonic, so max(fl16(x)) = fl16(max(x)): the emulator's output
  // is the reference's rounded to fp16, bit for bit (on float inputs that
  // are not fp16 values, so the rounding is real).
  int compared = 0;
  for (const PoolShape& p : kShapes)
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      std::mt19937_64 rng(seed);
      const auto x = normal(p.x_size(), rng, 5.0);
      std::vector<float> ref(p.y_size()), y(p.y_size());
      refs::max_pool_ref(p, x, ref);
      emu::max_pool_emu(p, x, y);
      const auto cmp = compare::compare(to_fp16(ref), y, kFp16, compare::Tolerance::bit_exact("monotonic rounding"));
      EXPECT_TRUE(cmp.passed) << "seed " << seed << ": " << cmp.failure;
      ++compared;
    }
  EXPECT_EQ(compared, 16);
}

TEST(MaxPoolEmu, BackwardWithinGammaKOfTheFp64Oracle) {
  // On fp16 x and dy (same winners everywhere), each dx sums at most K =
  // ceil(r/stride) ceil(s/stride) dy in fp32: gamma_K(2^-24) sum|dy|, then
  // 2^-11 |dx| + 2^-25 for the fp16 output; per element, then in norm.
  for (const PoolShape& p : kShapes)
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      std::mt19937_64 rng(seed);
      const auto x = to_fp16(normal(p.x_size(), rng, 1.0)), dy = to_fp16(normal(p.y_size(), rng, 1.0));
      const auto exact = refs::max_pool_backward_fp64(p, widen(x), widen(dy));
      std::vector<double> abs_sum(p.x_size(), 0.0);
      const auto win = ops::max_pool_argmax(p, x);
      for (std::size_t o = 0; o < win.size(); ++o) abs_sum[win[o]] += std::fabs(dy[o]);
      const double g = compare::gamma(p.max_windows_per_element(), 0x1p-24);
      double err2 = 0, dx2 = 0;
      for (std::size_t i = 0; i < exact.size(); ++i) {
        const double e = g * abs_sum[i] + 0x1p-11 * (std::fabs(exact[i]) + g * abs_sum[i]) + 0x1p-25;
        err2 += e * e;
        dx2 += exact[i] * exact[i];
      }
      std::vector<float> dx(p.x_size());
      emu::max_pool_backward_emu(p, x, dy, dx);
      const auto cmp = compare::compare(std::span<const double>(exact), dx, kFp16,
                                        compare::Tolerance::normwise(std::sqrt(err2 / dx2), "gamma_K + u_out"));
      EXPECT_TRUE(cmp.passed) << "seed " << seed << ": " << cmp.failure;
    }
}

TEST(MaxPoolRef, BackwardMatchesFiniteDifferences) {
  // Distinct inputs k/64 (a shuffled range): no winner changes within
  // h = 2^-20 of them, so L = sum y g is linear there and central differences
  // carry no truncation error; x +- h is exact, L is evaluated within
  // gamma_N(2^-53) sum|y g| < 2^-40, over 2h below 2^-20: 1e-6 is above it.
  for (const PoolShape& p : kShapes) {
    std::vector<double> x(p.x_size());
    std::iota(x.begin(), x.end(), -static_cast<double>(x.size() / 2));
    std::mt19937_64 rng(3);
    std::shuffle(x.begin(), x.end(), rng);
    for (double& v : x) v /= 64;
    const auto g = widen(normal(p.y_size(), rng, 1.0));
    auto loss = [&](const std::vector<double>& xs) {
      const auto y = refs::max_pool_fp64(p, xs);
      double l = 0;
      for (std::size_t o = 0; o < y.size(); ++o) l += y[o] * g[o];
      return l;
    };
    const auto dx = refs::max_pool_backward_fp64(p, x, g);
    const double h = 0x1p-20;
    for (std::size_t i = 0; i < x.size(); ++i) {
      auto up = x, down = x;
      up[i] += h;
      down[i] -= h;
      EXPECT_NEAR((loss(up) - loss(down)) / (2 * h), dx[i], 1e-6) << "dx[" << i << "]";
    }
  }
}

TEST(MaxPool, TiesGoToTheFirstIndexAndNaNPropagates) {
  // One 2x2 window over a 2x2 input per case. All equal: the first (row-major)
  // element wins and gets dy. -0 then +0 compare equal: -0 is first, y = -0.
  // 1, NaN, 3, NaN: the first NaN wins (a NaN beats every number, ties keep
  // the first): y is NaN and dy goes to index 1. 2, 5, 5, 1: the first 5.
  const PoolShape p{1, 1, 2, 2, 2, 2, 1, 0};
  struct Case {
    std::vector<float> x;
    std::size_t winner;
  };
  const Case cases[] = {{{7, 7, 7, 7}, 0}, {{-0.0f, 0.0f, 0.0f, -0.0f}, 0}, {{1, NAN, 3, NAN}, 1}, {{2, 5, 5, 1}, 1}};
  for (const Case& c : cases) {
    const std::vector<float> dy = {3.0f};
    std::vector<float> ref_y(1), emu_y(1), ref_dx(4), emu_dx(4);
    refs::max_pool_ref(p, c.x, ref_y);
    emu::max_pool_emu(p, c.x, emu_y);
    refs::max_pool_backward_ref(p, c.x, dy, ref_dx);
    emu::max_pool_backward_emu(p, c.x, dy, emu_dx);
    const float want = c.x[c.winner];
    for (float y : {ref_y[0], emu_y[0]}) {
      if (std::isnan(want)) EXPECT_TRUE(std::isnan(y));
      else EXPECT_EQ(std::bit_cast<std::uint32_t>(y), std::bit_cast<std::uint32_t>(want));
    }
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(ref_dx[i], i == c.winner ? 3.0f : 0.0f) << "ref, element " << i;
      EXPECT_EQ(emu_dx[i], i == c.winner ? 3.0f : 0.0f) << "emu, element " << i;
    }
  }
  // Rounding can create a tie: 1 + 2^-12 rounds down to 1 in fp16 (spacing
  // 2^-10), and 1 + 2^-11, the midpoint, to even: 1. So the emulator's winner
  // is the first 1, while the float reference picks the third element.
  const std::vector<float> close = {1.0f, 1.0f + 0x1p-12f, 1.0f + 0x1p-11f, 0.0f};
  std::vector<float> dx(4);
  emu::max_pool_backward_emu(p, close, std::vector<float>{1.0f}, dx);
  EXPECT_EQ(dx[0], 1.0f);
  refs::max_pool_backward_ref(p, close, std::vector<float>{1.0f}, dx);
  EXPECT_EQ(dx[2], 1.0f);
}

TEST(MaxPool, OverlappingWindowsSumAtTheirCommonWinner) {
  // 3x3 input, 2x2 windows, stride 1: four windows, all contain the centre,
  // which is the maximum: dx[centre] = 1 + 2 + 3 + 4, every other dx is 0.
  const PoolShape p{1, 1, 3, 3, 2, 2, 1, 0};
  const std::vector<float> x = {0, 1, 0, 2, 9, 3, 0, 4, 0}, dy = {1, 2, 3, 4};
  std::vector<float> dx(9);
  emu::CounterSet counters;
  emu::max_pool_backward_emu(p, x, dy, dx, {}, &counters);
  for (std::size_t i = 0; i < 9; ++i) EXPECT_EQ(dx[i], i == 4 ? 10.0f : 0.0f) << i;
  EXPECT_EQ(counters.find("max_pool_backward.accumulate")->elements, 4u);  // one per window
  EXPECT_EQ(p.max_windows_per_element(), 4);
}

TEST(MaxPool, ValuesNear65504) {
  // Forward: 65519 rounds to 65504 (below the midpoint 65520), 65520 to
  // infinity (a tie, to even): one input overflow, and windows pick them.
  const PoolShape p{1, 1, 1, 4, 1, 2, 2, 0};  // windows {0,1} and {2,3}
  const std::vector<float> x = {65519.0f, -1.0f, 3.0f, 65520.0f};
  std::vector<float> y(2);
  emu::CounterSet counters;
  emu::max_pool_emu(p, x, y, {}, &counters);
  EXPECT_EQ(y[0], 65504.0f);
  EXPECT_TRUE(std::isinf(y[1]));
  EXPECT_EQ(counters.find("max_pool.x")->overflow, 1u);
  EXPECT_EQ(counters.find("max_pool.y")->overflow, 0u);  // the selected value is already fp16

  // Backward: 1x3 input, 1x2 windows, stride 1: the middle 65504 wins both;
  // 40000 + 40000 = 80000 is exact in fp32 and overflows at the fp16 output;
  // with fp16 accumulation the second addition overflows instead.
  const PoolShape q{1, 1, 1, 3, 1, 2, 1, 0};
  const std::vector<float> xq = {1.0f, 65504.0f, 2.0f}, dy = {40000.0f, 40000.0f};
  std::vector<float> dx(3);
  emu::CounterSet c32;
  emu::max_pool_backward_emu(q, xq, dy, dx, {}, &c32);
  EXPECT_TRUE(std::isinf(dx[1]));
  EXPECT_EQ(c32.find("max_pool_backward.dx")->overflow, 1u);
  EXPECT_EQ(c32.find("max_pool_backward.accumulate")->overflow, 0u);
  emu::MaxPoolPolicy fp16_sums;
  fp16_sums.accumulation = kFp16;
  emu::CounterSet c16;
  emu::max_pool_backward_emu(q, xq, dy, dx, fp16_sums, &c16);
  EXPECT_TRUE(std::isinf(dx[1]));
  EXPECT_EQ(c16.find("max_pool_backward.accumulate")->overflow, 1u);
  EXPECT_EQ(c16.find("max_pool_backward.dx")->overflow, 0u);  // infinity is exact
}

TEST(MaxPool, MismatchedSizesAndBadWindowsAreRejected) {
  const PoolShape p{1, 2, 4, 4, 2, 2, 2, 0};
  std::vector<float> x(p.x_size()), y(p.y_size()), dx(p.x_size());
  EXPECT_THROW(refs::max_pool_ref(p, std::span<const float>(x).first(31), y), std::invalid_argument);
  EXPECT_THROW(emu::max_pool_emu(p, x, std::span<float>(y).first(3)), std::invalid_argument);
  EXPECT_THROW(emu::max_pool_backward_emu(p, x, std::span<const float>(y).first(3), dx), std::invalid_argument);
  PoolShape padded = p;
  padded.pad = 2;  // a window of only padding
  EXPECT_THROW(refs::max_pool_ref(padded, x, y), std::invalid_argument);
  PoolShape big = p;
  big.r = 5;  // larger than the input
  EXPECT_THROW(emu::max_pool_emu(big, x, y), std::invalid_argument);
}

// The GPU selects the same fp16 value (bit-exact forward) and sums the same
// fp16 dy in fp32 in the same window order, rounded once (bit-exact backward).
TEST(MaxPoolGpu, BitExactWithTheEmulator) {
  if (const std::string reason = gpu::gpu_unavailable_reason(); !reason.empty()) GTEST_SKIP() << reason;
  const auto tol = compare::Tolerance::bit_exact("same selection, same roundings in the same order");
  for (const PoolShape& p : kShapes) {
    std::mt19937_64 rng(9);
    const auto x = normal(p.x_size(), rng, 3.0), dy = normal(p.y_size(), rng, 3.0);
    std::vector<float> emu_y(p.y_size()), gpu_y(p.y_size()), emu_dx(p.x_size()), gpu_dx(p.x_size());
    emu::max_pool_emu(p, x, emu_y);
    gpu::max_pool_gpu(p, x, gpu_y);
    emu::max_pool_backward_emu(p, x, dy, emu_dx);
    gpu::max_pool_backward_gpu(p, x, dy, gpu_dx);
    const auto fwd = compare::compare(emu_y, gpu_y, kFp16, tol), bwd = compare::compare(emu_dx, gpu_dx, kFp16, tol);
    EXPECT_TRUE(fwd.passed) << fwd.failure;
    EXPECT_TRUE(bwd.passed) << bwd.failure;
  }
  // NaN: the first NaN of the window wins on both sides.
  const PoolShape p{1, 1, 2, 2, 2, 2, 1, 0};
  const std::vector<float> x = {1, NAN, 3, NAN}, dy = {2};
  std::vector<float> y(1), dx(4);
  gpu::max_pool_gpu(p, x, y);
  gpu::max_pool_backward_gpu(p, x, dy, dx);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(dx, (std::vector<float>{0, 2, 0, 0}));
}

}  // namespace
