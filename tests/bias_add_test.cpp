// Bias add: the emulated side against the FP64 oracle (forward: half an ulp;
// db: gamma_D normwise), the FP64 backward against finite differences,
// hand-worked overflow, subnormal and swamping counts, size errors, and the
// GPU side against the emulator (skipped without a device).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "compare/compare.h"
#include "emu/bias_add_emu.h"
#include "emu/quantize.h"
#include "gpu/bias_add_gpu.h"
#include "gpu/device.h"
#include "refs/bias_add_ref.h"
#include "support/tensors.h"

namespace {

using namespace mpverify::test_support;

using namespace mpverify;
using ops::ChannelShape;

const formats::Format kFp16 = formats::parse_format("fp16");
const formats::Format kFp32 = formats::parse_format("fp32");

// NCHW convolution-like outputs and a Linear layer's n x c x 1 x 1.
const ChannelShape kShapes[] = {{4, 8, 5, 7}, {32, 10, 1, 1}, {3, 2, 16, 16}};

TEST(BiasAddEmu, ForwardIsTheExactSumOfTheRoundedInputsRoundedOnce) {
  // y = fl16(fl16(x) + fl16(b)): within half an fp16 ulp of the FP64 sum of
  // the rounded inputs (of its binade; the subnormal spacing below 2^-14).
  const auto tol = compare::Tolerance::ulps(0.5, "one rounding of the exact sum");
  int compared = 0;
  for (const ChannelShape& s : kShapes)
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      std::mt19937_64 rng(seed);
      const auto x = normal(s.size(), rng, 3.0), b = normal(static_cast<std::size_t>(s.c), rng, 3.0);
      const auto exact = refs::bias_add_fp64(s, widen(to_fp16(x)), widen(to_fp16(b)));
      std::vector<float> y(s.size());
      emu::bias_add_emu(s, x, b, y);
      const auto cmp = compare::compare(std::span<const double>(exact), y, kFp16, tol);
      EXPECT_TRUE(cmp.passed) << "seed " << seed << ": " << cmp.failure;
      EXPECT_GT(cmp.max_ulp, 0.0);  // the output rounding did happen
      ++compared;
    }
  EXPECT_EQ(compared, 12);
}

TEST(BiasAddEmu, DbWithinGammaDOfTheFp64Sum) {
  // On fp16 dy (so input rounding is out of the picture), each channel's
  // block sum errs by at most gamma_D(2^-24) sum|dy| (emu/block_sum.h) and
  // the output rounding by 2^-11 |db| + 2^-25: per channel, then in norm.
  for (int lanes : {1, 256})
    for (const ChannelShape& s : kShapes)
      for (std::uint64_t seed = 1; seed <= 4; ++seed) {
        std::mt19937_64 rng(seed);
        const auto dy = to_fp16(normal(s.size(), rng, 1.0));
        const auto exact = refs::bias_add_backward_fp64(s, widen(dy));
        const double g =
            compare::gamma(static_cast<std::int64_t>(emu::block_sum_depth(s.channel_elements(), lanes)), 0x1p-24);
        double err2 = 0, db2 = 0;
        for (int c = 0; c < s.c; ++c) {
          double abs_sum = 0;
          for (std::size_t i = 0; i < s.channel_elements(); ++i) abs_sum += std::fabs(dy[s.index(c, i)]);
          const double e = g * abs_sum + 0x1p-11 * (std::fabs(exact[c]) + g * abs_sum) + 0x1p-25;
          err2 += e * e;
          db2 += exact[c] * exact[c];
        }
        emu::BiasAddPolicy policy;
        policy.lanes = lanes;
        std::vector<float> db(static_cast<std::size_t>(s.c));
        emu::bias_add_backward_emu(s, dy, db, policy);
        const auto cmp = compare::compare(std::span<const double>(exact), db, kFp16,
                                          compare::Tolerance::normwise(std::sqrt(err2 / db2), "gamma_D + u_out"));
        EXPECT_TRUE(cmp.passed) << "lanes " << lanes << " seed " << seed << ": " << cmp.failure;
      }
}

TEST(BiasAddRef, EmulatorWithinItsBoundsOfTheFloatReference) {
  // On fp16-valued x and b the reference is fl32(x + b): the emulator is
  // within half an fp16 ulp of the exact sum, the reference within 2^-24
  // relative, i.e. 2^-13 fp16 ulps.
  const ChannelShape s{8, 6, 4, 4};
  std::mt19937_64 rng(11);
  const auto x = to_fp16(normal(s.size(), rng, 2.0)), b = to_fp16(normal(6, rng, 2.0));
  std::vector<float> ref(s.size()), emu_y(s.size());
  refs::bias_add_ref(s, x, b, ref);
  emu::bias_add_emu(s, x, b, emu_y);
  const auto cmp = compare::compare(ref, emu_y, kFp16, compare::Tolerance::ulps(0.5 + 0x1p-13, "see above"));
  EXPECT_TRUE(cmp.passed) << cmp.failure;
}

TEST(BiasAddRef, BackwardMatchesFiniteDifferences) {
  // L(x, b) = sum y g is linear in b and x, so central differences have no
  // truncation error; with h = 2^-10 the perturbed inputs are exact and L is
  // evaluated to within gamma_N(2^-53) sum|y g| <= 2^-40 here, which over 2h
  // is below 2^-30: 1e-8 is above it.
  const ChannelShape s{3, 4, 2, 5};
  std::mt19937_64 rng(5);
  const auto x = widen(normal(s.size(), rng, 1.0)), b = widen(normal(4, rng, 1.0)), g = widen(normal(s.size(), rng, 1.0));
  auto loss = [&](const std::vector<double>& xs, const std::vector<double>& bs) {
    const auto y = refs::bias_add_fp64(s, xs, bs);
    double l = 0;
    for (std::size_t i = 0; i < y.size(); ++i) l += y[i] * g[i];
    return l;
  };
  const double h = 0x1p-10;
  const auto db = refs::bias_add_backward_fp64(s, g);
  for (int c = 0; c < s.c; ++c) {
    auto up = b, down = b;
    up[c] += h;
    down[c] -= h;
    EXPECT_NEAR((loss(x, up) - loss(x, down)) / (2 * h), db[c], 1e-8) << "db[" << c << "]";
  }
  // dx = dy: the identity the backward leaves out.
  for (std::size_t i = 0; i < x.size(); i += 7) {
    auto up = x, down = x;
    up[i] += h;
    down[i] -= h;
    EXPECT_NEAR((loss(up, b) - loss(down, b)) / (2 * h), g[i], 1e-8) << "dx[" << i << "]";
  }
}

TEST(BiasAddEmu, OverflowSwampingAndSubnormalsCountedByHand) {
  // Channel 0: 65504 + 16 = 65520, the midpoint between 65504 and 2^16;
  // ties-to-even picks 2^16, beyond fp16: infinity (overflow).
  // Channel 1: 65504 + 15 = 65519 rounds back to 65504: inexact, and the
  // bias is lost entirely (swamped: y == x with b != 0).
  // Channel 2: 2^-14 - 2^-24 = 1023 * 2^-24, exactly a subnormal.
  const ChannelShape s{1, 3, 1, 1};
  const std::vector<float> x = {65504.0f, 65504.0f, 0x1p-14f}, b = {16.0f, 15.0f, -0x1p-24f};
  std::vector<float> y(3);
  emu::CounterSet counters;
  emu::bias_add_emu(s, x, b, y, {}, &counters);
  EXPECT_TRUE(std::isinf(y[0]) && y[0] > 0);
  EXPECT_EQ(y[1], 65504.0f);
  EXPECT_EQ(y[2], 1023 * 0x1p-24f);
  const emu::Counters& c = *counters.find("bias_add.y");
  EXPECT_EQ(c.elements, 3u);
  EXPECT_EQ(c.overflow, 1u);
  EXPECT_EQ(c.inexact, 2u);
  EXPECT_EQ(c.swamped, 1u);
  EXPECT_EQ(c.subnormal, 1u);
  EXPECT_EQ(counters.find("bias_add.x")->inexact, 0u);  // all three are fp16 values
}

TEST(BiasAddEmu, DbSwampingInFp16CountedByHand) {
  // dy = 2048, 1, 1, 1 in one channel; fp16 spacing at 2048 is 2, so
  // 2048 + 1 is a tie that rounds to even, 2048: the 1 is lost.
  const ChannelShape s{4, 1, 1, 1};
  const std::vector<float> dy = {2048.0f, 1.0f, 1.0f, 1.0f};
  std::vector<float> db(1);
  emu::BiasAddPolicy policy;
  policy.accumulation = kFp16;
  {  // A plain running sum: 0+2048, +1, +1, +1: three lost updates.
    policy.lanes = 1;
    emu::CounterSet counters;
    emu::bias_add_backward_emu(s, dy, db, policy, &counters);
    EXPECT_EQ(db[0], 2048.0f);
    const emu::Counters& c = *counters.find("bias_add_backward.accumulate");
    EXPECT_EQ(c.elements, 4u);
    EXPECT_EQ(c.addends_nonzero, 4u);
    EXPECT_EQ(c.swamped, 3u);
  }
  {  // 256 lanes: lanes 0..3 hold 2048, 1, 1, 1; the tree adds zeros down to
     // stride 2 (s[0] = 2048 + 1: lost; s[1] = 1 + 1 = 2), then 2048 + 2 = 2050
     // exactly. Additions: 4 + 255; non-zero addends: 4 + 3; one lost.
    policy.lanes = 256;
    emu::CounterSet counters;
    emu::bias_add_backward_emu(s, dy, db, policy, &counters);
    EXPECT_EQ(db[0], 2050.0f);
    const emu::Counters& c = *counters.find("bias_add_backward.accumulate");
    EXPECT_EQ(c.elements, 259u);
    EXPECT_EQ(c.addends_nonzero, 7u);
    EXPECT_EQ(c.swamped, 1u);
  }
  {  // fp32 sums lose nothing: 2051, which fp16 output rounds to 2052 (tie, even).
    policy.accumulation = kFp32;
    emu::CounterSet counters;
    emu::bias_add_backward_emu(s, dy, db, policy, &counters);
    EXPECT_EQ(db[0], 2052.0f);
    EXPECT_EQ(counters.find("bias_add_backward.accumulate")->swamped, 0u);
    EXPECT_EQ(counters.find("bias_add_backward.db")->inexact, 1u);
  }
}

TEST(BiasAdd, MismatchedSizesAreRejectedByName) {
  const ChannelShape s{2, 3, 2, 2};
  std::vector<float> x(s.size()), y(s.size()), b(3), short_b(2), db(4);
  EXPECT_THROW(refs::bias_add_ref(s, x, short_b, y), std::invalid_argument);
  EXPECT_THROW(emu::bias_add_emu(s, x, short_b, y), std::invalid_argument);
  EXPECT_THROW(emu::bias_add_emu(s, x, b, std::span<float>(y).first(5)), std::invalid_argument);
  try {
    emu::bias_add_backward_emu(s, x, db);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("db has 4 elements, expected 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(refs::bias_add_backward_ref(s, std::span<const float>(x).first(7), b), std::invalid_argument);
  EXPECT_THROW(emu::bias_add_emu(ChannelShape{0, 3, 2, 2}, {}, b, {}), std::invalid_argument);
}

// __hadd rounds the exact sum of the same fp16 values once (bit-exact); the
// GPU's db adds the same fp16 terms in fp32 in the block order the emulator
// models, each addition rounded to nearest, then one fp16 rounding.
TEST(BiasAddGpu, BitExactWithTheEmulator) {
  if (const std::string reason = gpu::gpu_unavailable_reason(); !reason.empty()) GTEST_SKIP() << reason;
  for (const ChannelShape& s : {ChannelShape{16, 24, 9, 9}, ChannelShape{64, 100, 1, 1}}) {
    std::mt19937_64 rng(7);
    const auto x = normal(s.size(), rng, 4.0), b = normal(static_cast<std::size_t>(s.c), rng, 4.0);
    std::vector<float> emu_y(s.size()), gpu_y(s.size()), emu_db(static_cast<std::size_t>(s.c)), gpu_db(emu_db.size());
    emu::bias_add_emu(s, x, b, emu_y);
    gpu::bias_add_gpu(s, x, b, gpu_y);
    emu::bias_add_backward_emu(s, x, emu_db);
    gpu::bias_add_backward_gpu(s, x, gpu_db);
    const auto tol = compare::Tolerance::bit_exact("same roundings in the same order");
    const auto fwd = compare::compare(emu_y, gpu_y, kFp16, tol), bwd = compare::compare(emu_db, gpu_db, kFp16, tol);
    EXPECT_TRUE(fwd.passed) << fwd.failure;
    EXPECT_TRUE(bwd.passed) << bwd.failure;
  }
}

}  // namespace
