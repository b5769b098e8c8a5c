// Batch normalisation (training mode): the emulated side against the
// reference within the bounds of emu/batch_norm_bounds.h (several seeds,
// shapes, block orders and statistics formats), the FP64 backward against
// finite differences, hand-worked statistics, running averages and counts,
// the constant channel, a large mean over a small spread (where a one-pass
// variance cancels), size errors, and the GPU side against the emulator
// (skipped without a device).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "compare/compare.h"
#include "emu/batch_norm_bounds.h"
#include "emu/batch_norm_emu.h"
#include "emu/quantize.h"
#include "gpu/batch_norm_gpu.h"
#include "gpu/device.h"
#include "refs/batch_norm_ref.h"
#include "support/tensors.h"

namespace {

using namespace mpverify::test_support;

using namespace mpverify;
using ops::BatchNormParams;
using ops::ChannelShape;

const formats::Format kFp16 = formats::parse_format("fp16");

// fp16 activations with a per-channel offset and spread.
std::vector<float> activations(const ChannelShape& s, std::mt19937_64& rng) {
  const auto offset = normal(static_cast<std::size_t>(s.c), rng, 3.0), spread = normal(static_cast<std::size_t>(s.c), rng, 0.5);
  auto x = normal(s.size(), rng, 1.0);
  for (int c = 0; c < s.c; ++c)
    for (std::size_t i = 0; i < s.channel_elements(); ++i)
      x[s.index(c, i)] = offset[c] + std::exp(spread[c]) * x[s.index(c, i)];
  return in_format(std::move(x), kFp16);
}

struct Params {
  std::vector<float> gamma, beta;
};
Params parameters(int c, std::mt19937_64& rng) {
  Params p{normal(static_cast<std::size_t>(c), rng, 0.2), normal(static_cast<std::size_t>(c), rng, 0.2)};
  for (float& g : p.gamma) g += 1.0f;
  return p;
}

const ChannelShape kShapes[] = {{8, 4, 7, 7}, {64, 6, 1, 1}, {2, 3, 20, 30}};

// Statistics formats and block orders. bf16 with a plain running sum has no
// a priori bound past 512 terms (gamma_M needs M u < 1), so only with 256 lanes.
struct StatsPolicy {
  const char* statistics;
  int lanes;
};
const StatsPolicy kPolicies[] = {{"fp32", 1}, {"fp32", 256}, {"bf16", 256}};

emu::BatchNormPolicy policy_with(const char* statistics, int lanes) {
  emu::BatchNormPolicy p;
  p.statistics = formats::parse_format(statistics);
  p.lanes = lanes;
  return p;
}

void expect_within(std::span<const float> ref, std::span<const float> emu_out, const formats::Format& f, double bound,
                   const std::string& what) {
  EXPECT_TRUE(std::isfinite(bound)) << what;  // an infinite bound could not fail
  const auto cmp = compare::compare(ref, emu_out, f, compare::Tolerance::normwise(bound, "emu/batch_norm_bounds.h"));
  EXPECT_TRUE(cmp.passed) << what << ": " << cmp.failure;
}

TEST(BatchNormEmu, ForwardWithinItsBoundsOfTheReference) {
  // bf16 statistics (u = 2^-9) make the statistics' share of the bound the
  // larger one, so the bound is tested where it is not swamped by fp16 output.
  int compared = 0;
  for (const auto& [stats, lanes] : kPolicies)
      for (const ChannelShape& s : kShapes)
        for (std::uint64_t seed = 1; seed <= 3; ++seed) {
          std::mt19937_64 rng(seed);
          const auto x = activations(s, rng);
          const auto [gamma, beta] = parameters(s.c, rng);
          const auto c = static_cast<std::size_t>(s.c);
          const emu::BatchNormPolicy policy = policy_with(stats, lanes);
          std::vector<float> ry(s.size()), rmean(c), rinv(c), rrm(c, 0.0f), rrv(c, 1.0f);
          std::vector<float> ey(s.size()), emean(c), einv(c), erm(c, 0.0f), erv(c, 1.0f);
          refs::batch_norm_ref(s, {}, x, gamma, beta, ry, rmean, rinv, rrm, rrv);
          emu::batch_norm_emu(s, {}, x, gamma, beta, ey, emean, einv, erm, erv, policy);
          const auto b = emu::batch_norm_forward_bounds(s, {}, x, gamma, beta, policy);
          const std::string what = std::string(stats) + " lanes " + std::to_string(lanes) + " seed " + std::to_string(seed);
          expect_within(ry, ey, kFp16, b.y, what + " y");
          expect_within(rmean, emean, policy.statistics, b.mean, what + " mean");
          expect_within(rinv, einv, policy.statistics, b.invstd, what + " invstd");
          ++compared;
        }
  EXPECT_EQ(compared, 3 * 3 * 3);
}

TEST(BatchNormEmu, BackwardWithinItsBoundsOfTheReference) {
  for (const auto& [stats, lanes] : kPolicies)
      for (const ChannelShape& s : kShapes)
        for (std::uint64_t seed = 1; seed <= 3; ++seed) {
          std::mt19937_64 rng(seed + 100);
          const auto x = activations(s, rng);
          const auto [gamma, beta] = parameters(s.c, rng);
          const auto dy = in_format(normal(s.size(), rng, 1.0), kFp16);
          const auto c = static_cast<std::size_t>(s.c);
          const emu::BatchNormPolicy policy = policy_with(stats, lanes);
          // Saved statistics: the reference forward's, as values of S.
          std::vector<float> y(s.size()), mean(c), inv(c), rm(c), rv(c);
          refs::batch_norm_ref(s, {}, x, gamma, beta, y, mean, inv, rm, rv);
          mean = in_format(mean, policy.statistics);
          inv = in_format(inv, policy.statistics);
          std::vector<float> rdx(s.size()), rdg(c), rdb(c), edx(s.size()), edg(c), edb(c);
          refs::batch_norm_backward_ref(s, x, dy, gamma, mean, inv, rdx, rdg, rdb);
          emu::batch_norm_backward_emu(s, x, dy, gamma, mean, inv, edx, edg, edb, policy);
          const auto b = emu::batch_norm_backward_bounds(s, x, dy, gamma, mean, inv, policy);
          const std::string what = std::string(stats) + " lanes " + std::to_string(lanes) + " seed " + std::to_string(seed);
          expect_within(rdx, edx, kFp16, b.dx, what + " dx");
          expect_within(rdg, edg, policy.parameters, b.dgamma, what + " dgamma");
          expect_within(rdb, edb, policy.parameters, b.dbeta, what + " dbeta");
        }
}

TEST(BatchNormRef, BackwardMatchesFiniteDifferences) {
  // L = sum y g through the FP64 forward (statistics recomputed from the
  // perturbed x, so the mean and variance paths are included). Central
  // differences with h = 2^-18 err by h^2/6 |L'''|: with invstd <= 2
  // (checked) and |xhat| <= 4, |g|, |gamma| <= 3, M = 12, each third
  // derivative is below 10^4, so the truncation is below 2^-36/6 * 10^4 < 3e-8;
  // rounding: 2^-53 * 12 * 6 * |L| <= 2^-53 * 72 * 500 over 2h: below 1e-9. 1e-7 holds both.
  const ChannelShape s{2, 3, 2, 3};
  std::mt19937_64 rng(21);
  const auto x = widen(normal(s.size(), rng, 1.0)), gamma = widen(normal(3, rng, 0.3));
  const auto beta = widen(normal(3, rng, 1.0)), g = widen(normal(s.size(), rng, 1.0));
  std::vector<double> gm = gamma;
  for (double& v : gm) v += 1;
  const std::vector<double> zeros(3, 0.0), ones(3, 1.0);
  auto loss = [&](const std::vector<double>& xs, const std::vector<double>& gs, const std::vector<double>& bs) {
    const auto f = refs::batch_norm_fp64(s, {}, xs, gs, bs, zeros, ones);
    double l = 0;
    for (std::size_t i = 0; i < f.y.size(); ++i) l += f.y[i] * g[i];
    return l;
  };
  const auto fwd = refs::batch_norm_fp64(s, {}, x, gm, beta, zeros, ones);
  for (double inv : fwd.invstd) ASSERT_LE(inv, 2.0);  // the truncation bound's assumption
  const auto bwd = refs::batch_norm_backward_fp64(s, x, g, gm, fwd.mean, fwd.invstd);
  const double h = 0x1p-18, tol = 1e-7;
  auto central = [&](auto perturb) {
    auto [xu, gu, bu] = perturb(h);
    auto [xd, gd, bd] = perturb(-h);
    return (loss(xu, gu, bu) - loss(xd, gd, bd)) / (2 * h);
  };
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double fd = central([&](double d) {
      auto xs = x;
      xs[i] += d;
      return std::tuple{xs, gm, beta};
    });
    EXPECT_NEAR(fd, bwd.dx[i], tol) << "dx[" << i << "]";
  }
  for (std::size_t c = 0; c < 3; ++c) {
    const double fdg = central([&](double d) {
      auto gs = gm;
      gs[c] += d;
      return std::tuple{x, gs, beta};
    });
    const double fdb = central([&](double d) {
      auto bs = beta;
      bs[c] += d;
      return std::tuple{x, gm, bs};
    });
    EXPECT_NEAR(fdg, bwd.dgamma[c], tol) << "dgamma[" << c << "]";
    EXPECT_NEAR(fdb, bwd.dbeta[c], tol) << "dbeta[" << c << "]";
  }
}

TEST(BatchNormEmu, ExactStatisticsRunningAveragesAndCountsByHand) {
  // One channel holding 1..8: sum 36, mean 4.5, squared deviations summing
  // to 42, var 5.25 and unbiased var 6, all exact in fp32. invstd takes the
  // three fp32 roundings the model states: fl(1 / fl(sqrt(fl(5.25 + fl(1e-5))))),
  // which float arithmetic (IEEE, correctly rounded sqrt) gives directly.
  // Running averages from (0, 1): 0.1 * 4.5 = 0.45 and 0.9 + 0.1 * 6 = 1.5.
  const ChannelShape s{2, 1, 2, 2};
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8}, gamma = {1}, beta = {0};
  std::vector<float> y(8), mean(1), inv(1), rm = {0}, rv = {1};
  emu::CounterSet counters;
  emu::batch_norm_emu(s, {}, x, gamma, beta, y, mean, inv, rm, rv, {}, &counters);
  EXPECT_EQ(mean[0], 4.5f);
  const float want_inv = 1.0f / std::sqrt(5.25f + 1e-5f);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(inv[0]), std::bit_cast<std::uint32_t>(want_inv));
  EXPECT_EQ(rm[0], 0.45f);
  EXPECT_EQ(rv[0], 1.5f);  // the biased 5.25 would give 1.425
  // 8 lane additions + 255 tree additions + 1 division, all exact.
  EXPECT_EQ(counters.find("batch_norm.mean")->elements, 264u);
  EXPECT_EQ(counters.find("batch_norm.mean")->inexact, 0u);
  EXPECT_EQ(counters.find("batch_norm.var")->elements, 264u);
  EXPECT_EQ(counters.find("batch_norm.var")->inexact, 0u);
  EXPECT_EQ(counters.find("batch_norm.centered")->inexact, 0u);
  // var + eps, sqrt and 1/sqrt are inexact (1/x is exact only for powers of two).
  EXPECT_EQ(counters.find("batch_norm.invstd")->elements, 3u);
  EXPECT_EQ(counters.find("batch_norm.invstd")->inexact, 3u);
  EXPECT_EQ(counters.find("batch_norm.y")->elements, 8u);
  // The reference agrees on the exact statistics and the running averages.
  std::vector<float> ry(8), rmean(1), rinv(1), rrm = {0}, rrv = {1};
  refs::batch_norm_ref(s, {}, x, gamma, beta, ry, rmean, rinv, rrm, rrv);
  EXPECT_EQ(rmean[0], 4.5f);
  EXPECT_EQ(rrm[0], 0.45f);
  EXPECT_EQ(rrv[0], 1.5f);
}

TEST(BatchNormEmu, ConstantChannelHasInvstdOneOverSqrtEps) {
  // var = 0: invstd = fl(1 / fl(sqrt(fl(1e-5)))), xhat = 0, y = beta exactly.
  // Backward: xhat = 0 gives dgamma = 0 and dbeta = sum dy (small integers: exact).
  const ChannelShape s{4, 1, 3, 3};
  const std::vector<float> x(36, 3.25f), gamma = {2.0f}, beta = {0.375f};
  std::vector<float> y(36), mean(1), inv(1), rm = {0}, rv = {1};
  emu::batch_norm_emu(s, {}, x, gamma, beta, y, mean, inv, rm, rv);
  EXPECT_EQ(mean[0], 3.25f);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(inv[0]), std::bit_cast<std::uint32_t>(1.0f / std::sqrt(1e-5f)));
  for (float v : y) EXPECT_EQ(v, 0.375f);
  std::vector<float> dy(36), dx(36), dgamma(1), dbeta(1);
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
  emu::batch_norm_backward_emu(s, x, dy, gamma, mean, inv, dx, dgamma, dbeta);
  EXPECT_EQ(dgamma[0], 0.0f);
  EXPECT_EQ(dbeta[0], -2.0f);  // seven cycles of -2..2 sum to 0; the 36th element is -2
}

TEST(BatchNormEmu, LargeMeanSmallSpreadTwoPassKeepsTheVariance) {
  // fp16 activations 1000 + k/2, k in -3..3 (exact in fp16: spacing 0.5 at
  // [512, 1024)), M = 4096: var about 1, mean^2 about 10^6. The two-pass
  // model keeps invstd within its bound (which is about 10^-6 here); a
  // one-pass E[x^2] - mean^2 in fp32, with the same block sums, loses the
  // variance in the rounding of terms of size 10^6 * 4096.
  const ChannelShape s{16, 1, 16, 16};
  std::mt19937_64 rng(4);
  std::uniform_int_distribution<int> k(-3, 3);
  std::vector<float> x(s.size());
  for (float& v : x) v = 1000.0f + 0.5f * static_cast<float>(k(rng));
  const std::vector<float> gamma = {1}, beta = {0};
  std::vector<float> y(s.size()), mean(1), inv(1), rm = {0}, rv = {1};
  emu::batch_norm_emu(s, {}, x, gamma, beta, y, mean, inv, rm, rv);
  const std::vector<double> one = {1.0}, zero = {0.0};
  const auto exact = refs::batch_norm_fp64(s, {}, widen(x), one, zero, zero, one);
  const auto b = emu::batch_norm_forward_bounds(s, {}, x, gamma, beta, {});
  EXPECT_LT(b.invstd, 1e-5);
  EXPECT_LE(std::fabs(inv[0] - exact.invstd[0]) / exact.invstd[0], b.invstd);
  const double var = 1 / (exact.invstd[0] * exact.invstd[0]) - 1e-5;

  const auto fp32 = formats::parse_format("fp32");
  std::vector<double> terms(x.size()), squares(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    terms[i] = x[i];
    squares[i] = static_cast<double>(x[i]) * x[i];  // exact: 22 bits
  }
  auto one_pass_var = [&](int lanes) {
    const float m = static_cast<float>(emu::block_sum(terms, fp32, lanes) / 4096.0);
    const float m2 = static_cast<float>(emu::block_sum(squares, fp32, lanes) / 4096.0);
    return static_cast<double>(m2 - m * m);
  };
  for (int lanes : {1, 256}) {
    const double rel = std::fabs(one_pass_var(lanes) - var) / var;
    EXPECT_GT(rel, 1e-2) << "lanes " << lanes;  // catastrophic cancellation
    RecordProperty("one_pass_relative_error_lanes_" + std::to_string(lanes), std::to_string(rel));
  }

  // fp16 statistics cannot even hold the sum (4 * 10^6 > 65504): overflow, counted.
  emu::BatchNormPolicy fp16_stats;
  fp16_stats.statistics = kFp16;
  emu::CounterSet counters;
  emu::batch_norm_emu(s, {}, x, gamma, beta, y, mean, inv, rm, rv, fp16_stats, &counters);
  EXPECT_GE(counters.find("batch_norm.mean")->overflow, 1u);
  EXPECT_TRUE(std::isinf(mean[0]));
}

TEST(BatchNorm, MismatchedSizesAndDegenerateShapesAreRejected) {
  const ChannelShape s{2, 3, 2, 2};
  std::vector<float> x(s.size()), y(s.size()), c3(3), c2(2);
  auto rm = c3, rv = c3, mean = c3, inv = c3;
  EXPECT_THROW(refs::batch_norm_ref(s, {}, x, c2, c3, y, mean, inv, rm, rv), std::invalid_argument);
  try {
    emu::batch_norm_emu(s, {}, x, c3, c3, y, mean, inv, rm, c2);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("running_var has 2 elements, expected 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(emu::batch_norm_backward_emu(s, x, std::span<const float>(x).first(5), c3, mean, inv, y, c3, c3),
               std::invalid_argument);
  // M = n*h*w = 1: the unbiased variance would divide by zero.
  const ChannelShape single{1, 3, 1, 1};
  EXPECT_THROW(emu::batch_norm_emu(single, {}, c3, c3, c3, c3, mean, inv, rm, rv), std::invalid_argument);
  emu::BatchNormPolicy odd_lanes;
  odd_lanes.lanes = 3;
  EXPECT_THROW(emu::batch_norm_emu(s, {}, x, c3, c3, y, mean, inv, rm, rv, odd_lanes), std::invalid_argument);
}

// Forward: the GPU runs the fp32 operations the emulator models in the same
// block order, each an IEEE intrinsic: mean, invstd and the running
// averages (double, same order) are bit-identical; y differs only by the
// fp32 rounding of fmaf before fp16: at most one fp16 spacing (no fp16 value
// lies between a value and its nearest fp32). Backward: dbeta, dgamma
// bit-identical (same xhat, same fmaf order); dx within
// emu::batch_norm_gpu_dx_bound.
TEST(BatchNormGpu, AgainstTheEmulator) {
  if (const std::string reason = gpu::gpu_unavailable_reason(); !reason.empty()) GTEST_SKIP() << reason;
  const auto fp32 = formats::parse_format("fp32");
  const auto exact = compare::Tolerance::bit_exact("same fp32 operations, same order");
  for (const ChannelShape& s : {ChannelShape{32, 16, 14, 14}, ChannelShape{256, 8, 1, 1}, ChannelShape{3, 5, 7, 9}}) {
    std::mt19937_64 rng(31);
    const auto x = activations(s, rng);
    const auto [gamma, beta] = parameters(s.c, rng);
    const auto dy = in_format(normal(s.size(), rng, 1.0), kFp16);
    const auto c = static_cast<std::size_t>(s.c);
    std::vector<float> ey(s.size()), emean(c), einv(c), erm(c, 0.5f), erv(c, 2.0f);
    std::vector<float> gy(s.size()), gmean(c), ginv(c), grm(c, 0.5f), grv(c, 2.0f);
    emu::batch_norm_emu(s, {}, x, gamma, beta, ey, emean, einv, erm, erv);
    gpu::batch_norm_gpu(s, {}, x, gamma, beta, gy, gmean, ginv, grm, grv);
    for (const auto& [name, e, g] : {std::tuple{"mean", &emean, &gmean}, std::tuple{"invstd", &einv, &ginv},
                                     std::tuple{"running_mean", &erm, &grm}, std::tuple{"running_var", &erv, &grv}}) {
      const auto cmp = compare::compare(*e, *g, fp32, exact);
      EXPECT_TRUE(cmp.passed) << name << ": " << cmp.failure;
    }
    const auto y = compare::compare(ey, gy, kFp16, compare::Tolerance::ulps(1, "one fp16 spacing"));
    EXPECT_TRUE(y.passed) << "y: " << y.failure;
    RecordProperty("y_bit_identical_" + std::to_string(s.size()), std::to_string(y.bit_identical_fraction));

    std::vector<float> edx(s.size()), edg(c), edb(c), gdx(s.size()), gdg(c), gdb(c);
    emu::batch_norm_backward_emu(s, x, dy, gamma, emean, einv, edx, edg, edb);
    gpu::batch_norm_backward_gpu(s, x, dy, gamma, emean, einv, gdx, gdg, gdb);
    EXPECT_TRUE(compare::compare(edg, gdg, fp32, exact).passed) << "dgamma";
    EXPECT_TRUE(compare::compare(edb, gdb, fp32, exact).passed) << "dbeta";
    const double bound = emu::batch_norm_gpu_dx_bound(s, x, dy, gamma, emean, einv, edx, edg, edb);
    const auto dx = compare::compare(edx, gdx, kFp16, compare::Tolerance::normwise(bound, "batch_norm_gpu_dx_bound"));
    EXPECT_TRUE(dx.passed) << "dx: " << dx.failure;
  }
}

}  // namespace
