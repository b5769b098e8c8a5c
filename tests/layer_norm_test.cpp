// Layer normalisation over the last dimension: the emulated side against the
// FP64 reference within a bound derived below (fp32 and bf16 statistics, fp32
// and bf16 outputs, several shapes and seeds), the FP64 backward against
// finite differences, hand-worked rows (a constant row gives beta; 1..8 gives
// exact statistics), the counters, size errors, and the backends: ref and emu
// compute it, gpu refuses it with the reason.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "emu/block_sum.h"
#include "emu/layer_norm_emu.h"
#include "nn/emu_backend.h"
#include "nn/gpu_backend.h"
#include "nn/ref_backend.h"
#include "refs/layer_norm_ref.h"
#include "support/tensors.h"

namespace {

using namespace mpverify;
using namespace mpverify::test_support;
using ops::LayerNormShape;

constexpr double kU64 = 0x1p-53;
const formats::Format kBf16 = formats::parse_format("bf16");
const formats::Format kFp32 = formats::parse_format("fp32");

double gamma_u(std::int64_t k, double u) { return compare::gamma(k, u); }

// Half the smallest subnormal of f: what one rounding to f can add beyond u |v| in the subnormal range.
double half_subnormal(const formats::Format& f) { return f.min_subnormal() / 2; }

struct Inputs {
  std::vector<float> x, gamma, beta, dy;
};

// bf16 activations with a per-row offset (standard deviation offset_sd) and
// spread; gamma near 1, beta near 0 (P = fp32 holds them).
Inputs inputs(const LayerNormShape& s, std::uint64_t seed, double offset_sd = 3.0) {
  std::mt19937_64 rng(seed);
  const auto F = static_cast<std::size_t>(s.features);
  const auto offset = normal(static_cast<std::size_t>(s.rows), rng, offset_sd);
  const auto spread = normal(static_cast<std::size_t>(s.rows), rng, 0.5);
  auto x = normal(s.size(), rng, 1.0);
  for (std::size_t r = 0; r < static_cast<std::size_t>(s.rows); ++r)
    for (std::size_t j = 0; j < F; ++j) x[r * F + j] = offset[r] + std::exp(spread[r]) * x[r * F + j];
  Inputs in{in_format(std::move(x), kBf16), normal(F, rng, 0.2), normal(F, rng, 0.2), {}};
  for (float& g : in.gamma) g += 1.0f;
  in.dy = in_format(normal(s.size(), rng, 1.0), kBf16);
  return in;
}

// The forward bound (emu/layer_norm_emu.h's model against the exact value), per
// row, with u = u_S, D = block_sum_depth(F, lanes), A = sum |x| / F, c = x - mu:
//   mean:  |mu~ - mu| <= e_mu = gamma_D A + u (|mu| + gamma_D A)
//   d:     |d_j - c_j| <= Delta_j = e_mu + u (|c_j| + e_mu)
//   sq:    |sq~ - sum c^2| <= E_sq = gamma_D sum (|c| + Delta)^2 + sum Delta (2|c| + Delta)
//   var:   E_var = E_sq / F + u (var + E_sq / F);  V = var + eps:
//          |V~ - V| <= E_V = E_var + u eps + u (V + E_var + u eps)  (eps rounded to S, then the addition)
//   rstd:  r~ = V~^(-1/2) (1 + t2) / (1 + t1) (the sqrt's and the reciprocal's roundings), so with
//          e = E_V / V, |r~ / r - 1| <= rho = (1 - e)^(-1/2) (1 + u) / (1 - u) - 1
//   xhat:  xhat~ = fl(d r~): |xhat~ - xhat| <= Z_j = Delta_j r~ + |c_j| rho r + u (|c_j| + Delta_j) r~
//   y:     |y~ - y| <= |gamma_j| Z_j + u_out (|y_j| + |gamma_j| Z_j) + half an output subnormal.
// The FP64 oracle itself errs by gamma_{F+10}(2^-53) (|gamma| (|xhat| + A r) + |beta|) (sums of F terms
// and a few operations), added to every bound.
struct ForwardBound {
  std::vector<double> y, mean, rstd;
};

ForwardBound forward_bound(const LayerNormShape& s, const Inputs& in, const refs::LayerNormForward64& exact,
                           const emu::LayerNormPolicy& policy) {
  const auto F = static_cast<std::size_t>(s.features);
  const double u = policy.statistics.unit_roundoff(), u_out = policy.output.unit_roundoff(), eps = 1e-5;
  const double gD = gamma_u(static_cast<std::int64_t>(emu::block_sum_depth(F, policy.lanes)), u);
  const double g64 = gamma_u(static_cast<std::int64_t>(F) + 10, kU64);
  ForwardBound b{std::vector<double>(s.size()), {}, {}};
  for (std::size_t r = 0; r < static_cast<std::size_t>(s.rows); ++r) {
    const double mu = exact.mean[r], rs = exact.rstd[r];
    double A = 0;
    for (std::size_t j = 0; j < F; ++j) A += std::fabs(in.x[r * F + j]);
    A /= static_cast<double>(F);
    const double e_mu = gD * A + u * (std::fabs(mu) + gD * A);
    std::vector<double> c(F), delta(F);
    double e_sq = 0, var = 0;
    for (std::size_t j = 0; j < F; ++j) {
      c[j] = in.x[r * F + j] - mu;
      delta[j] = e_mu + u * (std::fabs(c[j]) + e_mu);
      e_sq += gD * std::pow(std::fabs(c[j]) + delta[j], 2) + delta[j] * (2 * std::fabs(c[j]) + delta[j]);
      var += c[j] * c[j];
    }
    var /= static_cast<double>(F);
    const double e_var = e_sq / static_cast<double>(F) + u * (var + e_sq / static_cast<double>(F));
    const double V = var + eps, e_V = e_var + u * eps + u * (V + e_var + u * eps);
    EXPECT_LT(e_V, V / 2) << "no a priori bound for row " << r;
    const double rho = std::pow(1 - e_V / V, -0.5) * (1 + u) / (1 - u) - 1, r_emu = rs * (1 + rho);
    for (std::size_t j = 0; j < F; ++j) {
      const double Z = delta[j] * r_emu + std::fabs(c[j]) * rho * rs + u * (std::fabs(c[j]) + delta[j]) * r_emu;
      const double g = std::fabs(in.gamma[j]), y = std::fabs(exact.y[r * F + j]);
      const double oracle = g64 * (g * (std::fabs(c[j]) * rs + A * rs) + std::fabs(in.beta[j]));
      b.y[r * F + j] = g * Z + u_out * (y + g * Z) + half_subnormal(policy.output) + oracle;
    }
    b.mean.push_back(e_mu + g64 * A);
    b.rstd.push_back(rho * rs + g64 * rs);
  }
  return b;
}

// Element by element |got - want| <= bound, and, when `discriminating`, the
// bound is small enough that a wrong formula (a biased/unbiased mix-up moves y
// by 1/F; a missing gamma by 20%) cannot hide in it: below 1% of the values'
// magnitude. Statistics in bf16 (u = 2^-9) have bounds near the values
// themselves: for them the test shows only that the model stays inside its bound.
void expect_within(std::span<const double> want, std::span<const float> got, std::span<const double> bound,
                   const std::string& what, bool discriminating) {
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
  EXPECT_TRUE(std::isfinite(bound_sum)) << what;  // an infinite bound could not fail
  if (discriminating) {
    EXPECT_LT(bound_sum, 1e-2 * value_sum) << what << ": the bound would hide a wrong result";
  }
}

const LayerNormShape kShapes[] = {{8, 64}, {5, 256}, {33, 7}};

// bf16 statistics only on rows centred near 0: with an offset of 3 their
// mean's error (2^-9 of it) is as large as the spread and no a priori bound exists.
struct Policy {
  const char* statistics;
  const char* output;
  double offset_sd;
  bool discriminating;
};
const Policy kPolicies[] = {
    {"fp32", "fp32", 3.0, true},
    {"fp32", "bf16", 3.0, true},
    {"fp32", "fp16", 3.0, true},
    {"bf16", "fp32", 0.0, false},
};

emu::LayerNormPolicy policy_of(const Policy& p) {
  emu::LayerNormPolicy policy;
  policy.input = kBf16;
  policy.statistics = formats::parse_format(p.statistics);
  policy.output = formats::parse_format(p.output);
  return policy;
}

TEST(LayerNormEmu, ForwardWithinItsBoundOfTheFp64Reference) {
  int compared = 0;
  for (const Policy& pol : kPolicies)
    for (const LayerNormShape& s : kShapes)
      for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        const Inputs in = inputs(s, seed, pol.offset_sd);
        const emu::LayerNormPolicy policy = policy_of(pol);
        const auto R = static_cast<std::size_t>(s.rows);
        std::vector<float> y(s.size()), mean(R), rstd(R);
        emu::layer_norm_emu(s, {}, in.x, in.gamma, in.beta, y, mean, rstd, policy);
        const auto exact = refs::layer_norm_fp64(s, {}, widen(in.x), widen(in.gamma), widen(in.beta));
        const ForwardBound b = forward_bound(s, in, exact, policy);
        const std::string what = std::string("stats ") + pol.statistics + " out " + pol.output + " " +
                                 std::to_string(s.rows) + "x" + std::to_string(s.features) + " seed " +
                                 std::to_string(seed);
        expect_within(exact.y, y, b.y, what + " y", pol.discriminating);
        expect_within(exact.mean, mean, b.mean, what + " mean", pol.discriminating);
        expect_within(exact.rstd, rstd, b.rstd, what + " rstd", pol.discriminating);
        ++compared;
      }
  EXPECT_EQ(compared, 4 * 3 * 3);
}

// The backward bound at the same inputs (x, dy, gamma, and the saved mean m and
// rstd r as given), per row with u = u_S, D = block_sum_depth(F, lanes),
// c = x - m, xhat = c r, g = dy gamma, a = sum g, b = sum g xhat:
//   xhat~ = fl(fl(x - m) r): |xhat~ - xhat| <= z = (2u + u^2) |xhat|
//   g~ = fl(dy gamma): |g~ - g| <= u |g|
//   a~: E_a = u sum|g| + gamma_D (1 + u) sum|g|
//   b~: E_b = sum (u |g| (|xhat| + z) + |g| z) + gamma_D (1 + u) sum |g| (|xhat| + z)
//   dx~ = r/F (F g~ - a~ - xhat~ b~) in double, so
//   |dx~ - dx| <= r/F (F u |g| + E_a + z (|b| + E_b) + |xhat| E_b) + gamma_4(2^-53) r/F T,
//          T = F |g~| + |a~| + |xhat~ b~| (bounded with the errors above), then the output rounding
//          u_out (|dx| + that) + half an output subnormal;
//   dgamma_j: sum_rows |dy| z + gamma_DR (1 + u) sum_rows |dy| (|xhat| + z), DR = block_sum_depth(rows, lanes),
//          then u_P |dgamma~|; dbeta_j: gamma_DR sum_rows |dy| + u_P |dbeta~|.
// Plus the FP64 oracle's own error, gamma_{F+10}(2^-53) of the same magnitudes.
struct BackwardBound {
  std::vector<double> dx, dgamma, dbeta;
};

BackwardBound backward_bound(const LayerNormShape& s, const Inputs& in, std::span<const float> mean,
                             std::span<const float> rstd, const refs::LayerNormBackward64& exact,
                             const emu::LayerNormPolicy& policy) {
  const auto F = static_cast<std::size_t>(s.features), R = static_cast<std::size_t>(s.rows);
  const double u = policy.statistics.unit_roundoff(), u_out = policy.output.unit_roundoff();
  const double u_p = policy.parameters.unit_roundoff(), Fd = static_cast<double>(F);
  const double gD = gamma_u(static_cast<std::int64_t>(emu::block_sum_depth(F, policy.lanes)), u);
  const double gR = gamma_u(static_cast<std::int64_t>(emu::block_sum_depth(R, policy.lanes)), u);
  const double g64 = gamma_u(static_cast<std::int64_t>(std::max(F, R)) + 10, kU64);
  BackwardBound out{std::vector<double>(s.size()), std::vector<double>(F, 0.0), std::vector<double>(F, 0.0)};
  std::vector<double> col_dg(F, 0.0), col_dy(F, 0.0);
  for (std::size_t r = 0; r < R; ++r) {
    std::vector<double> xhat(F), z(F), g(F);
    double sum_g = 0, sum_gx = 0, b = 0, tb = 0;
    for (std::size_t j = 0; j < F; ++j) {
      const std::size_t k = r * F + j;
      xhat[j] = (static_cast<double>(in.x[k]) - mean[r]) * rstd[r];
      z[j] = (2 * u + u * u) * std::fabs(xhat[j]);
      g[j] = static_cast<double>(in.dy[k]) * in.gamma[j];
      sum_g += std::fabs(g[j]);
      sum_gx += std::fabs(g[j]) * (std::fabs(xhat[j]) + z[j]);
      b += g[j] * xhat[j];
      tb += u * std::fabs(g[j]) * (std::fabs(xhat[j]) + z[j]) + std::fabs(g[j]) * z[j];
      col_dg[j] += std::fabs(in.dy[k]) * z[j] + gR * (1 + u) * std::fabs(in.dy[k]) * (std::fabs(xhat[j]) + z[j]);
      col_dy[j] += gR * std::fabs(in.dy[k]);
    }
    const double e_a = u * sum_g + gD * (1 + u) * sum_g, e_b = tb + gD * (1 + u) * sum_gx;
    const double scale = rstd[r] / Fd;
    for (std::size_t j = 0; j < F; ++j) {
      const double T = Fd * std::fabs(g[j]) * (1 + u) + sum_g * (1 + u) + e_a +
                       (std::fabs(xhat[j]) + z[j]) * (std::fabs(b) + e_b);
      const double e =
          scale * (Fd * u * std::fabs(g[j]) + e_a + z[j] * (std::fabs(b) + e_b) + std::fabs(xhat[j]) * e_b) +
          gamma_u(4, kU64) * scale * T;
      out.dx[r * F + j] = e + u_out * (std::fabs(exact.dx[r * F + j]) + e) + half_subnormal(policy.output) +
                          g64 * scale * T;
    }
  }
  for (std::size_t j = 0; j < F; ++j) {
    out.dgamma[j] = col_dg[j] + u_p * (std::fabs(exact.dgamma[j]) + col_dg[j]) + g64 * col_dg[j] / gR;
    out.dbeta[j] = col_dy[j] + u_p * (std::fabs(exact.dbeta[j]) + col_dy[j]) + g64 * col_dy[j] / gR;
  }
  return out;
}

TEST(LayerNormEmu, BackwardWithinItsBoundOfTheFp64Reference) {
  int compared = 0;
  for (const Policy& pol : kPolicies)
    for (const LayerNormShape& s : kShapes)
      for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        const Inputs in = inputs(s, seed + 10, pol.offset_sd);
        const emu::LayerNormPolicy policy = policy_of(pol);
        const auto R = static_cast<std::size_t>(s.rows), F = static_cast<std::size_t>(s.features);
        // Saved statistics: the emulator's forward's, values of S.
        std::vector<float> y(s.size()), mean(R), rstd(R);
        emu::layer_norm_emu(s, {}, in.x, in.gamma, in.beta, y, mean, rstd, policy);
        std::vector<float> dx(s.size()), dgamma(F), dbeta(F);
        emu::layer_norm_backward_emu(s, in.x, in.dy, in.gamma, mean, rstd, dx, dgamma, dbeta, policy);
        const auto exact =
            refs::layer_norm_backward_fp64(s, widen(in.x), widen(in.dy), widen(in.gamma), widen(mean), widen(rstd));
        const BackwardBound b = backward_bound(s, in, mean, rstd, exact, policy);
        const std::string what = std::string("stats ") + pol.statistics + " out " + pol.output + " " +
                                 std::to_string(s.rows) + "x" + std::to_string(s.features) + " seed " +
                                 std::to_string(seed);
        expect_within(exact.dx, dx, b.dx, what + " dx", pol.discriminating);
        expect_within(exact.dgamma, dgamma, b.dgamma, what + " dgamma", pol.discriminating);
        expect_within(exact.dbeta, dbeta, b.dbeta, what + " dbeta", pol.discriminating);
        ++compared;
      }
  EXPECT_EQ(compared, 4 * 3 * 3);
}

// L = <y, w> through the FP64 forward (the statistics recomputed from the
// perturbed x, so the mean and variance paths are included), central
// differences with h = 2^-16. y is affine in gamma and beta (no truncation).
// Along x the row's L(t) = sum_j w_j gamma_j (c_j + t v'_j) q(t)^(-1/2) +
// const (v' = v - mean v, q(t) = alpha + 2 beta t + delta t^2): as in
// tests/nn_layers_test's batch_norm_truncation, Cauchy's estimate on the disc
// |t| <= rho = sqrt(alpha / delta) / 4 bounds the truncation by
// h^2 F / (rho - h)^3, F = (|a| + |b| rho) sqrt(16 / (7 alpha)), a = <w gamma, c>,
// b = <w gamma, v'>. Rounding: the FP64 values of L err by at most
// gamma_{F+10}(2^-53) sum |w| (|gamma| (|xhat| + mean|x| rstd) + |beta|),
// twice over 2h; the analytic side (FP64 too) by far less than the 1e-12
// added (its values are below 100, its error a few hundred 2^-53 of them).
TEST(LayerNormRef, BackwardMatchesFiniteDifferences) {
  const LayerNormShape s{3, 6};
  const auto F = static_cast<std::size_t>(s.features);
  std::mt19937_64 rng(21);
  const auto x = widen(normal(s.size(), rng, 1.0)), beta = widen(normal(F, rng, 1.0));
  auto gm = widen(normal(F, rng, 0.3));
  for (double& v : gm) v += 1;
  const auto w = widen(normal(s.size(), rng, 1.0));
  auto loss = [&](const std::vector<double>& xs, const std::vector<double>& gs, const std::vector<double>& bs) {
    const auto f = refs::layer_norm_fp64(s, {}, xs, gs, bs);
    double l = 0;
    for (std::size_t i = 0; i < f.y.size(); ++i) l += f.y[i] * w[i];
    return l;
  };
  const auto fwd = refs::layer_norm_fp64(s, {}, x, gm, beta);
  const auto bwd = refs::layer_norm_backward_fp64(s, x, w, gm, fwd.mean, fwd.rstd);
  const double h = 0x1p-16, g64 = gamma_u(static_cast<std::int64_t>(F) + 10, kU64);
  double magnitude = 0;  // sum |w| (|gamma| (|xhat| + mean|x| rstd) + |beta|)
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t r = i / F;
    double mean_abs = 0;
    for (std::size_t j = 0; j < F; ++j) mean_abs += std::fabs(x[r * F + j]) / static_cast<double>(F);
    const double xhat = (x[i] - fwd.mean[r]) * fwd.rstd[r];
    magnitude += std::fabs(w[i]) * (std::fabs(gm[i % F]) * (std::fabs(xhat) + mean_abs * fwd.rstd[r]) +
                                    std::fabs(beta[i % F]));
  }
  const double rounding = 2 * g64 * magnitude / (2 * h) + 1e-12;
  for (std::size_t i = 0; i < x.size(); ++i) {
    // Truncation along the unit vector e_i: one row moves (c = x - mean, v' = e_i - 1/F).
    const std::size_t r = i / F;
    double a = 0, b = 0, cc = 0, vv = 0;
    for (std::size_t j = 0; j < F; ++j) {
      const double c = x[r * F + j] - fwd.mean[r], v = (r * F + j == i ? 1.0 : 0.0) - 1.0 / static_cast<double>(F);
      a += w[r * F + j] * gm[j] * c;
      b += w[r * F + j] * gm[j] * v;
      cc += c * c;
      vv += v * v;
    }
    const double alpha = cc / static_cast<double>(F) + 1e-5, delta = vv / static_cast<double>(F);
    const double rho = std::sqrt(alpha / delta) / 4;
    ASSERT_LT(h, rho / 2);
    const double truncation =
        h * h * (std::fabs(a) + std::fabs(b) * rho) * std::sqrt(16 / (7 * alpha)) / std::pow(rho - h, 3);
    auto xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    const double fd = (loss(xp, gm, beta) - loss(xm, gm, beta)) / (2 * h);
    EXPECT_NEAR(fd, bwd.dx[i], truncation + rounding) << "dx[" << i << "]";
    EXPECT_LT(truncation + rounding, 1e-2 * std::fabs(bwd.dx[i]) + 1e-6) << "dx[" << i << "]";
  }
  for (std::size_t j = 0; j < F; ++j) {
    auto gp = gm, gn = gm, bp = beta, bn = beta;
    gp[j] += h;
    gn[j] -= h;
    bp[j] += h;
    bn[j] -= h;
    EXPECT_NEAR((loss(x, gp, beta) - loss(x, gn, beta)) / (2 * h), bwd.dgamma[j], rounding) << "dgamma[" << j << "]";
    EXPECT_NEAR((loss(x, gm, bp) - loss(x, gm, bn)) / (2 * h), bwd.dbeta[j], rounding) << "dbeta[" << j << "]";
  }
  EXPECT_LT(rounding, 1e-6);
}

// A constant row has var = 0: rstd = fl(1 / fl(sqrt(fl(1e-5)))), xhat = 0,
// y = beta exactly (in any output format that holds beta). Backward: xhat = 0
// gives dgamma = 0 and dbeta = the column sums of dy (small integers: exact).
TEST(LayerNormEmu, ConstantRowGivesBeta) {
  const LayerNormShape s{2, 5};
  const std::vector<float> x = {3.25f, 3.25f, 3.25f, 3.25f, 3.25f, -1.5f, -1.5f, -1.5f, -1.5f, -1.5f};
  const std::vector<float> gamma = {2, 1, 0.5f, 3, 1}, beta = {0.375f, -1, 0, 2.5f, 0.125f};
  std::vector<float> y(10), mean(2), rstd(2);
  emu::LayerNormPolicy policy;
  policy.input = policy.output = kBf16;
  emu::layer_norm_emu(s, {}, x, gamma, beta, y, mean, rstd, policy);
  EXPECT_EQ(mean[0], 3.25f);
  EXPECT_EQ(mean[1], -1.5f);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(rstd[0]), std::bit_cast<std::uint32_t>(1.0f / std::sqrt(1e-5f)));
  for (std::size_t i = 0; i < 10; ++i) EXPECT_EQ(y[i], beta[i % 5]) << i;
  std::vector<float> ry(10), rmean(2), rrstd(2);
  refs::layer_norm_ref(s, {}, x, gamma, beta, ry, rmean, rrstd);
  EXPECT_EQ(ry, y);
  const std::vector<float> dy = {1, -2, 3, 0, 1, 2, 2, -1, 4, -3};
  std::vector<float> dx(10), dgamma(5), dbeta(5);
  emu::layer_norm_backward_emu(s, x, dy, gamma, mean, rstd, dx, dgamma, dbeta, policy);
  EXPECT_EQ(dgamma, std::vector<float>(5, 0.0f));
  EXPECT_EQ(dbeta, (std::vector<float>{3, 0, 2, 4, -2}));
}

// One row 1..8: sum 36, mean 4.5, squared deviations 42, var 5.25, all exact
// in fp32; rstd takes the three fp32 roundings of the model, which float
// arithmetic (IEEE, correctly rounded sqrt) gives directly. Counts: 8 lane
// additions of a warp's 32 lanes plus 31 tree additions, plus the division:
// 40 each for mean and var, none inexact.
TEST(LayerNormEmu, ExactStatisticsAndCountsByHand) {
  const LayerNormShape s{1, 8};
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8}, gamma(8, 1.0f), beta(8, 0.0f);
  std::vector<float> y(8), mean(1), rstd(1);
  emu::CounterSet counters;
  emu::LayerNormPolicy policy;
  policy.input = policy.output = kFp32;
  emu::layer_norm_emu(s, {}, x, gamma, beta, y, mean, rstd, policy, &counters);
  EXPECT_EQ(mean[0], 4.5f);
  const float want = 1.0f / std::sqrt(5.25f + 1e-5f);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(rstd[0]), std::bit_cast<std::uint32_t>(want));
  EXPECT_EQ(y[0], (1.0f - 4.5f) * want);  // xhat = fl(d r), gamma 1, beta 0: one rounding
  EXPECT_EQ(counters.find("layer_norm.mean")->elements, 40u);
  EXPECT_EQ(counters.find("layer_norm.mean")->inexact, 0u);
  EXPECT_EQ(counters.find("layer_norm.var")->elements, 40u);
  EXPECT_EQ(counters.find("layer_norm.var")->inexact, 0u);
  EXPECT_EQ(counters.find("layer_norm.centered")->inexact, 0u);
  EXPECT_EQ(counters.find("layer_norm.rstd")->elements, 3u);
  EXPECT_EQ(counters.find("layer_norm.rstd")->inexact, 3u);
  EXPECT_EQ(counters.find("layer_norm.x")->elements, 8u);
  EXPECT_EQ(counters.find("layer_norm.y")->elements, 8u);
}

// bf16 input: 1 + 2^-9 is not a bf16 value (8 significant bits) and rounds to 1, counted.
TEST(LayerNormEmu, CountsTheInputRounding) {
  const LayerNormShape s{1, 2};
  const std::vector<float> x = {1.0f + 0x1p-9f, 2.0f}, gamma(2, 1.0f), beta(2, 0.0f);
  std::vector<float> y(2), mean(1), rstd(1);
  emu::CounterSet counters;
  emu::LayerNormPolicy policy;
  policy.input = kBf16;
  emu::layer_norm_emu(s, {}, x, gamma, beta, y, mean, rstd, policy, &counters);
  EXPECT_EQ(counters.find("layer_norm.x")->inexact, 1u);
  EXPECT_EQ(mean[0], 1.5f);
}

TEST(LayerNorm, MismatchedSizesAndDegenerateShapesAreRejected) {
  const LayerNormShape s{2, 3};
  std::vector<float> x(6), y(6), f3(3), f2(2), r2(2);
  EXPECT_THROW(refs::layer_norm_ref(s, {}, x, f2, f3, y, r2, r2), std::invalid_argument);
  try {
    emu::layer_norm_emu(s, {}, x, f3, f3, y, r2, f3);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rstd has 3 elements, expected 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(emu::layer_norm_backward_emu(s, x, std::span<const float>(x).first(5), f3, r2, r2, y, f3, f3),
               std::invalid_argument);
  EXPECT_THROW(emu::layer_norm_emu(LayerNormShape{0, 3}, {}, {}, f3, f3, {}, {}, {}), std::invalid_argument);
}

// ref computes the FP32 reference and refuses another format; emu computes the
// emulated op; gpu has no kernel and says so.
TEST(LayerNormBackends, RefAndEmuComputeItAndGpuRefusesIt) {
  const LayerNormShape s{2, 4};
  const std::vector<float> x = {1, 2, 4, 8, -1, 0, 1, 3}, gamma(4, 1.5f), beta(4, 0.25f);
  std::vector<float> want(8), mean(2), rstd(2), y(8);
  refs::layer_norm_ref(s, {}, x, gamma, beta, want, mean, rstd);
  emu::LayerNormPolicy fp32;
  fp32.input = fp32.output = kFp32;
  nn::RefBackend ref;
  ref.layer_norm(s, {}, x, gamma, beta, y, mean, rstd, fp32, nullptr);
  EXPECT_EQ(y, want);
  EXPECT_THROW(ref.layer_norm(s, {}, x, gamma, beta, y, mean, rstd, emu::LayerNormPolicy{}, nullptr),
               std::invalid_argument);
  nn::EmuBackend emu_backend;
  emu::CounterSet counters;
  emu_backend.layer_norm(s, {}, x, gamma, beta, y, mean, rstd, fp32, &counters);
  EXPECT_NE(counters.find("layer_norm.y"), nullptr);
  nn::GpuBackend gpu;
  try {
    gpu.layer_norm(s, {}, x, gamma, beta, y, mean, rstd, fp32, nullptr);
    ADD_FAILURE() << "the gpu backend ran layer norm";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gpu backend has no layer norm kernel"), std::string::npos) << e.what();
  }
  std::vector<float> dx(8), dg(4), db(4);
  EXPECT_THROW(gpu.layer_norm_backward(s, x, x, gamma, mean, rstd, dx, dg, db, fp32, nullptr), std::invalid_argument);
}

}  // namespace
