// conv2d forward, backward-data and backward-filter: the references against
// naive loops written here, the FP64 backward against finite differences and
// the adjoint identities, the emulator within its normwise bound on several
// seeds, bit-exact small-integer cases, hand-worked counters, size errors,
// and the GPU (cuDNN) against the emulator (skipped without a device).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "emu/conv2d_emu.h"
#include "emu/quantize.h"
#include "gpu/conv2d_gpu.h"
#include "gpu/device.h"
#include "refs/conv2d_ref.h"

namespace {

using namespace mpverify;
using emu::Accumulation;
using ops::Conv2dShape;

const formats::Format kFp16 = formats::parse_format("fp16"), kFp32 = formats::parse_format("fp32");
constexpr double kU64 = 0x1p-53;

// Odd shapes: stride 2 with pad 1, non-square images and filters, a stride
// that leaves input rows no window reaches, pad 2 with stride 3, 1x1 filters.
const Conv2dShape kShapes[] = {
    {2, 3, 7, 6, 4, 3, 2, 2, 1},
    {1, 2, 5, 8, 3, 1, 3, 1, 0},
    {3, 2, 6, 7, 2, 4, 4, 3, 2},
    {2, 4, 9, 5, 3, 3, 3, 2, 0},
    {1, 3, 4, 4, 5, 1, 1, 2, 0},
};

std::string describe(const Conv2dShape& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "n=%d c=%d h=%d w=%d k=%d r=%d s=%d stride=%d pad=%d", s.n, s.c, s.h, s.w, s.k, s.r,
                s.s, s.stride, s.pad);
  return buf;
}

std::vector<float> normal_values(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(normal(rng));
  return v;
}

std::vector<float> fp16_values(std::size_t n, std::uint64_t seed) {
  auto v = normal_values(n, seed);
  emu::quantize(v, v, emu::QuantizeSpec{kFp16});
  return v;
}

std::vector<float> absolute(std::vector<float> v) {
  for (auto& x : v) x = std::fabs(x);
  return v;
}

// --- the independent oracle: the definition, as seven loops in FP64 ---------

struct Naive {
  std::vector<double> y, dx, dw;
};

// y = conv(x, w); dx = the adjoint applied to dy; dw = the filter gradient for
// (x, dy), all accumulated element by element from the definition.
Naive naive(const Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w,
            const std::vector<float>& dy) {
  const int P = s.p(), Q = s.q();
  Naive out{std::vector<double>(s.y_size()), std::vector<double>(s.x_size()), std::vector<double>(s.weight_size())};
  for (int n = 0; n < s.n; ++n)
    for (int k = 0; k < s.k; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q)
          for (int c = 0; c < s.c; ++c)
            for (int r = 0; r < s.r; ++r)
              for (int t = 0; t < s.s; ++t) {
                const int ih = p * s.stride - s.pad + r, iw = q * s.stride - s.pad + t;
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                const std::size_t xi = ((std::size_t(n) * s.c + c) * s.h + ih) * s.w + iw;
                const std::size_t wi = ((std::size_t(k) * s.c + c) * s.r + r) * s.s + t;
                const std::size_t yi = ((std::size_t(n) * s.k + k) * P + p) * Q + q;
                out.y[yi] += double(x[xi]) * w[wi];
                out.dx[xi] += double(dy[yi]) * w[wi];
                out.dw[wi] += double(x[xi]) * dy[yi];
              }
  return out;
}

// Both within gamma_L(u) of the exact value per element (any summation order,
// L terms: Higham 3.1), so |a - b| <= (gamma_L(u_a) + gamma_L(u_b)) |.|-bound.
template <typename T>
void expect_elementwise_close(const std::vector<double>& oracle, const std::vector<T>& got,
                              const std::vector<double>& magnitude, std::int64_t L, double u_got,
                              const std::string& what) {
  ASSERT_EQ(oracle.size(), got.size());
  const double g = compare::gamma(L, u_got) + compare::gamma(L, kU64);
  int nonzero = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(std::fabs(double(got[i]) - oracle[i]), g * magnitude[i]) << what << " element " << i;
    nonzero += oracle[i] != 0;
  }
  EXPECT_GT(nonzero, 0) << what;
}

TEST(Conv2dRef, MatchesTheNaiveLoopsInFp64AndFp32) {
  int checked = 0;
  for (const Conv2dShape& s : kShapes) {
    const auto x = normal_values(s.x_size(), 1), w = normal_values(s.weight_size(), 2),
               dy = normal_values(s.y_size(), 3);
    const Naive o = naive(s, x, w, dy);
    const Naive mag = naive(s, absolute(x), absolute(w), absolute(dy));
    std::vector<double> y64(s.y_size()), dx64(s.x_size()), dw64(s.weight_size());
    std::vector<float> y32(s.y_size()), dx32(s.x_size()), dw32(s.weight_size());
    refs::conv2d_forward_ref_fp64(s, x, w, y64);
    refs::conv2d_backward_data_ref_fp64(s, dy, w, dx64);
    refs::conv2d_backward_filter_ref_fp64(s, x, dy, dw64);
    refs::conv2d_forward_ref(s, x, w, y32);
    refs::conv2d_backward_data_ref(s, dy, w, dx32);
    refs::conv2d_backward_filter_ref(s, x, dy, dw32);
    const std::string d = describe(s);
    expect_elementwise_close(o.y, y64, mag.y, s.forward_terms(), kU64, "y fp64 " + d);
    expect_elementwise_close(o.dx, dx64, mag.dx, s.backward_data_terms(), kU64, "dx fp64 " + d);
    expect_elementwise_close(o.dw, dw64, mag.dw, s.backward_filter_terms(), kU64, "dw fp64 " + d);
    expect_elementwise_close(o.y, y32, mag.y, s.forward_terms(), 0x1p-24, "y fp32 " + d);
    expect_elementwise_close(o.dx, dx32, mag.dx, s.backward_data_terms(), 0x1p-24, "dx fp32 " + d);
    expect_elementwise_close(o.dw, dw32, mag.dw, s.backward_filter_terms(), 0x1p-24, "dw fp32 " + d);
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

// --- the FP64 backward against finite differences and the adjoints ----------

double dot(const std::vector<double>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::vector<float> plus(std::vector<float> v, float h) {
  for (auto& x : v) x += h;
  return v;
}

// The loss l(x, w) = sum(conv(x, w) * g) is linear in each of x and w, so a
// central difference has no truncation error: only the rounding of the two
// FP64 evaluations. Each evaluation of l (conv's sums of c r s terms, then
// the n k p q terms of the dot product) is within gamma_M(2^-53) S of exact,
// M = c r s + n k p q, S = sum |g| conv(|x| + h, |w| + h) (the perturbed
// operands are below |x| + h and |w| + h). The step is taken in float, so the
// difference divides by the steps actually taken, a + b (exact in double).
// The gradient itself is within gamma_L(2^-53) of exact times its |.|-bound.
TEST(Conv2dRef, BackwardMatchesFiniteDifferencesOfTheForward) {
  const float h = 0x1p-4f;
  for (const Conv2dShape& s : {kShapes[0], kShapes[2]}) {
    const auto x = normal_values(s.x_size(), 11), w = normal_values(s.weight_size(), 12),
               g = normal_values(s.y_size(), 13);
    auto loss = [&](const std::vector<float>& xx, const std::vector<float>& ww) {
      std::vector<double> y(s.y_size());
      refs::conv2d_forward_ref_fp64(s, xx, ww, y);
      return dot(y, g);
    };
    std::vector<double> bound_y(s.y_size());
    refs::conv2d_forward_ref_fp64(s, plus(absolute(x), h), plus(absolute(w), h), bound_y);
    const double S = dot(bound_y, absolute(g));
    const double eval = compare::gamma(s.forward_terms() + std::int64_t(s.y_size()), kU64) * S;

    std::vector<double> dx(s.x_size()), dw(s.weight_size()), dx_mag(s.x_size()), dw_mag(s.weight_size());
    refs::conv2d_backward_data_ref_fp64(s, g, w, dx);
    refs::conv2d_backward_filter_ref_fp64(s, x, g, dw);
    refs::conv2d_backward_data_ref_fp64(s, absolute(g), absolute(w), dx_mag);
    refs::conv2d_backward_filter_ref_fp64(s, absolute(x), absolute(g), dw_mag);

    auto check = [&](std::vector<float> v, bool is_x, const std::vector<double>& grad,
                     const std::vector<double>& grad_mag, std::int64_t L) {
      double worst = 0;
      for (std::size_t i = 0; i < v.size(); ++i) {
        const float v0 = v[i], up = v0 + h, down = v0 - h;
        const double a = double(up) - v0, b = double(v0) - down;
        v[i] = up;
        const double l_up = is_x ? loss(v, w) : loss(x, v);
        v[i] = down;
        const double l_down = is_x ? loss(v, w) : loss(x, v);
        v[i] = v0;
        const double fd = (l_up - l_down) / (a + b);
        // ... plus one rounding each for the subtraction and the division (taken as 4u |fd|).
        const double tol = 2 * eval / (a + b) + compare::gamma(L, kU64) * grad_mag[i] + 4 * kU64 * std::fabs(fd);
        EXPECT_LE(std::fabs(fd - grad[i]), tol) << (is_x ? "dx" : "dw") << " element " << i << " " << describe(s);
        worst = std::max(worst, std::fabs(fd - grad[i]) / tol);
      }
      return worst;
    };
    const double wx = check(x, true, dx, dx_mag, s.backward_data_terms());
    const double ww = check(w, false, dw, dw_mag, s.backward_filter_terms());
    RecordProperty("fd_bound_used_dx_" + std::to_string(s.stride), std::to_string(wx));
    RecordProperty("fd_bound_used_dw_" + std::to_string(s.stride), std::to_string(ww));
  }
}

// <conv(x, w), g> = <x, backward_data(g, w)> = <w, backward_filter(x, g)>:
// the three are the same sum of n k p q c r s terms x w g (over the taps
// inside the image) grouped differently. Each FP64 evaluation is within
// gamma_M(2^-53) S of it, S = sum |x||w||g| = <conv(|x|,|w|), |g|>, with M the
// depth of its grouping: c r s + n k p q, L_data + n c h w, n p q + k c r s.
TEST(Conv2dRef, AdjointIdentitiesHoldInFp64) {
  for (const Conv2dShape& s : kShapes) {
    const auto x = normal_values(s.x_size(), 21), w = normal_values(s.weight_size(), 22),
               g = normal_values(s.y_size(), 23);
    std::vector<double> y(s.y_size()), dx(s.x_size()), dw(s.weight_size()), mag(s.y_size());
    refs::conv2d_forward_ref_fp64(s, x, w, y);
    refs::conv2d_backward_data_ref_fp64(s, g, w, dx);
    refs::conv2d_backward_filter_ref_fp64(s, x, g, dw);
    refs::conv2d_forward_ref_fp64(s, absolute(x), absolute(w), mag);
    const double S = dot(mag, absolute(g));
    const double lhs = dot(y, g), via_data = dot(dx, x), via_filter = dot(dw, w);
    const double g_fwd = compare::gamma(s.forward_terms() + std::int64_t(s.y_size()), kU64);
    const double g_data = compare::gamma(s.backward_data_terms() + std::int64_t(s.x_size()), kU64);
    const double g_filter = compare::gamma(s.backward_filter_terms() + std::int64_t(s.weight_size()), kU64);
    EXPECT_LE(std::fabs(lhs - via_data), (g_fwd + g_data) * S) << describe(s);
    EXPECT_LE(std::fabs(lhs - via_filter), (g_fwd + g_filter) * S) << describe(s);
    // The bound is tiny against the value: a wrong adjoint cannot hide in it.
    EXPECT_LT((g_fwd + g_data + g_filter) * S, 1e-8 * std::fabs(lhs)) << describe(s);
  }
}

// --- the emulator -----------------------------------------------------------

enum class Dir { forward, data, filter };
constexpr Dir kDirs[] = {Dir::forward, Dir::data, Dir::filter};
const char* name(Dir d) { return d == Dir::forward ? "forward" : d == Dir::data ? "backward-data" : "backward-filter"; }

// The op's operands: (x, w) forward, (dy, w) backward data, (x, dy) backward filter.
std::size_t a_size(const Conv2dShape& s, Dir d) { return d == Dir::data ? s.y_size() : s.x_size(); }
std::size_t b_size(const Conv2dShape& s, Dir d) { return d == Dir::filter ? s.y_size() : s.weight_size(); }
std::size_t out_size(const Conv2dShape& s, Dir d) {
  return d == Dir::forward ? s.y_size() : d == Dir::data ? s.x_size() : s.weight_size();
}
std::int64_t terms(const Conv2dShape& s, Dir d) {
  return d == Dir::forward ? s.forward_terms() : d == Dir::data ? s.backward_data_terms() : s.backward_filter_terms();
}

std::vector<double> ref64(const Conv2dShape& s, Dir d, const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<double> out(out_size(s, d));
  if (d == Dir::forward) refs::conv2d_forward_ref_fp64(s, a, b, out);
  else if (d == Dir::data) refs::conv2d_backward_data_ref_fp64(s, a, b, out);
  else refs::conv2d_backward_filter_ref_fp64(s, a, b, out);
  return out;
}
std::vector<float> ref32(const Conv2dShape& s, Dir d, const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> out(out_size(s, d));
  if (d == Dir::forward) refs::conv2d_forward_ref(s, a, b, out);
  else if (d == Dir::data) refs::conv2d_backward_data_ref(s, a, b, out);
  else refs::conv2d_backward_filter_ref(s, a, b, out);
  return out;
}
double condition(const Conv2dShape& s, Dir d, const std::vector<float>& a, const std::vector<float>& b) {
  if (d == Dir::forward) return refs::conv2d_condition(s, a, b);
  if (d == Dir::data) return refs::conv2d_backward_data_condition(s, a, b);
  return refs::conv2d_backward_filter_condition(s, a, b);
}
std::vector<float> emulate(const Conv2dShape& s, Dir d, const std::vector<float>& a, const std::vector<float>& b,
                           const emu::GemmPolicy& policy, emu::CounterSet* counters = nullptr) {
  std::vector<float> out(out_size(s, d));
  if (d == Dir::forward) emu::conv2d_forward_emu(s, a, b, out, policy, counters);
  else if (d == Dir::data) emu::conv2d_backward_data_emu(s, a, b, out, policy, counters);
  else emu::conv2d_backward_filter_emu(s, a, b, out, policy, counters);
  return out;
}

emu::GemmPolicy policy_of(Accumulation acc, const formats::Format& output) {
  emu::GemmPolicy p;
  p.accumulation = acc;
  p.output = output;
  if (acc == Accumulation::tensor_core) p.tensor_core = {8, 3, formats::Rounding::toward_zero};
  return p;
}

// The emulator's bound relative to op(|a|,|b|) per element: rounding both
// inputs scales each exact product by at most 1 + gamma_2(u_in), the
// recursive sum of L terms adds gamma_L(u_acc) (Higham 3.1; the tensor-core
// model 2^-21 per step, see gemm_gpu_test.cpp), the output rounding 1 + u_out:
// (1 + gamma_2(u_in))(1 + gamma_L(u_acc))(1 + u_out) - 1. Normwise: times the
// condition factor. (Normal(0,1) inputs: underflow is negligible.)
double emu_bound(std::int64_t L, double u_in, double u_acc, double u_out) {
  return (1 + compare::gamma(2, u_in)) * (1 + compare::gamma(L, u_acc)) * (1 + u_out) - 1;
}
double u_acc_of(Accumulation a) {
  return a == Accumulation::fp32 ? 0x1p-24 : a == Accumulation::fp16 ? 0x1p-11 : 0x1p-21;
}

// fp16-representable inputs and fp32 output isolate the accumulation: the
// bound is gamma_L(u_acc) alone, tight enough that a wrong term or order
// of magnitude fails. Then raw float inputs and fp16 output, the full bound.
TEST(Conv2dEmu, WithinTheNormwiseBoundOfFp64OnSeveralSeeds) {
  const Conv2dShape large_k{2, 64, 6, 6, 8, 3, 3, 1, 1};  // L = 576 forward, 72 backward data, 72 filter
  int compared = 0;
  for (std::uint64_t seed : {1u, 2u, 3u})
    for (const Conv2dShape& s : {kShapes[0], kShapes[2], kShapes[3], large_k})
      for (Dir d : kDirs)
        for (Accumulation acc : {Accumulation::fp32, Accumulation::fp16, Accumulation::tensor_core}) {
          const std::int64_t L = terms(s, d);  // at most 576: L 2^-11 < 1, so fp16 accumulation has its bound too
          const std::string what = std::string(name(d)) + " " + std::string(emu::to_string(acc)) + " seed " +
                                   std::to_string(seed) + " " + describe(s);
          const auto a = fp16_values(a_size(s, d), seed * 10), b = fp16_values(b_size(s, d), seed * 10 + 1);
          const double cond = condition(s, d, a, b);
          const auto exact = ref64(s, d, a, b);
          const auto acc_only = compare::Tolerance::normwise(compare::gamma(L, u_acc_of(acc)) * cond,
                                                             "gamma_L(u_acc) times the condition factor");
          const auto c1 = compare::compare(std::span<const double>(exact), emulate(s, d, a, b, policy_of(acc, kFp32)),
                                           kFp32, acc_only);
          EXPECT_TRUE(c1.passed) << what << ": " << c1.failure;
          EXPECT_GT(c1.relative_error, 0.0) << what;  // the accumulation did round

          const auto ra = normal_values(a_size(s, d), seed * 10 + 2), rb = normal_values(b_size(s, d), seed * 10 + 3);
          const auto full = compare::Tolerance::normwise(
              emu_bound(L, 0x1p-11, u_acc_of(acc), 0x1p-11) * condition(s, d, ra, rb),
              "(1+gamma_2(u_in))(1+gamma_L(u_acc))(1+u_out)-1 times the condition factor");
          const auto c2 = compare::compare(std::span<const double>(ref64(s, d, ra, rb)),
                                           emulate(s, d, ra, rb, policy_of(acc, kFp16)), kFp16, full);
          EXPECT_TRUE(c2.passed) << what << " (fp16 out): " << c2.failure;
          compared += 2;
        }
  EXPECT_EQ(compared, 3 * 4 * 3 * 3 * 2);
}

// Integers in [-4, 4]: every product is an integer of magnitude <= 16, and
// every partial sum of L <= 128 of them an integer of magnitude <= 2048,
// which fp16 (all integers up to 2^11), fp32 and double hold exactly. So no
// addition of any model rounds (the tensor-core model aligns to a grid of at
// most 2^(11-26), below 1, so truncation drops nothing either), the fp16
// inputs and outputs are exact, and the emulator, the FP32 and the FP64
// references all agree bit for bit.
TEST(Conv2dEmu, SmallIntegerInputsAreBitExact) {
  const Conv2dShape s{2, 3, 9, 7, 4, 3, 3, 2, 1};  // L: 27 forward, 4*2*2 = 16 backward data, 2*5*4 = 40 filter
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-4, 4);
  for (Dir d : kDirs) {
    ASSERT_LE(terms(s, d), 128);
    std::vector<float> a(a_size(s, d)), b(b_size(s, d));
    for (auto& v : a) v = float(small(rng));
    for (auto& v : b) v = float(small(rng));
    const auto r32 = ref32(s, d, a, b);
    const auto r64 = ref64(s, d, a, b);
    for (std::size_t i = 0; i < r32.size(); ++i) ASSERT_EQ(double(r32[i]), r64[i]) << name(d) << " " << i;
    for (Accumulation acc : {Accumulation::fp32, Accumulation::fp16, Accumulation::tensor_core})
      for (const auto& out : {kFp16, kFp32}) {
        const auto cmp = compare::compare(r32, emulate(s, d, a, b, policy_of(acc, out)), out,
                                          compare::Tolerance::bit_exact("small integers: every sum is exact"));
        EXPECT_TRUE(cmp.passed) << name(d) << " " << emu::to_string(acc) << " " << out.name << ": " << cmp.failure;
        EXPECT_EQ(cmp.bit_identical_fraction, 1.0);
      }
  }
}

// --- counters, worked by hand ------------------------------------------------

TEST(Conv2dEmu, InputsAreRoundedAndCountedOnce) {
  // A 3x3 image under a 3x3 filter with pad 1: the centre element lies in all
  // 9 windows, but it is one input: one rounding, one overflow. 70000 is
  // beyond fp16's 65504 (and its rounding boundary 65520): inf. 65519 rounds
  // down to 65504 (inexact, no overflow).
  const Conv2dShape s{1, 1, 3, 3, 1, 3, 3, 1, 1};
  std::vector<float> x(9, 1.0f), w(9, 1.0f), y(9);
  x[4] = 70000.0f;
  x[0] = 65519.0f;
  emu::CounterSet counters;
  emu::conv2d_forward_emu(s, x, w, y, emu::GemmPolicy{}, &counters);
  const emu::Counters& cx = *counters.find("conv2d.x");
  EXPECT_EQ(cx.elements, 9u);
  EXPECT_EQ(cx.overflow, 1u);
  EXPECT_EQ(cx.inexact, 2u);
  EXPECT_EQ(cx.nonfinite_in, 0u);  // 70000 itself is finite: the infinity is what rounding made
  EXPECT_EQ(counters.find("conv2d.w")->elements, 9u);
  EXPECT_EQ(counters.find("conv2d.y")->elements, 9u);
  // fp32 accumulation counts its steps: 9 outputs of 9 taps each (the padding's zeros are products too).
  ASSERT_NE(counters.find("conv2d.accumulate"), nullptr);
  EXPECT_EQ(counters.find("conv2d.accumulate")->elements, 81u);
  for (float v : y) EXPECT_TRUE(std::isinf(v));             // every window holds the inf
  EXPECT_EQ(counters.find("conv2d.y")->nonfinite_in, 9u);
}

TEST(Conv2dEmu, Fp16AccumulationSwampsAfter2048) {
  // Forward: c = 1024 channels of a 2x2 image under a 2x2 filter, all ones: one
  // output, L = 4096 terms equal to 1. In fp16, 2048 + 1 is a tie between
  // 2048 (even) and 2050: the sum stays at 2048 and the last 2048 terms are
  // lost. fp32 accumulation reaches 4096.
  {
    const Conv2dShape s{1, 1024, 2, 2, 1, 2, 2, 1, 0};
    const std::vector<float> x(s.x_size(), 1.0f), w(s.weight_size(), 1.0f);
    std::vector<float> y(1);
    emu::CounterSet counters;
    emu::conv2d_forward_emu(s, x, w, y, policy_of(Accumulation::fp16, kFp32), &counters);
    EXPECT_EQ(y[0], 2048.0f);
    const emu::Counters& acc = *counters.find("conv2d.accumulate");
    EXPECT_EQ(acc.elements, 4096u);
    EXPECT_EQ(acc.addends_nonzero, 4096u);
    EXPECT_EQ(acc.swamped, 2048u);
    emu::conv2d_forward_emu(s, x, w, y, policy_of(Accumulation::fp32, kFp32), nullptr);
    EXPECT_EQ(y[0], 4096.0f);
  }
  // Backward filter: one reduction over the batch and the positions, n p q =
  // 2 * 64 * 32 = 4096 terms for the single 1x1 weight: the same stall.
  {
    const Conv2dShape s{2, 1, 64, 32, 1, 1, 1, 1, 0};
    const std::vector<float> x(s.x_size(), 1.0f), dy(s.y_size(), 1.0f);
    std::vector<float> dw(1);
    emu::CounterSet counters;
    emu::conv2d_backward_filter_emu(s, x, dy, dw, policy_of(Accumulation::fp16, kFp32), &counters);
    EXPECT_EQ(dw[0], 2048.0f);
    EXPECT_EQ(counters.find("conv2d_backward_filter.accumulate")->swamped, 2048u);
    EXPECT_EQ(counters.find("conv2d_backward_filter.accumulate")->elements, 4096u);
  }
}

TEST(Conv2dEmu, BackwardDataTakesOnlyTheTapsOfItsStridePhase) {
  // h = w = 4, 3x3 filter, stride 2, pad 1: p = q = 2. Input row ih is
  // reached by the taps r = (ih + 1) mod 2 (mod 2): ih = 0 and 2 by r = 1
  // only, ih = 1 and 3 by r = 0 and 2, from output row (ih + 1 - r) / 2.
  // So the steps per row are 1, 2, 1, 2 (6 in all), of which in range
  // (output row < 2) 1, 2, 1, 1 (ih = 3, r = 0 would need output row 2):
  // 5. Per (n, c, k): 6 * 6 = 36 steps, 5 * 5 = 25 non-zero products. A
  // convolution over dy dilated by the stride would take k r s h w = 144 per
  // (n, c, k), 108 of them on inserted zeros.
  const Conv2dShape s{1, 2, 4, 4, 3, 3, 3, 2, 1};
  const std::vector<float> dy(s.y_size(), 1.0f), w(s.weight_size(), 1.0f);
  std::vector<float> dx(s.x_size());
  emu::CounterSet counters;
  emu::conv2d_backward_data_emu(s, dy, w, dx, policy_of(Accumulation::fp16, kFp32), &counters);
  const emu::Counters& acc = *counters.find("conv2d_backward_data.accumulate");
  EXPECT_EQ(acc.elements, 1u * 2 * 3 * 36);
  EXPECT_EQ(acc.addends_nonzero, 1u * 2 * 3 * 25);
  EXPECT_EQ(acc.swamped, 0u);
  // dx = k * (taps in range along h) * (along w): 3 * {1,2,1,1} x {1,2,1,1}.
  const int in_range[] = {1, 2, 1, 1};
  for (int c = 0; c < 2; ++c)
    for (int ih = 0; ih < 4; ++ih)
      for (int iw = 0; iw < 4; ++iw)
        EXPECT_EQ(dx[(c * 4 + ih) * 4 + iw], float(3 * in_range[ih] * in_range[iw])) << ih << "," << iw;
  EXPECT_EQ(counters.find("conv2d_backward_data.dy")->elements, s.y_size());
  EXPECT_EQ(counters.find("conv2d_backward_data.w")->elements, s.weight_size());
  EXPECT_EQ(counters.find("conv2d_backward_data.dx")->elements, s.x_size());
}

TEST(Conv2dEmu, TinyOutputsUnderflowInFp16) {
  // 2^-13 is a normal fp16 value; the one product 2^-26 lies below half of
  // the smallest fp16 subnormal 2^-24: the fp16 output is 0 (underflow to
  // zero); 2^-12 * 2^-13 = 2^-25 is exactly half of it, a tie that rounds to
  // the even 0 as well; 3 * 2^-26 rounds up to the subnormal 2^-24.
  const Conv2dShape s{1, 1, 1, 3, 1, 1, 1, 1, 0};
  const std::vector<float> x = {0x1p-13f, 0x1p-12f, 3 * 0x1p-13f}, w = {0x1p-13f};
  std::vector<float> y(3);
  emu::CounterSet counters;
  emu::conv2d_forward_emu(s, x, w, y, policy_of(Accumulation::fp32, kFp16), &counters);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 0x1p-24f);
  EXPECT_EQ(counters.find("conv2d.y")->underflow_to_zero, 2u);
  EXPECT_EQ(counters.find("conv2d.y")->subnormal, 1u);
  emu::conv2d_forward_emu(s, x, w, y, policy_of(Accumulation::fp32, kFp32), nullptr);
  EXPECT_EQ(y[0], 0x1p-26f);
}

TEST(Conv2dEmu, CountingOffGivesTheSameOutputs) {
  const Conv2dShape& s = kShapes[0];
  for (Dir d : kDirs) {
    const auto a = normal_values(a_size(s, d), 31), b = normal_values(b_size(s, d), 32);
    emu::CounterSet counters;
    const auto on = emulate(s, d, a, b, policy_of(Accumulation::fp16, kFp16), &counters);
    const auto off = emulate(s, d, a, b, policy_of(Accumulation::fp16, kFp16), nullptr);
    EXPECT_EQ(on, off) << name(d);
    EXPECT_FALSE(counters.sites().empty());
  }
}

TEST(Conv2d, WrongSizesAndShapesAreRejected) {
  const Conv2dShape s{1, 2, 5, 5, 3, 3, 3, 1, 1};
  std::vector<float> x(s.x_size()), w(s.weight_size()), y(s.y_size()), y_short(s.y_size() - 1), w_long(s.weight_size() + 1);
  std::vector<double> y64(s.y_size());
  auto message = [](auto f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  EXPECT_NE(message([&] { refs::conv2d_forward_ref(s, x, w, y_short); }).find("y has"), std::string::npos);
  EXPECT_NE(message([&] { emu::conv2d_forward_emu(s, x, w_long, y, {}); }).find("weight has"), std::string::npos);
  EXPECT_NE(message([&] { emu::conv2d_backward_data_emu(s, y, w, std::span<float>(x).first(3), {}); }).find("dx has"),
            std::string::npos);
  EXPECT_NE(message([&] { refs::conv2d_backward_filter_ref(s, x, y_short, w); }).find("dy has"), std::string::npos);
  EXPECT_NE(message([&] { emu::conv2d_backward_filter_emu(s, x, y, w_long, {}); }).find("dw has"), std::string::npos);
  Conv2dShape too_big = s;
  too_big.r = 8;  // 5 + 2 < 8
  EXPECT_THROW(refs::conv2d_forward_ref_fp64(too_big, x, w, y64), std::invalid_argument);
  Conv2dShape no_stride = s;
  no_stride.stride = 0;
  EXPECT_THROW(emu::conv2d_forward_emu(no_stride, x, w, y, {}), std::invalid_argument);
}

// --- the GPU (cuDNN) -------------------------------------------------------

#define SKIP_WITHOUT_GPU()                                                        \
  do {                                                                            \
    if (const std::string reason = gpu::gpu_unavailable_reason(); !reason.empty()) \
      GTEST_SKIP() << reason;                                                     \
  } while (0)

std::vector<float> on_gpu(const Conv2dShape& s, Dir d, const std::vector<float>& a, const std::vector<float>& b,
                          gpu::ConvCompute compute) {
  std::vector<float> out(out_size(s, d));
  if (d == Dir::forward) gpu::conv2d_forward_gpu(s, a, b, out, compute);
  else if (d == Dir::data) gpu::conv2d_backward_data_gpu(s, a, b, out, compute);
  else gpu::conv2d_backward_filter_gpu(s, a, b, out, compute);
  return out;
}

TEST(Conv2dGpu, SmallIntegerInputsAreBitExact) {
  SKIP_WITHOUT_GPU();
  // As Conv2dEmu.SmallIntegerInputsAreBitExact: all sums exact in fp16 and fp32.
  const Conv2dShape s{2, 3, 9, 7, 4, 3, 3, 2, 1};
  std::mt19937 rng(6);
  std::uniform_int_distribution<int> small(-4, 4);
  for (Dir d : kDirs) {
    std::vector<float> a(a_size(s, d)), b(b_size(s, d));
    for (auto& v : a) v = float(small(rng));
    for (auto& v : b) v = float(small(rng));
    const auto ref = ref32(s, d, a, b);
    for (auto compute : {gpu::ConvCompute::fp32, gpu::ConvCompute::fp16_fp32_accumulate}) {
      const auto cmp = compare::compare(ref, on_gpu(s, d, a, b, compute), kFp32,
                                        compare::Tolerance::bit_exact("small integers: every sum is exact"));
      EXPECT_TRUE(cmp.passed) << name(d) << " " << gpu::to_string(compute) << ": " << cmp.failure;
    }
  }
}

// Random fp16 inputs: cuDNN (fp16 tensors, fp32 compute, tensor cores) and
// the emulator (plain fp32 accumulation, and the tensor-core model with
// blocks of 8) each within their bound of FP64 (the GPU's accumulation taken
// as the tensor-core model's 2^-21 per step, fp16 output); the bit-identical
// fractions between emulator and GPU are recorded for the report. cuDNN fp32
// (FMA math) within gamma_L(2^-24).
TEST(Conv2dGpu, EmulatorAgainstCudnn) {
  SKIP_WITHOUT_GPU();
  const Conv2dShape s{4, 32, 14, 14, 32, 3, 3, 1, 1};
  RecordProperty("device", gpu::describe_device().name);
  for (Dir d : kDirs) {
    const auto a = fp16_values(a_size(s, d), 41), b = fp16_values(b_size(s, d), 42);
    const std::int64_t L = terms(s, d);
    const double cond = condition(s, d, a, b);
    const auto exact = ref64(s, d, a, b);
    const auto fp16_bound = compare::Tolerance::normwise(emu_bound(L, 0, 0x1p-21, 0x1p-11) * cond,
                                                         "gamma_L(2^-21) and the fp16 output rounding");
    const auto hw = on_gpu(s, d, a, b, gpu::ConvCompute::fp16_fp32_accumulate);
    const auto plain = emulate(s, d, a, b, policy_of(Accumulation::fp32, kFp16));
    const auto tc = emulate(s, d, a, b, policy_of(Accumulation::tensor_core, kFp16));
    for (const auto* side : {&hw, &plain, &tc}) {
      const auto cmp = compare::compare(std::span<const double>(exact), *side, kFp16, fp16_bound);
      EXPECT_TRUE(cmp.passed) << name(d) << ": " << cmp.failure;
    }
    const auto hw32 = on_gpu(s, d, a, b, gpu::ConvCompute::fp32);
    const auto c32 = compare::compare(std::span<const double>(exact), hw32, kFp32,
                                      compare::Tolerance::normwise(compare::gamma(L, 0x1p-24) * cond, "gamma_L(2^-24)"));
    EXPECT_TRUE(c32.passed) << name(d) << " fp32: " << c32.failure;
    const auto exact_tier = compare::Tolerance::bit_exact("emulator against cuDNN");
    const double f_plain = compare::compare(plain, hw, kFp16, exact_tier).bit_identical_fraction;
    const double f_tc = compare::compare(tc, hw, kFp16, exact_tier).bit_identical_fraction;
    RecordProperty(std::string(name(d)) + "_bit_identical_plain_fp32_accumulation", std::to_string(f_plain));
    RecordProperty(std::string(name(d)) + "_bit_identical_tensor_core_model", std::to_string(f_tc));
    std::printf("%s: bit-identical vs cuDNN fp16: plain %.4f, tensor-core model %.4f\n", name(d), f_plain, f_tc);
  }
}

}  // namespace
