// Row softmax, plain and causal: the emulated side against the FP64
// reference within a bound derived below (several shapes, seeds, input and
// output formats), the FP64 backward against finite differences, hand-worked
// rows (equal logits, the causal block, huge logits, a backward by hand),
// shift invariance, the counters, size errors, and the backends: ref and emu
// compute it, gpu refuses it with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "emu/block_sum.h"
#include "emu/softmax_emu.h"
#include "nn/emu_backend.h"
#include "nn/gpu_backend.h"
#include "nn/ref_backend.h"
#include "refs/softmax_ref.h"
#include "support/tensors.h"

namespace {

using namespace mpverify;
using namespace mpverify::test_support;
using ops::SoftmaxShape;

constexpr double kU64 = 0x1p-53;
const formats::Format kFp32 = formats::parse_format("fp32");

double gamma_u(std::int64_t k, double u) { return compare::gamma(k, u); }

// The forward bound against the exact value, per row over its visible columns
// (u = u_A, D = block_sum_depth(v, lanes), s_j = x_j - max, E_j = exp(s_j)):
//   d_j = fl(s_j): |d_j - s_j| <= u |s_j| (max is one of the inputs: exact);
//   e_j = fl(exp(d_j)), exp in double within 2^-52: |e_j / E_j - 1| <= eta_j =
//         exp(u |s_j|) (1 + 2^-52) (1 + u) - 1;
//   sum~: the block sum of positive terms: |sum~ - sum E| <= E_s = sum E eta + gamma_D sum E (1 + eta);
//   y~_j = fl_out(e_j / sum~), the quotient in double (2^-53): |y~_j / y_j - 1| <=
//         (1 + eta_j) (1 + 2^-53) (1 + u_out) / (1 - E_s / sum E) - 1, plus half an output subnormal.
// The FP64 oracle errs by gamma_{v+4}(2^-53) y_j (v exponentials within 2^-52, their sum, the quotient).
std::vector<double> forward_bound(const SoftmaxShape& s, std::span<const float> x, std::span<const double> exact,
                                  const emu::SoftmaxPolicy& policy) {
  const auto C = static_cast<std::size_t>(s.cols);
  const double u = policy.accumulate.unit_roundoff(), u_out = policy.output.unit_roundoff();
  std::vector<double> bound(s.size(), 0.0);
  for (std::size_t r = 0; r < static_cast<std::size_t>(s.rows); ++r) {
    const std::size_t v = s.visible(r), base = r * C;
    double m = -INFINITY;
    for (std::size_t j = 0; j < v; ++j) m = std::max(m, static_cast<double>(x[base + j]));
    const double gD = gamma_u(static_cast<std::int64_t>(emu::block_sum_depth(v, policy.lanes)), u);
    std::vector<double> E(v), eta(v);
    double sum = 0, e_s = 0;
    for (std::size_t j = 0; j < v; ++j) {
      const double sj = x[base + j] - m;
      E[j] = std::exp(sj);
      eta[j] = std::exp(u * std::fabs(sj)) * (1 + 0x1p-52) * (1 + u) - 1;
      sum += E[j];
      e_s += E[j] * eta[j] + gD * E[j] * (1 + eta[j]);
    }
    EXPECT_LT(e_s, sum / 2) << "no a priori bound for row " << r;
    const double g64 = gamma_u(static_cast<std::int64_t>(v) + 4, kU64);
    for (std::size_t j = 0; j < v; ++j) {
      const double y = exact[base + j];
      const double rel = (1 + eta[j]) * (1 + kU64) * (1 + u_out) / (1 - e_s / sum) - 1;
      bound[base + j] = rel * y + policy.output.min_subnormal() / 2 + g64 * y;
    }
  }
  return bound;
}

// The backward bound at the same y and dy (values of the input format), per
// row: dot~ = the block sum of the exact products dy y: |dot~ - dot| <= E_d =
// gamma_D sum |dy y|; the double evaluation of y (dy - dot~) adds gamma_2(2^-53)
// |y| (|dy| + |dot| + E_d); then the output rounding and half a subnormal; the
// oracle errs by gamma_{v+2}(2^-53) |y| (|dy| + sum |dy y|).
std::vector<double> backward_bound(const SoftmaxShape& s, std::span<const float> y, std::span<const float> dy,
                                   std::span<const double> exact, const emu::SoftmaxPolicy& policy) {
  const auto C = static_cast<std::size_t>(s.cols);
  const double u = policy.accumulate.unit_roundoff(), u_out = policy.output.unit_roundoff();
  std::vector<double> bound(s.size(), 0.0);
  for (std::size_t r = 0; r < static_cast<std::size_t>(s.rows); ++r) {
    const std::size_t v = s.visible(r), base = r * C;
    double dot = 0, abs_dot = 0;
    for (std::size_t j = 0; j < v; ++j) {
      dot += static_cast<double>(dy[base + j]) * y[base + j];
      abs_dot += std::fabs(static_cast<double>(dy[base + j]) * y[base + j]);
    }
    const double e_d = gamma_u(static_cast<std::int64_t>(emu::block_sum_depth(v, policy.lanes)), u) * abs_dot;
    const double g64 = gamma_u(static_cast<std::int64_t>(v) + 2, kU64);
    for (std::size_t j = 0; j < v; ++j) {
      const double yj = std::fabs(y[base + j]), dyj = std::fabs(dy[base + j]);
      const double e = yj * e_d + gamma_u(2, kU64) * yj * (dyj + std::fabs(dot) + e_d);
      bound[base + j] = e + u_out * (std::fabs(exact[base + j]) + e) + policy.output.min_subnormal() / 2 +
                        g64 * yj * (dyj + abs_dot);
    }
  }
  return bound;
}

// |got - want| <= bound everywhere (masked entries: both exactly 0), and the
// bound is below 1% of the values' magnitude, so that a wrong formula (a
// masked column let into the sum moves a causal row's values by a share of
// it; a missing y factor in backward changes dx by O(1)) cannot hide in it.
void expect_within(std::span<const double> want, std::span<const float> got, std::span<const double> bound,
                   const std::string& what) {
  ASSERT_EQ(want.size(), got.size());
  std::size_t failures = 0, first = 0;
  double bound_sum = 0, value_sum = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    bound_sum += bound[i];
    value_sum += std::fabs(want[i]);
    if (std::fabs(got[i] - want[i]) <= bound[i]) continue;
    if (failures++ == 0) first = i;
  }
  EXPECT_EQ(failures, 0u) << what << ": first at " << first << ": want " << want[first] << " got " << got[first]
                          << " bound " << bound[first];
  EXPECT_LT(bound_sum, 1e-2 * value_sum) << what << ": the bound would hide a wrong result";
}

const SoftmaxShape kShapes[] = {{12, 40, false}, {3 * 16, 16, true}, {2 * 8, 8, true}, {5, 300, false}};

TEST(SoftmaxEmu, ForwardAndBackwardWithinTheirBoundsOfTheFp64Reference) {
  int compared = 0;
  for (const char* fmt : {"fp32", "bf16", "fp16"})
    for (const SoftmaxShape& s : kShapes)
      for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        const formats::Format f = formats::parse_format(fmt);
        emu::SoftmaxPolicy policy;
        policy.input = policy.output = f;
        std::mt19937_64 rng(seed);
        const auto x = in_format(normal(s.size(), rng, 3.0), f), dy = in_format(normal(s.size(), rng, 1.0), f);
        std::vector<float> y(s.size()), dx(s.size());
        emu::softmax_emu(s, x, y, policy);
        const auto exact = refs::softmax_fp64(s, widen(x));
        const std::string what = std::string(fmt) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                                 (s.causal ? " causal" : "") + " seed " + std::to_string(seed);
        expect_within(exact, y, forward_bound(s, x, exact, policy), what + " y");
        // Backward at the emulator's y (a value of the input format here: input = output).
        emu::softmax_backward_emu(s, y, dy, dx, policy);
        const auto exact_dx = refs::softmax_backward_fp64(s, widen(y), widen(dy));
        expect_within(exact_dx, dx, backward_bound(s, y, dy, exact_dx, policy), what + " dx");
        ++compared;
      }
  EXPECT_EQ(compared, 3 * 4 * 3);
}

// L = <y, w> through the FP64 softmax, central differences with h = 2^-16
// along each x_i. As a function of x_i alone, y_i = sigma(x_i - c) (sigma
// the logistic function, c the log of the row's other exponentials) and
// y_j = K_j (1 - sigma(x_i - c)), K_j <= 1: every third derivative is at most
// max|sigma'''| = 1/8, so the truncation is at most h^2/6 sum |w| / 8.
// Rounding: the FP64 values of L err by gamma_{v+4}(2^-53) sum |w y| each,
// twice over 2h; the analytic side by gamma_{v+4}(2^-53) (|dx| + 2 y sum |w y|).
// A masked x_i moves nothing: its derivative is 0 on both sides.
TEST(SoftmaxRef, BackwardMatchesFiniteDifferences) {
  for (const SoftmaxShape& s : {SoftmaxShape{3, 7, false}, SoftmaxShape{2 * 5, 5, true}}) {
    std::mt19937_64 rng(41);
    const auto x = widen(normal(s.size(), rng, 2.0)), w = widen(normal(s.size(), rng, 1.0));
    auto loss = [&](const std::vector<double>& xs) {
      const auto y = refs::softmax_fp64(s, xs);
      double l = 0;
      for (std::size_t i = 0; i < y.size(); ++i) l += y[i] * w[i];
      return l;
    };
    const auto y = refs::softmax_fp64(s, x);
    const auto dx = refs::softmax_backward_fp64(s, y, w);
    const double h = 0x1p-16, g64 = gamma_u(s.cols + 4, kU64);
    const auto C = static_cast<std::size_t>(s.cols);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::size_t r = i / C;
      double sum_w = 0, sum_wy = 0;
      for (std::size_t j = 0; j < C; ++j) {
        sum_w += std::fabs(w[r * C + j]);
        sum_wy += std::fabs(w[r * C + j] * y[r * C + j]);
      }
      const double tolerance = h * h / 6 * sum_w / 8 + 2 * g64 * sum_wy / (2 * h) +
                               g64 * (std::fabs(dx[i]) + 2 * y[i] * sum_wy);
      auto xp = x, xm = x;
      xp[i] += h;
      xm[i] -= h;
      const double fd = (loss(xp) - loss(xm)) / (2 * h);
      EXPECT_NEAR(fd, dx[i], tolerance) << (s.causal ? "causal " : "") << "dx[" << i << "]";
      if (i % C >= s.visible(r)) EXPECT_EQ(dx[i], 0.0) << "a masked column has a gradient";
      else EXPECT_LT(tolerance, 1e-2 * std::fabs(dx[i]) + 1e-9) << "dx[" << i << "]";
    }
  }
}

// Equal logits: exp(0) = 1 each, the sum is the count, y = 1/count, exact for
// 8 and correctly rounded for 3. The causal block of T = 4 equal rows gives
// row i 1/(i+1) in its first i+1 columns and exact zeros after them.
TEST(SoftmaxEmu, EqualLogitsAndTheCausalBlockByHand) {
  std::vector<float> y(8);
  emu::SoftmaxPolicy fp32;
  fp32.input = fp32.output = kFp32;
  emu::softmax_emu({1, 8, false}, std::vector<float>(8, 2.5f), y, fp32);
  EXPECT_EQ(y, std::vector<float>(8, 0.125f));
  std::vector<float> y3(3);
  emu::softmax_emu({1, 3, false}, std::vector<float>(3, -7.0f), y3, fp32);
  EXPECT_EQ(y3, std::vector<float>(3, 1.0f / 3.0f));
  std::vector<float> block(16);
  emu::softmax_emu({4, 4, true}, std::vector<float>(16, 1.0f), block, fp32);
  const std::vector<float> want = {1,        0,        0,        0,     0.5f,     0.5f,     0,        0,
                                   1 / 3.0f, 1 / 3.0f, 1 / 3.0f, 0,     0.25f,    0.25f,    0.25f,    0.25f};
  EXPECT_EQ(block, want);
  std::vector<float> ref(16);
  refs::softmax_ref({4, 4, true}, std::vector<float>(16, 1.0f), ref);
  EXPECT_EQ(ref, want);
}

// Logits of 10^4 overflow exp in any format unless the max is subtracted
// first; a masked column holding a huge value must not shift the max.
TEST(SoftmaxEmu, HugeLogitsAndMaskedValuesStayOutOfTheMax) {
  std::vector<float> y(2);
  emu::SoftmaxPolicy fp32;
  fp32.input = fp32.output = kFp32;
  emu::softmax_emu({1, 2, false}, std::vector<float>{10000.0f, 10000.0f}, y, fp32);
  EXPECT_EQ(y, (std::vector<float>{0.5f, 0.5f}));
  // Causal 2 x 2: row 0 sees only 1.0; its masked 1e30 does not enter.
  std::vector<float> c(4);
  emu::softmax_emu({2, 2, true}, std::vector<float>{1.0f, 1e30f, 0.0f, 0.0f}, c, fp32);
  EXPECT_EQ(c, (std::vector<float>{1.0f, 0.0f, 0.5f, 0.5f}));
}

// Adding a constant to a row (exactly: small integers) changes no bit: the
// kernel subtracts the max first.
TEST(SoftmaxEmu, ShiftInvariantBitForBit) {
  std::mt19937_64 rng(5);
  auto x = normal(64, rng, 2.0);
  for (float& v : x) v = std::round(v * 64) / 64;  // on a grid: x + 16 is exact
  auto shifted = x;
  for (float& v : shifted) v += 16.0f;
  std::vector<float> a(64), b(64);
  emu::softmax_emu({8, 8, true}, x, a, emu::SoftmaxPolicy{});
  emu::softmax_emu({8, 8, true}, shifted, b, emu::SoftmaxPolicy{});
  EXPECT_EQ(a, b);
}

// y = (1/2, 1/2), dy = (1, 3): dot = 2, dx = (-1/2, 1/2). Causal: the masked
// column's dx is 0 whatever its dy.
TEST(SoftmaxEmu, BackwardByHand) {
  std::vector<float> dx(2);
  emu::softmax_backward_emu({1, 2, false}, std::vector<float>{0.5f, 0.5f}, std::vector<float>{1, 3}, dx);
  EXPECT_EQ(dx, (std::vector<float>{-0.5f, 0.5f}));
  std::vector<float> c(4);
  emu::softmax_backward_emu({2, 2, true}, std::vector<float>{1, 0, 0.5f, 0.5f}, std::vector<float>{5, 100, 1, 3}, c);
  EXPECT_EQ(c, (std::vector<float>{0.0f, 0.0f, -0.5f, 0.5f}));
}

// Counts: a row of 3 under 32 lanes: 3 lane additions and 31 tree additions
// (emu/block_sum.h) for the sum; three
// subtractions, three exponentials, three outputs; bf16 input rounding of
// 1 + 2^-9 is inexact.
TEST(SoftmaxEmu, CountsEverySite) {
  emu::CounterSet counters;
  emu::SoftmaxPolicy policy;
  policy.input = formats::parse_format("bf16");
  std::vector<float> y(3);
  emu::softmax_emu({1, 3, false}, std::vector<float>{1.0f + 0x1p-9f, 0.0f, -1.0f}, y, policy, &counters);
  EXPECT_EQ(counters.find("softmax.x")->elements, 3u);
  EXPECT_EQ(counters.find("softmax.x")->inexact, 1u);
  EXPECT_EQ(counters.find("softmax.shifted")->elements, 3u);
  EXPECT_EQ(counters.find("softmax.exp")->elements, 3u);
  EXPECT_EQ(counters.find("softmax.sum")->elements, 3u + 31u);
  EXPECT_EQ(counters.find("softmax.y")->elements, 3u);
  std::vector<float> dx(3);
  emu::softmax_backward_emu({1, 3, false}, y, std::vector<float>{1, 2, 3}, dx, policy, &counters);
  EXPECT_EQ(counters.find("softmax_backward.y")->elements, 3u);
  EXPECT_EQ(counters.find("softmax_backward.dy")->elements, 3u);
  EXPECT_EQ(counters.find("softmax_backward.dot")->elements, 3u + 31u);
  EXPECT_EQ(counters.find("softmax_backward.dx")->elements, 3u);
}

TEST(Softmax, MismatchedSizesAndBadShapesAreRejected) {
  std::vector<float> x(6), y(5);
  EXPECT_THROW(emu::softmax_emu({2, 3, false}, x, y), std::invalid_argument);
  EXPECT_THROW(refs::softmax_ref({2, 3, false}, x, y), std::invalid_argument);
  std::vector<float> y6(6);
  EXPECT_THROW(emu::softmax_emu({2, 3, true}, x, y6), std::invalid_argument);  // causal: rows a multiple of cols
  EXPECT_THROW(emu::softmax_backward_emu({3, 2, false}, x, std::span<const float>(x).first(4), y6),
               std::invalid_argument);
}

TEST(SoftmaxBackends, RefAndEmuComputeItAndGpuRefusesIt) {
  const SoftmaxShape s{2, 2, true};
  const std::vector<float> x = {1, 2, 3, 4};
  std::vector<float> want(4), y(4);
  refs::softmax_ref(s, x, want);
  emu::SoftmaxPolicy fp32;
  fp32.input = fp32.output = kFp32;
  nn::RefBackend ref;
  ref.softmax(s, x, y, fp32, nullptr);
  EXPECT_EQ(y, want);
  EXPECT_THROW(ref.softmax(s, x, y, emu::SoftmaxPolicy{}, nullptr), std::invalid_argument);
  nn::EmuBackend emu_backend;
  emu::CounterSet counters;
  emu_backend.softmax(s, x, y, fp32, &counters);
  EXPECT_NE(counters.find("softmax.y"), nullptr);
  nn::GpuBackend gpu;
  try {
    gpu.softmax(s, x, y, fp32, nullptr);
    ADD_FAILURE() << "the gpu backend ran softmax";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gpu backend has no softmax kernel"), std::string::npos) << e.what();
  }
  EXPECT_THROW(gpu.softmax_backward(s, y, x, y, fp32, nullptr), std::invalid_argument);
}

}  // namespace
