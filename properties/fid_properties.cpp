// Properties of FID (src/metrics/fid.h) on random feature sets, N < D included:
// zero on identical sets, symmetry, non-negativity, a pure mean shift by d
// adding exactly ||d||^2, invariance under a random orthogonal rotation of
// both sets, and statistics streamed in batches equal to one pass.
//
// The data are exact by construction: features are z M / 256 with small
// integers z and M (so correlated, often rank-deficient), shifts are
// multiples of 1/16, and rotations are products of Householder reflections
// I - v v^T / 2 with v = +-1 on four coordinates (entries 0, +-1/2, +-1: a
// product of 24 of them has entries that are multiples of 2^-24). Every
// shifted or rotated feature is then computed exactly in double (fewer than
// 53 significant bits), so a property's two sides differ only by what the
// FID computation itself rounds, which the error model below bounds.
//
// Error model. FID is the squared 2-Wasserstein distance W between the two
// fitted Gaussians, and W is a metric. A computed FID is (up to the final
// sums) the exact FID of Gaussians whose means and covariances are perturbed:
// - means: each a sum of n terms of magnitude <= s (s = max |feature|),
//   merged over k batches: |error| <= gamma_{n+k+1} s per component, so the
//   mean moves by at most w_mean = sqrt(D) gamma_{n+k+1} s, and W with it;
// - covariances: each entry a sum of n products of centred values (<= 2s),
//   divided by n - 1 <= n / 2, plus the mean's error carried through:
//   |E_ij| <= 16 gamma_{n+k+3} s^2; and the eigen-decomposition's backward
//   error, a perturbation of norm <= 8 D u ||S|| <= 8 D u Tr(S) (Golub & Van
//   Loan 8.3; 8 D is our allowance for its "modest multiple" of D). The
//   covariance part of W^2 moves by at most the trace norm of the
//   perturbation (Powers-Stormer: Tr A + Tr B - 2 Tr|A^1/2 B^1/2| <=
//   ||A - B||_1), which is <= D ||E||_2 <= D (D max|E_ij| + 8 D u Tr S);
// - the SVD's singular values are within 8 D u ||M|| each (D of them) and
//   the final sums of <= 2D + 4 terms add gamma_{2D+4}: e_final =
//   (gamma_{2D+4} + 8 D^2 u) (mean term + Tr S_a + Tr S_b + 2 trace term).
// Hence |sqrt(FID computed) - sqrt(FID exact)| <= w_a + w_b + sqrt(e_final)
// with w = w_mean + sqrt(D (D 16 gamma s^2 + 8 D u Tr S)). Two computations
// of the same exact FID differ by at most the sum of both bounds (in sqrt
// space: these are distances). The bound is worst-case, so far above the
// ~1e-13 actually seen on full-rank inputs; it is still orders of magnitude
// below what a wrong formula gives (an error of O(Tr S)).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "check_count.h"
#include "data/random.h"
#include "generators.h"
#include "metrics/fid.h"
#include "metrics/fid_features.h"

namespace {

using namespace mpverify::metrics;
using mpverify::properties::expect_checks;
namespace gen = mpverify::properties::gen;

constexpr double kU = 0x1p-53;

double gamma_k(double k) { return k * kU / (1.0 - k * kU); }

struct Set {
  std::vector<double> x;
  std::size_t rows = 0, cols = 0;
  FeatureMatrix view() const { return {x, rows, cols, "X"}; }
};

// n x d features z M / 256: z in [-64, 64], M in [-4, 4] with each column of M
// zero with probability 1/4 (rank deficiency beyond N < D).
Set random_set(std::size_t n, std::size_t d, std::uint64_t seed) {
  mpverify::data::Draws draws(seed, 0);
  std::vector<double> m(d * d);
  for (std::size_t j = 0; j < d; ++j) {
    const bool zero_column = draws.below(4) == 0;
    for (std::size_t i = 0; i < d; ++i) m[i * d + j] = zero_column ? 0.0 : static_cast<double>(draws.below(9)) - 4.0;
  }
  Set s{std::vector<double>(n * d), n, d};
  std::vector<double> z(d);
  for (std::size_t r = 0; r < n; ++r) {
    for (double& v : z) v = static_cast<double>(draws.below(129)) - 64.0;
    for (std::size_t j = 0; j < d; ++j) {
      double sum = 0.0;
      for (std::size_t i = 0; i < d; ++i) sum += z[i] * m[i * d + j];
      s.x[r * d + j] = sum / 256.0;
    }
  }
  return s;
}

// Rows multiplied by a product of 24 Householder reflections I - v v^T / 2,
// v = +-1 on four distinct coordinates (for D < 4, I - 2 e e^T and the swap
// I - (e_i - e_j)(e_i - e_j)^T): exactly orthogonal, applied exactly.
struct Rotation {
  std::vector<std::vector<std::pair<std::size_t, double>>> reflections;
};

Rotation random_rotation(std::size_t d, std::uint64_t seed) {
  mpverify::data::Draws draws(seed, 1);
  Rotation q;
  for (int k = 0; k < 24; ++k) {
    std::vector<std::size_t> coords(d);
    for (std::size_t i = 0; i < d; ++i) coords[i] = i;
    const std::size_t support = d >= 4 ? 4 : (d >= 2 && draws.below(2) ? 2 : 1);
    std::vector<std::pair<std::size_t, double>> v;
    for (std::size_t i = 0; i < support; ++i) {
      std::swap(coords[i], coords[i + draws.below(d - i)]);
      v.push_back({coords[i], draws.below(2) ? 1.0 : -1.0});
    }
    q.reflections.push_back(v);
  }
  return q;
}

Set rotated(const Set& s, const Rotation& q) {
  Set out = s;
  for (std::size_t r = 0; r < s.rows; ++r) {
    double* row = &out.x[r * s.cols];
    for (const auto& v : q.reflections) {
      // H = I - 2 v v^T / ||v||^2 with ||v||^2 = support size (4, 2 or 1).
      double dot = 0.0;
      for (const auto& [i, sign] : v) dot += row[i] * sign;
      const double factor = 2.0 * dot / static_cast<double>(v.size());
      for (const auto& [i, sign] : v) row[i] -= factor * sign;
    }
  }
  return out;
}

// The W-space bound of one set's statistics (see the top of the file).
double set_bound(const Set& s, double trace, std::size_t batches = 1) {
  double max_abs = 0.0;
  for (const double v : s.x) max_abs = std::max(max_abs, std::abs(v));
  const double d = static_cast<double>(s.cols), n = static_cast<double>(s.rows), k = static_cast<double>(batches);
  const double w_mean = std::sqrt(d) * gamma_k(n + k + 1.0) * max_abs;
  const double entry = 16.0 * gamma_k(n + k + 3.0) * max_abs * max_abs;
  return w_mean + std::sqrt(d * (d * entry + 8.0 * d * kU * trace));
}

double final_bound(const FidResult& r) {
  const double d = static_cast<double>(r.dims);
  return std::sqrt((gamma_k(2.0 * d + 4.0) + 8.0 * d * d * kU) *
                   (r.mean_term + r.trace_a + r.trace_b + 2.0 * r.trace_sqrt));
}

// |sqrt(computed) - sqrt(exact)| for FID(a, b) computed as r.
double distance_bound(const Set& a, const Set& b, const FidResult& r, std::size_t batches = 1) {
  return set_bound(a, r.trace_a, batches) + set_bound(b, r.trace_b, batches) + final_bound(r);
}

struct Pair {
  Set a, b;
};

rc::Gen<Pair> random_pair() {
  return rc::gen::exec([] {
    const auto d = static_cast<std::size_t>(*gen::uniform(1, 24));
    const auto na = static_cast<std::size_t>(*gen::uniform(2, 60));
    const auto nb = static_cast<std::size_t>(*gen::uniform(2, 60));
    const auto seed = *rc::gen::arbitrary<std::uint64_t>();
    return Pair{random_set(na, d, seed), random_set(nb, d, seed ^ 0x9e3779b97f4a7c15ull)};
  });
}

}  // namespace

RC_GTEST_PROP(FidProperties, ZeroOnIdenticalSets, ()) {
  auto& checks = expect_checks(100);
  const Pair p = *random_pair();
  const FidResult r = fid(p.a.view(), p.a.view());
  const double w = distance_bound(p.a, p.a, r);
  RC_ASSERT(r.mean_term == 0.0);
  RC_ASSERT(std::sqrt(r.fid) <= w);
  checks.count();
}

RC_GTEST_PROP(FidProperties, Symmetric, ()) {
  auto& checks = expect_checks(100);
  const Pair p = *random_pair();
  const FidResult ab = fid(p.a.view(), p.b.view()), ba = fid(p.b.view(), p.a.view());
  RC_ASSERT(ab.mean_term == ba.mean_term);
  RC_ASSERT(std::abs(std::sqrt(ab.fid) - std::sqrt(ba.fid)) <=
            distance_bound(p.a, p.b, ab) + distance_bound(p.b, p.a, ba));
  checks.count();
}

RC_GTEST_PROP(FidProperties, NonNegativeBeforeTheClampAtZero, ()) {
  // fid is max(0, fid_raw), so fid >= 0 says nothing; the raw value is the
  // exact FID (>= 0) of perturbed PSD Gaussians plus the final sums' error,
  // and the clamped eigenvalues' traces differ from Tr S by <= D times the
  // eigen solver's backward error: fid_raw >= -(e_final + 8 D^2 u (Tr S_a + Tr S_b)).
  auto& checks = expect_checks(100);
  const Pair p = *random_pair();
  for (const TraceRoute route : {TraceRoute::nuclear_norm, TraceRoute::symmetric_eigen}) {
    const FidResult r = fid(p.a.view(), p.b.view(), route);
    const double d = static_cast<double>(r.dims);
    const double e = final_bound(r);
    RC_ASSERT(r.fid >= 0.0);
    RC_ASSERT(std::isfinite(r.fid_raw));
    RC_ASSERT(r.fid_raw >= -(e * e + 8.0 * d * d * kU * (r.trace_a + r.trace_b)));
    checks.count();
  }
}

RC_GTEST_PROP(FidProperties, MeanShiftAddsExactlyTheSquaredNorm, ()) {
  auto& checks = expect_checks(100);
  const Pair p = *random_pair();
  mpverify::data::Draws draws(*rc::gen::arbitrary<std::uint64_t>(), 2);
  std::vector<double> shift(p.a.cols);
  double norm2 = 0.0;  // multiples of 2^-8, at most 24 * 16: exact
  for (double& v : shift) {
    v = (static_cast<double>(draws.below(129)) - 64.0) / 16.0;
    norm2 += v * v;
  }
  Set shifted = p.a;
  for (std::size_t r = 0; r < shifted.rows; ++r)
    for (std::size_t j = 0; j < shifted.cols; ++j) shifted.x[r * shifted.cols + j] += shift[j];  // exact
  const FidResult r = fid(p.a.view(), shifted.view());
  // Same covariance in exact arithmetic, so the exact FID is ||d||^2.
  RC_ASSERT(std::abs(std::sqrt(r.fid) - std::sqrt(norm2)) <= distance_bound(p.a, shifted, r));
  checks.count();
}

RC_GTEST_PROP(FidProperties, InvariantUnderARotationOfBothSets, ()) {
  auto& checks = expect_checks(90);
  const Pair p = *random_pair();
  const Rotation q = random_rotation(p.a.cols, *rc::gen::arbitrary<std::uint64_t>());
  const Set ra = rotated(p.a, q), rb = rotated(p.b, q);
  const FidResult before = fid(p.a.view(), p.b.view()), after = fid(ra.view(), rb.view());
  RC_ASSERT(std::abs(std::sqrt(before.fid) - std::sqrt(after.fid)) <=
            distance_bound(p.a, p.b, before) + distance_bound(ra, rb, after));
  // Counted only when the rotation moved the probe (1, 2, ..., D): the
  // reflections generate a finite group, so a product can be the identity.
  Set probe{std::vector<double>(p.a.cols), 1, p.a.cols};
  for (std::size_t j = 0; j < p.a.cols; ++j) probe.x[j] = static_cast<double>(j + 1);
  if (rotated(probe, q).x != probe.x) checks.count();
}

RC_GTEST_PROP(FidProperties, StreamedBatchesEqualOnePass, ()) {
  auto& checks = expect_checks(100);
  const Pair p = *random_pair();
  const Set& s = p.a;
  FeatureStats one(s.cols), streamed(s.cols);
  one.add_batch(s.x, s.rows);
  std::size_t batches = 0;
  for (std::size_t start = 0; start < s.rows; ++batches) {
    const auto n = std::min<std::size_t>(s.rows - start, static_cast<std::size_t>(*gen::uniform(1, 16)));
    streamed.add_batch(std::span<const double>(s.x).subspan(start * s.cols, n * s.cols), n);
    start += n;
  }
  const GaussianStats g1 = one.gaussian(), g2 = streamed.gaussian();
  RC_ASSERT(g2.count == s.rows);
  double max_abs = 0.0;
  for (const double v : s.x) max_abs = std::max(max_abs, std::abs(v));
  const double k = static_cast<double>(batches), n = static_cast<double>(s.rows);
  for (std::size_t j = 0; j < s.cols; ++j)
    RC_ASSERT(std::abs(g1.mean[j] - g2.mean[j]) <= 2.0 * gamma_k(n + k + 1.0) * max_abs);
  for (std::size_t i = 0; i < g1.covariance.size(); ++i)
    RC_ASSERT(std::abs(g1.covariance[i] - g2.covariance[i]) <= 2.0 * 16.0 * gamma_k(n + k + 3.0) * max_abs * max_abs);
  const FidResult f1 = frechet_distance(g1, gaussian_stats(p.b.view()));
  const FidResult f2 = frechet_distance(g2, gaussian_stats(p.b.view()));
  RC_ASSERT(std::abs(std::sqrt(f1.fid) - std::sqrt(f2.fid)) <=
            distance_bound(s, p.b, f1) + distance_bound(s, p.b, f2, batches));
  checks.count();
}

RC_GTEST_PROP(FidProperties, RoutesAgree, ()) {
  // Both routes compute the same exact FID, each within the W-space bound of
  // the error model; the symmetric route adds the square roots of up to D
  // noise eigenvalues of A S_b A, each noise at most 8 D u ||A||^2 ||S_b|| <=
  // 8 D u Tr S_a Tr S_b, in the trace term (twice in FID): up to
  // 2 D sqrt(8 D u Tr S_a Tr S_b) of FID. (This property caught Eigen 3.4.0's
  // BDCSVD returning wrong singular values; see nuclear_norm in fid.cpp.)
  auto& checks = expect_checks(100);
  const Pair p = *random_pair();
  const FidResult n = fid(p.a.view(), p.b.view(), TraceRoute::nuclear_norm);
  const FidResult e = fid(p.a.view(), p.b.view(), TraceRoute::symmetric_eigen);
  const double d = static_cast<double>(n.dims);
  const double w = distance_bound(p.a, p.b, n) + distance_bound(p.a, p.b, e);
  const double sqrt_noise = 2.0 * d * std::sqrt(8.0 * d * kU * n.trace_a * n.trace_b);
  const double sa = std::sqrt(n.fid), se = std::sqrt(e.fid);
  RC_ASSERT(std::abs(n.fid - e.fid) <= w * (sa + se + w) + sqrt_noise);
  checks.count();
}
