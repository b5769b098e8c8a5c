// FID, KID and the FID bootstrap (src/metrics/): closed forms and direct
// computations that do not go through the library, singular inputs, the
// clamping report, KID against a straightforward O(n^2) loop, bootstrap
// determinism, input errors, and agreement with pytorch-fid's scipy recipe
// (tests/scripts/scipy_fid.py). Statistics files (.npz mu, sigma): a
// hand-computed case and the reader's refusals (float64 files, numpy's own
// writers and scipy: tests/python/fid_statistics_test.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "data/random.h"
#include "metrics/fid.h"
#include "metrics/fid_bootstrap.h"
#include "metrics/fid_features.h"
#include "metrics/fid_statistics.h"
#include "metrics/kid.h"
#include "io/npz.h"
#include "support/run_command.h"

namespace {

namespace fs = std::filesystem;
using namespace mpverify::metrics;

constexpr double kU = 0x1p-53;  // unit roundoff of double
constexpr TraceRoute kRoutes[] = {TraceRoute::nuclear_norm, TraceRoute::symmetric_eigen};

// Rows x cols features: mean + z L, z unit noise, L lower triangular with a
// diagonal in [1, 2] and off-diagonal entries of about 0.3: covariance L^T L
// (full rank, condition number below ~100 for the sizes used).
std::vector<double> correlated_features(std::size_t rows, std::size_t cols, std::uint64_t seed, double mean = 0.0) {
  mpverify::data::Draws draws(seed, 0);
  std::vector<double> l(cols * cols, 0.0);
  for (std::size_t i = 0; i < cols; ++i)
    for (std::size_t j = 0; j <= i; ++j) l[i * cols + j] = i == j ? draws.uniform(1.0, 2.0) : 0.3 * draws.noise() / static_cast<double>(cols) * 4.0;
  std::vector<double> x(rows * cols, 0.0);
  std::vector<double> z(cols);
  for (std::size_t r = 0; r < rows; ++r) {
    for (double& v : z) v = draws.noise();
    for (std::size_t j = 0; j < cols; ++j) {
      double s = mean + 0.1 * static_cast<double>(j);
      for (std::size_t i = j; i < cols; ++i) s += z[i] * l[i * cols + j];
      x[r * cols + j] = s;
    }
  }
  return x;
}

FeatureMatrix view(const std::vector<double>& v, std::size_t cols, const char* name = "features") {
  return {v, v.size() / cols, cols, name};
}

GaussianStats diagonal_stats(std::vector<double> mean, const std::vector<double>& variances) {
  GaussianStats g;
  const std::size_t d = variances.size();
  g.mean = std::move(mean);
  g.covariance.assign(d * d, 0.0);
  for (std::size_t i = 0; i < d; ++i) g.covariance[i * d + i] = variances[i];
  return g;
}

// Tolerance for the closed-form checks on full-rank statistics of D dimensions:
// every part of FID is a sum of at most D terms (error <= gamma_D times the
// sum of magnitudes), or eigen/singular values of a D x D matrix, whose
// backward error is a small multiple p(D) u ||M|| (Golub & Van Loan, 8.3 and
// 8.6; p(D) = 8 D is taken here). The parts then enter a sum of 4 terms. So
// |error| <= 16 D u (mean term + Tr S_a + Tr S_b + 2 trace term), written with
// the computed parts as the scale.
double closed_form_tolerance(const FidResult& r) {
  const double scale = r.mean_term + r.trace_a + r.trace_b + 2.0 * r.trace_sqrt;
  return 16.0 * static_cast<double>(r.dims) * kU * scale;
}

TEST(Fid, DiagonalCovariancesMatchTheDirectFormula) {
  // Diagonal covariances commute: FID = ||mu_a - mu_b||^2 + sum_i (sqrt(a_i) - sqrt(b_i))^2.
  const std::vector<double> va = {1.0, 2.5, 0.25, 9.0, 3.0, 0.0}, vb = {4.0, 0.5, 0.25, 1.0, 7.5, 2.0};
  const std::vector<double> ma = {0.5, -1.0, 2.0, 0.0, 1.5, -0.25}, mb = {0.0, 1.0, 2.0, 3.0, -1.5, 0.75};
  double direct = 0.0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    direct += (ma[i] - mb[i]) * (ma[i] - mb[i]);
    direct += (std::sqrt(va[i]) - std::sqrt(vb[i])) * (std::sqrt(va[i]) - std::sqrt(vb[i]));
  }
  for (const TraceRoute route : kRoutes) {
    const FidResult r = frechet_distance(diagonal_stats(ma, va), diagonal_stats(mb, vb), route);
    EXPECT_NEAR(r.fid, direct, closed_form_tolerance(r)) << to_string(route);
    EXPECT_EQ(r.dims, 6u);
    EXPECT_EQ(r.clamping.count, 0u) << "no negative eigenvalue in diagonal, non-negative covariances";
  }
}

TEST(Fid, OneDimensionalFeaturesAreHandWorked) {
  // A = {0, 2}: mean 1, sample variance 2; B = {0, 4}: mean 2, variance 8.
  // FID = (1 - 2)^2 + (sqrt 2 - sqrt 8)^2 = 1 + (sqrt 2)^2 = 3.
  const std::vector<double> a = {0.0, 2.0}, b = {0.0, 4.0};
  for (const TraceRoute route : kRoutes) {
    const FidResult r = fid(view(a, 1, "A"), view(b, 1, "B"), route);
    EXPECT_NEAR(r.fid, 3.0, closed_form_tolerance(r)) << to_string(route);
    EXPECT_EQ(r.mean_term, 1.0);
    EXPECT_EQ(r.trace_a, 2.0);  // the N - 1 denominator: (1 + 1) / 1
    EXPECT_EQ(r.trace_b, 8.0);
    EXPECT_EQ(r.n_a, 2u);
    EXPECT_EQ(r.n_b, 2u);
  }
}

TEST(Fid, ScaledCovarianceHasTheClosedForm) {
  // S_b = c^2 S_a commutes with S_a: Tr((S_a S_b)^1/2) = c Tr(S_a), so
  // FID = ||mu_a - mu_b||^2 + (1 - c)^2 Tr(S_a). Here c = 2, Tr(S_a) = 7, the
  // means differ by (1, 1, 0): FID = 2 + 7 = 9.
  GaussianStats a, b;
  a.mean = {0.0, 0.0, 1.0};
  b.mean = {1.0, 1.0, 1.0};
  a.covariance = {2.0, 1.0, 0.5, 1.0, 3.0, -0.5, 0.5, -0.5, 2.0};
  b.covariance = a.covariance;
  for (double& v : b.covariance) v *= 4.0;
  for (const TraceRoute route : kRoutes) {
    const FidResult r = frechet_distance(a, b, route);
    EXPECT_NEAR(r.fid, 9.0, closed_form_tolerance(r)) << to_string(route);
    EXPECT_NEAR(r.trace_sqrt, 14.0, closed_form_tolerance(r)) << to_string(route);
  }
}

TEST(Fid, RotatedCommutingCovariancesHaveTheClosedForm) {
  // S_a = Q diag(a) Q^T, S_b = Q diag(b) Q^T with Q the rotation by angle t:
  // FID (equal means) = sum (sqrt(a_i) - sqrt(b_i))^2. The rotated matrices
  // are rounded, which moves the exact FID by at most ~u ||S|| (a
  // perturbation inside the closed-form tolerance's backward error).
  const double t = 0.7, c = std::cos(t), s = std::sin(t);
  const double a1 = 9.0, a2 = 1.0, b1 = 4.0, b2 = 16.0;
  auto rotated = [&](double l1, double l2) {
    GaussianStats g;
    g.mean = {0.25, -0.5};
    g.covariance = {c * c * l1 + s * s * l2, c * s * (l1 - l2), c * s * (l1 - l2), s * s * l1 + c * c * l2};
    return g;
  };
  const double expected = (3.0 - 2.0) * (3.0 - 2.0) + (1.0 - 4.0) * (1.0 - 4.0);
  for (const TraceRoute route : kRoutes) {
    const FidResult r = frechet_distance(rotated(a1, a2), rotated(b1, b2), route);
    EXPECT_NEAR(r.fid, expected, closed_form_tolerance(r)) << to_string(route);
  }
}

TEST(Fid, IdenticalFullRankSetsGiveZeroWithoutClamping) {
  const std::vector<double> x = correlated_features(200, 16, 11);
  for (const TraceRoute route : kRoutes) {
    const FidResult r = fid(view(x, 16), view(x, 16), route);
    EXPECT_EQ(r.clamping.count, 0u) << to_string(route) << ": a full-rank covariance has no negative eigenvalue";
    EXPECT_EQ(r.mean_term, 0.0);
    EXPECT_GE(r.fid, 0.0);
    // Cancellation of Tr S_a + Tr S_b - 2 trace term, each part within the
    // closed-form tolerance.
    EXPECT_LE(std::abs(r.fid_raw), closed_form_tolerance(r)) << to_string(route);
  }
}

TEST(Fid, SingularInputsStayRealAndNonNegative) {
  // Fewer samples than dimensions: rank <= N - 1 < D, pytorch-fid's sqrtm
  // case that needs an eps offset or returns complex values.
  const std::size_t d = 40;
  const std::vector<double> x = correlated_features(12, d, 21), y = correlated_features(9, d, 22, 0.5);
  for (const TraceRoute route : kRoutes) {
    const FidResult r = fid(view(x, d, "A"), view(y, d, "B"), route);
    EXPECT_TRUE(std::isfinite(r.fid)) << to_string(route);
    EXPECT_GE(r.fid, 0.0) << to_string(route);
    EXPECT_GT(r.fid, 1.0) << to_string(route) << ": different sets";
    EXPECT_TRUE(std::isfinite(r.trace_sqrt));
    EXPECT_GE(r.trace_sqrt, 0.0);
  }
  // The two routes agree up to the sqrt(eps)-sized effect of rounding on the
  // null spaces (fid.h): each of the <= 2D noise eigenvalues of size <= 16 D u
  // ||S|| changes the trace term by at most its square root times ||S||^1/2.
  const FidResult n = fid(view(x, d), view(y, d), TraceRoute::nuclear_norm);
  const FidResult e = fid(view(x, d), view(y, d), TraceRoute::symmetric_eigen);
  const double scale = n.trace_a + n.trace_b;
  EXPECT_NEAR(n.fid, e.fid, 2.0 * 2.0 * static_cast<double>(d) * std::sqrt(16.0 * static_cast<double>(d) * kU) * scale);
}

TEST(Fid, IdenticalSingularSetsGiveZeroAndReportTheClamping) {
  const std::size_t d = 48;
  const std::vector<double> x = correlated_features(10, d, 31);
  const FidResult r = fid(view(x, d), view(x, d), TraceRoute::nuclear_norm);
  // Rank 9 of 48: the 39 null eigenvalues come out as +-(rounding noise); the
  // negative ones, in both decompositions (the same matrix twice), are
  // clamped and reported, at most 2 (D - rank) of them, each no larger than
  // the eigen solver's backward error 8 D u ||S|| (||S|| <= Tr S).
  EXPECT_LE(r.clamping.count, 2 * (d - 9));
  EXPECT_EQ(r.clamping.count % 2, 0u) << "the same matrix decomposed twice clamps the same eigenvalues";
  EXPECT_LE(r.clamping.largest_magnitude, 8.0 * static_cast<double>(d) * kU * r.trace_a);
  EXPECT_GE(r.fid, 0.0);
  // On the nuclear route the noise meets noise: F F^T = diag(l) up to the
  // eigenvectors' orthogonality (8 D u), so the trace term equals sum(l) to
  // D * 8 D u ||S||, and sum(l) equals Tr S to the same order.
  EXPECT_LE(std::abs(r.fid_raw), 2.0 * 16.0 * static_cast<double>(d * d) * kU * r.trace_a);
  // The symmetric route cannot promise that: the square roots of its noise
  // eigenvalues (~ 8 D u ||S||^2) are ~ sqrt(8 D u) ||S|| each, up to D of
  // them, with either sign before the clamp at 0.
  const FidResult e = fid(view(x, d), view(x, d), TraceRoute::symmetric_eigen);
  EXPECT_GE(e.fid, 0.0);
  EXPECT_LE(std::abs(e.fid_raw), 2.0 * static_cast<double>(d) * std::sqrt(8.0 * static_cast<double>(d) * kU) * e.trace_a);
}

TEST(Fid, NegativeEigenvaluesOfGivenStatisticsAreClampedAndReported) {
  // S_a = diag(1, 4, -1e-13): the clamped S_a is diag(1, 4, 0); with S_b = I,
  // trace term 1 + 2 + 0 = 3 and FID = (5 - 1e-13) + 3 - 6 = 2 - 1e-13.
  const GaussianStats a = diagonal_stats({0, 0, 0}, {1.0, 4.0, -1e-13});
  const GaussianStats b = diagonal_stats({0, 0, 0}, {1.0, 1.0, 1.0});
  for (const TraceRoute route : kRoutes) {
    const FidResult r = frechet_distance(a, b, route);
    EXPECT_EQ(r.clamping.count, 1u) << to_string(route);
    EXPECT_EQ(r.clamping.largest_magnitude, 1e-13) << to_string(route);
    EXPECT_EQ(r.clamping.largest_relative, 1e-13 / 4.0) << to_string(route);
    EXPECT_NEAR(r.fid, 2.0 - 1e-13, closed_form_tolerance(r)) << to_string(route);
  }
}

TEST(Fid, RoutesAgreeOnWellConditionedFeatures) {
  const std::vector<double> x = correlated_features(400, 24, 41), y = correlated_features(300, 24, 42, 0.25);
  const FidResult n = fid(view(x, 24), view(y, 24), TraceRoute::nuclear_norm);
  const FidResult e = fid(view(x, 24), view(y, 24), TraceRoute::symmetric_eigen);
  EXPECT_EQ(n.mean_term, e.mean_term);
  EXPECT_NEAR(n.trace_sqrt, e.trace_sqrt, closed_form_tolerance(n));
  EXPECT_NEAR(n.fid, e.fid, closed_form_tolerance(n) + closed_form_tolerance(e));
}

TEST(FeatureStats, BatchesEqualOnePassAndTheTwoPassFormula) {
  const std::size_t d = 5, rows = 37;
  const std::vector<double> x = correlated_features(rows, d, 51, 100.0);  // a large mean: the one-pass formula would cancel
  // The two-pass formula in the test: mean, then the centred products / (N - 1).
  std::vector<double> mean(d, 0.0), cov(d * d, 0.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < d; ++j) mean[j] += x[r * d + j];
  for (double& m : mean) m /= static_cast<double>(rows);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t i = 0; i < d; ++i)
      for (std::size_t j = 0; j < d; ++j) cov[i * d + j] += (x[r * d + i] - mean[i]) * (x[r * d + j] - mean[j]);
  for (double& c : cov) c /= static_cast<double>(rows - 1);

  FeatureStats batched(d);
  for (std::size_t start = 0; start < rows;) {
    const std::size_t n = std::min<std::size_t>(rows - start, 1 + start % 7);  // batches of 1, 2, 4, ... rows
    batched.add_batch(std::span<const double>(x).subspan(start * d, n * d), n);
    start += n;
  }
  const GaussianStats g = batched.gaussian();
  ASSERT_EQ(g.count, rows);
  // Each mean is a sum of N terms of magnitude <= s = max |x| (error gamma_N s)
  // and each covariance entry a sum of N products of centred values of
  // magnitude <= c = max |x - mean| (gamma_{N+3} c^2 N / (N - 1), the merges'
  // correction terms included; both computations carry that error, hence 2x).
  double s = 0.0, c = 0.0;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < d; ++j) {
      s = std::max(s, std::abs(x[r * d + j]));
      c = std::max(c, std::abs(x[r * d + j] - mean[j]));
    }
  const double gamma = static_cast<double>(rows + 3) * kU / (1.0 - static_cast<double>(rows + 3) * kU);
  for (std::size_t j = 0; j < d; ++j) EXPECT_NEAR(g.mean[j], mean[j], 2.0 * gamma * s);
  for (std::size_t k = 0; k < d * d; ++k) EXPECT_NEAR(g.covariance[k], cov[k], 2.0 * 2.0 * gamma * c * c * 2.0);
  // The same rows in one batch, and two halves merged.
  FeatureStats first(d), second(d);
  first.add_batch(std::span<const double>(x).subspan(0, 20 * d), 20);
  second.add_batch(std::span<const double>(x).subspan(20 * d), rows - 20);
  first.merge(second);
  const GaussianStats merged = first.gaussian();
  for (std::size_t k = 0; k < d * d; ++k) EXPECT_NEAR(merged.covariance[k], cov[k], 2.0 * 2.0 * gamma * c * c * 2.0);
}

TEST(FeatureStats, RejectsBadInputWithItsPlace) {
  std::vector<double> x = correlated_features(6, 3, 61);
  FeatureStats s(3, "A");
  s.add_batch(std::span<const double>(x).subspan(0, 9), 3);
  x[4 * 3 + 2] = std::nan("");
  try {
    s.add_batch(std::span<const double>(x).subspan(9), 3);
    FAIL() << "a NaN was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("A: non-finite value nan at row 4, column 2"), std::string::npos) << m;
  }
  EXPECT_EQ(s.count(), 3u) << "nothing of the rejected batch was added";
  EXPECT_THROW(s.add_batch(std::span<const double>(x).subspan(0, 5), 2), std::invalid_argument);
  EXPECT_THROW(FeatureStats(0), std::invalid_argument);
}

TEST(Fid, RejectsBadFeatureMatrices) {
  const std::vector<double> a = correlated_features(5, 4, 71), b = correlated_features(5, 3, 72);
  try {
    fid(view(a, 4, "A"), view(b, 3, "B"));
    FAIL() << "a dimension mismatch was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("A has 4 feature dimensions (columns) but B has 3"), std::string::npos)
        << e.what();
  }
  const std::vector<double> one_row(a.begin(), a.begin() + 4);
  try {
    fid(view(one_row, 4, "A"), view(a, 4, "B"));
    FAIL() << "a single row was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("A: 1 rows (samples); at least 2"), std::string::npos) << e.what();
  }
  std::vector<double> inf = a;
  inf[2 * 4 + 1] = -INFINITY;
  try {
    fid(view(a, 4, "A"), view(inf, 4, "B"));
    FAIL() << "an infinity was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("B: non-finite value -inf at row 2, column 1"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(fid(FeatureMatrix{a, 3, 4, "A"}, view(a, 4)), std::invalid_argument);  // 20 values, not 12
  GaussianStats bad = diagonal_stats({0, 0}, {1, 1});
  bad.covariance.pop_back();
  EXPECT_THROW(frechet_distance(bad, diagonal_stats({0, 0}, {1, 1})), std::invalid_argument);
  EXPECT_THROW(parse_trace_route("sqrtm"), std::invalid_argument);
  EXPECT_EQ(parse_trace_route("symmetric-eigen"), TraceRoute::symmetric_eigen);
}

// --- KID -------------------------------------------------------------------

// The unbiased MMD^2 with k(x, y) = (x.y / d + 1)^3, written out as the
// definition reads, independently of src/metrics/kid.cpp.
double mmd2_by_loops(const std::vector<double>& x, const std::vector<double>& y, std::size_t d) {
  const std::size_t m = x.size() / d, n = y.size() / d;
  auto k = [d](const double* p, const double* q) {
    double dot = 0.0;
    for (std::size_t i = 0; i < d; ++i) dot += p[i] * q[i];
    const double base = dot / static_cast<double>(d) + 1.0;
    return base * base * base;
  };
  double xx = 0.0, yy = 0.0, xy = 0.0;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < m; ++j)
      if (i != j) xx += k(&x[i * d], &x[j * d]);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      if (i != j) yy += k(&y[i * d], &y[j * d]);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) xy += k(&x[i * d], &y[j * d]);
  const double md = static_cast<double>(m), nd = static_cast<double>(n);
  return xx / (md * (md - 1.0)) + yy / (nd * (nd - 1.0)) - 2.0 * xy / (md * nd);
}

TEST(Kid, HandWorkedOneDimensionalSets) {
  // d = 1, x = {0, 1}, y = {1, 2}: k(x, y) = (xy + 1)^3.
  // XX off-diagonal 2 k(0,1) = 2 -> 2/2 = 1; YY 2 k(1,2) = 54 -> 27;
  // XY k(0,1) + k(0,2) + k(1,1) + k(1,2) = 1 + 1 + 8 + 27 = 37 -> 2 * 37/4 = 18.5.
  // MMD^2 = 1 + 27 - 18.5 = 9.5, every step exact in double.
  const std::vector<double> x = {0.0, 1.0}, y = {1.0, 2.0};
  EXPECT_EQ(mmd2_unbiased(view(x, 1), view(y, 1)), 9.5);
  EXPECT_EQ(mmd2_by_loops(x, y, 1), 9.5);
  // Subsets of the full size are permutations (drawn without replacement),
  // and the integer-valued sums are exact in any order: every estimate is 9.5.
  const KidResult r = kernel_inception_distance(view(x, 1), view(y, 1), {.subsets = 7, .subset_size = 0, .seed = 3});
  EXPECT_EQ(r.subset_size, 2u);
  ASSERT_EQ(r.subset_values.size(), 7u);
  for (const double v : r.subset_values) EXPECT_EQ(v, 9.5);
  EXPECT_EQ(r.kid, 9.5);
  EXPECT_EQ(r.kid_stderr, 0.0);
}

TEST(Kid, FullSetEstimateMatchesTheLoops) {
  // Small integers: every kernel value and sum is an exact integer in double
  // (|x.y| <= 3 * 3 * 3 = 27 per entry... (27 / 3 + 1)^3 = 1000, sums < 2^53),
  // except the divisions by d = 3, which round; the loops and the library
  // divide the same dot products, so each kernel value is correctly rounded
  // in both and the sums of n^2 < 100 terms agree to gamma_100 times their size.
  const std::size_t d = 3;
  std::vector<double> x, y;
  mpverify::data::Draws draws(81, 0);
  for (int i = 0; i < 8 * 3; ++i) x.push_back(static_cast<double>(draws.below(7)) - 3.0);
  for (int i = 0; i < 6 * 3; ++i) y.push_back(static_cast<double>(draws.below(7)) - 2.0);
  const double expected = mmd2_by_loops(x, y, d);
  const double size = 3.0 * 1000.0;  // each of the three averages is at most max k = 1000 in magnitude
  EXPECT_NEAR(mmd2_unbiased(view(x, d), view(y, d)), expected, 2.0 * 100.0 * kU * size);
  // KID with subsets of size min(n_a, n_b) = 6 = the loops on the drawn rows:
  // checked through the torch-fidelity defaults and the mean/std aggregation.
  const KidResult r = kernel_inception_distance(view(x, d), view(y, d), {.subsets = 5, .subset_size = 0, .seed = 9});
  EXPECT_EQ(r.subset_size, 6u) << "default: min(1000, n_a, n_b)";
  EXPECT_EQ(r.n_a, 8u);
  EXPECT_EQ(r.n_b, 6u);
  double mean = 0.0;
  for (const double v : r.subset_values) mean += v;
  mean /= 5.0;
  double var = 0.0;
  for (const double v : r.subset_values) var += (v - mean) * (v - mean);
  EXPECT_DOUBLE_EQ(r.kid, mean);
  EXPECT_DOUBLE_EQ(r.kid_stderr, std::sqrt(var / 5.0)) << "numpy's std, 1/K denominator, as torch-fidelity";
  EXPECT_GT(r.kid_stderr, 0.0) << "subsets of 6 of 8 rows differ";
}

TEST(Kid, SameSeedSameBitsAndUnbiasedNearZeroForOneDistribution) {
  const std::vector<double> x = correlated_features(300, 8, 91), y = correlated_features(300, 8, 92, 1.0);
  const KidOptions o{.subsets = 20, .subset_size = 100, .seed = 5};
  const KidResult r1 = kernel_inception_distance(view(x, 8), view(y, 8), o);
  const KidResult r2 = kernel_inception_distance(view(x, 8), view(y, 8), o);
  EXPECT_EQ(r1.subset_values, r2.subset_values);
  KidOptions other = o;
  other.seed = 6;
  EXPECT_NE(kernel_inception_distance(view(x, 8), view(y, 8), other).subset_values, r1.subset_values);
  // y comes from another Gaussian (its own L, means shifted by 1). Two
  // disjoint halves of x come from one distribution: the unbiased estimate
  // must lie within a few standard deviations of 0 (a biased estimate would
  // sit above 0 by about the mean of k(x, x) / m).
  const std::vector<double> first(x.begin(), x.begin() + 150 * 8), second(x.begin() + 150 * 8, x.end());
  const KidResult same = kernel_inception_distance(view(first, 8), view(second, 8), {.subsets = 50, .subset_size = 100, .seed = 1});
  EXPECT_LT(std::abs(same.kid), 4.0 * same.kid_stderr);
  EXPECT_GT(r1.kid, 4.0 * r1.kid_stderr) << "different Gaussians are told apart";
}

TEST(Kid, RejectsBadSubsets) {
  const std::vector<double> x = correlated_features(10, 2, 101);
  EXPECT_THROW(kernel_inception_distance(view(x, 2), view(x, 2), {.subsets = 0}), std::invalid_argument);
  EXPECT_THROW(kernel_inception_distance(view(x, 2), view(x, 2), {.subsets = 3, .subset_size = 11}), std::invalid_argument);
  EXPECT_THROW(kernel_inception_distance(view(x, 2), view(x, 2), {.subsets = 3, .subset_size = 1}), std::invalid_argument);
}

// --- bootstrap -------------------------------------------------------------

TEST(FidBootstrap, PercentileIsNumpysLinearMethod) {
  // np.percentile([1, 2, 3, 4], [0, 25, 50, 90, 100]) = 1, 1.75, 2.5, 3.7, 4.
  const std::vector<double> v = {4.0, 1.0, 3.0, 2.0};
  EXPECT_EQ(percentile(v, 0.0), 1.0);
  EXPECT_EQ(percentile(v, 0.25), 1.75);
  EXPECT_EQ(percentile(v, 0.5), 2.5);
  EXPECT_NEAR(percentile(v, 0.9), 3.7, 4 * kU * 4.0);  // 0.9 * 3 = 2.7 rounds
  EXPECT_EQ(percentile(v, 1.0), 4.0);
}

TEST(FidBootstrap, SameSeedSameBitsAndAnIntervalAroundTheSpread) {
  const std::vector<double> g = correlated_features(120, 6, 111), r = correlated_features(150, 6, 112, 0.5);
  const FidBootstrapOptions o{.replicates = 40, .level = 0.9, .seed = 17};
  const FidBootstrap b1 = fid_bootstrap(view(g, 6), view(r, 6), o);
  const FidBootstrap b2 = fid_bootstrap(view(g, 6), view(r, 6), o);
  EXPECT_EQ(b1.values, b2.values);
  EXPECT_EQ(b1.low, b2.low);
  EXPECT_EQ(b1.high, b2.high);
  FidBootstrapOptions other = o;
  other.seed = 18;
  EXPECT_NE(fid_bootstrap(view(g, 6), view(r, 6), other).values, b1.values);
  // The first replicates do not depend on how many are drawn.
  FidBootstrapOptions fewer = o;
  fewer.replicates = 10;
  const FidBootstrap b3 = fid_bootstrap(view(g, 6), view(r, 6), fewer);
  EXPECT_TRUE(std::equal(b3.values.begin(), b3.values.end(), b1.values.begin()));

  ASSERT_EQ(b1.values.size(), 40u);
  EXPECT_EQ(b1.fid, fid(view(g, 6), view(r, 6)).fid);
  EXPECT_EQ(b1.low, percentile(b1.values, 0.05));
  EXPECT_EQ(b1.high, percentile(b1.values, 0.95));
  double mean = 0.0;
  for (const double v : b1.values) mean += v;
  mean /= 40.0;
  double var = 0.0;
  for (const double v : b1.values) var += (v - mean) * (v - mean);
  EXPECT_DOUBLE_EQ(b1.standard_error, std::sqrt(var / 39.0));
  EXPECT_LT(b1.low, b1.high);
  EXPECT_GT(b1.standard_error, 0.0);
  EXPECT_THROW(fid_bootstrap(view(g, 6), view(r, 6), {.replicates = 1}), std::invalid_argument);
  EXPECT_THROW(fid_bootstrap(view(g, 6), view(r, 6), {.replicates = 5, .level = 1.0}), std::invalid_argument);
}

// --- agreement with pytorch-fid's scipy recipe ------------------------------

// A python3 that can import numpy and scipy.linalg: $MPVERIFY_PYTHON, the
// python3 on PATH, or Debian's /usr/bin/python3 (where python3-scipy installs
// when PATH has another python first). Empty when none can.
std::string python_with_scipy() {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("MPVERIFY_PYTHON")) candidates.emplace_back(p);
  candidates.emplace_back("python3");
  candidates.emplace_back("/usr/bin/python3");
  for (const std::string& c : candidates)
    if (std::system((c + " -c 'import numpy, scipy.linalg' >/dev/null 2>&1").c_str()) == 0) return c;
  return "";
}

void write_text(const fs::path& file, const std::vector<double>& x, std::size_t d) {
  std::FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  for (std::size_t r = 0; r < x.size() / d; ++r)
    for (std::size_t j = 0; j < d; ++j) std::fprintf(f, "%.17g%c", x[r * d + j], j + 1 == d ? '\n' : ' ');
  std::fclose(f);
}

TEST(Fid, AgreesWithScipySqrtmOnWellConditionedFeatures) {
  const std::string python = python_with_scipy();
  if (python.empty()) GTEST_SKIP() << "no python3 with numpy and scipy (Debian: apt-get install python3-scipy)";
  char dir_template[] = "/tmp/mpverify-fid-scipy-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const fs::path dir = dir_template;
  struct Case {
    std::size_t n_a, n_b, d;
    std::uint64_t seed;
    double shift;
  };
  const Case cases[] = {{300, 300, 8, 1, 0.0}, {500, 400, 32, 2, 0.1}, {800, 700, 64, 3, 1.0}, {200, 250, 16, 4, 5.0}};
  int compared = 0;
  for (const Case& c : cases) {
    const std::vector<double> a = correlated_features(c.n_a, c.d, c.seed), b = correlated_features(c.n_b, c.d, c.seed + 100, c.shift);
    write_text(dir / "a.txt", a, c.d);
    write_text(dir / "b.txt", b, c.d);
    const auto out = mpverify::test::run_command(
        python + " " + MPVERIFY_SCIPY_FID_SCRIPT + " " + (dir / "a.txt").string() + " " + (dir / "b.txt").string(), "");
    ASSERT_EQ(out.exit_code, 0) << out.out;
    const double scipy_fid = std::stod(out.out);
    for (const TraceRoute route : kRoutes) {
      const FidResult r = fid(view(a, c.d), view(b, c.d), route);
      // The requirement: 1e-6 relative on well-conditioned inputs.
      EXPECT_NEAR(r.fid, scipy_fid, 1e-6 * scipy_fid) << "d " << c.d << " " << to_string(route);
      ++compared;
    }
  }
  fs::remove_all(dir);
  EXPECT_EQ(compared, 8);
}

// --- statistics files (.npz with mu and sigma) ---------------------------------

class FidStatisticsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/mpverify-fid-stats-XXXXXX";
    ASSERT_NE(mkdtemp(path), nullptr);
    root_ = path;
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path write(const std::string& name, const std::vector<mpverify::io::NpzArray>& arrays, bool compressed = false) {
    const fs::path file = root_ / name;
    mpverify::io::write_npz(file, arrays, compressed);
    return file;
  }
  // The message read_fid_statistics throws for `file` ("" when it reads it).
  static std::string refusal(const fs::path& file) {
    try {
      read_fid_statistics(file);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  }
  fs::path root_;
};

// By hand: mu_a = (0, 0), S_a = diag(4, 9); mu_b = (3, 4), S_b = I. The
// covariances commute, so Tr((S_a S_b)^1/2) = sqrt(4) + sqrt(9) = 5 and
// FID = |mu_a - mu_b|^2 + Tr S_a + Tr S_b - 2 * 5 = 25 + 13 + 2 - 10 = 30.
// Every input is a small integer (exact in float32); the one inexact step is
// the trace term's singular values, each to a few u of ||S|| = 9:
// 1e-12 is ~10^3 of that.
TEST_F(FidStatisticsFile, HandComputedTwoDimensionalCaseFromFloat32Files) {
  const fs::path a = write("a.npz", {{"mu", {2}, {0, 0}}, {"sigma", {2, 2}, {4, 0, 0, 9}}});
  const fs::path b = write("b.npz", {{"sigma", {2, 2}, {1, 0, 0, 1}}, {"mu", {2}, {3, 4}}}, true);
  const GaussianStats sa = read_fid_statistics(a), sb = read_fid_statistics(b);
  EXPECT_EQ(sa.dims(), 2u);
  EXPECT_EQ(sa.count, 0u);
  EXPECT_EQ(sb.mean, (std::vector<double>{3, 4}));
  for (const TraceRoute route : kRoutes) {
    const FidResult r = frechet_distance(sa, sb, route);
    EXPECT_EQ(r.mean_term, 25.0);
    EXPECT_EQ(r.trace_a, 13.0);
    EXPECT_NEAR(r.trace_sqrt, 5.0, 1e-12);
    EXPECT_NEAR(r.fid, 30.0, 1e-12) << to_string(route);
  }
}

TEST_F(FidStatisticsFile, OtherMembersAreIgnoredAndSmallAsymmetryIsAccepted) {
  // 5e-5 of the largest variance (4) apart: inside kSymmetryTolerance = 1e-4.
  const fs::path f = write("s.npz", {{"feats", {3, 2}, {1, 2, 3, 4, 5, 6}},
                                     {"mu", {2}, {1, 2}},
                                     {"sigma", {2, 2}, {4, 1.0f, 1.0f + 2e-4f, 1}}});
  EXPECT_EQ(refusal(f), "");
}

TEST_F(FidStatisticsFile, RefusesWhatIsNotMuAndSigma) {
  struct Case {
    const char* name;
    std::vector<mpverify::io::NpzArray> arrays;
    std::vector<std::string> words;
  };
  const float nan = std::nanf("");
  const std::vector<Case> cases = {
      {"no_mu.npz", {{"sigma", {1, 1}, {1}}}, {"no array 'mu'", "sigma"}},
      {"no_sigma.npz", {{"mu", {1}, {1}}}, {"no array 'sigma'"}},
      {"mu_rank.npz", {{"mu", {1, 2}, {1, 2}}, {"sigma", {2, 2}, {1, 0, 0, 1}}}, {"'mu' has shape [1, 2]"}},
      {"sigma_rank.npz", {{"mu", {2}, {1, 2}}, {"sigma", {4}, {1, 0, 0, 1}}}, {"'sigma' has shape [4]"}},
      {"sigma_d.npz", {{"mu", {3}, {1, 2, 3}}, {"sigma", {2, 2}, {1, 0, 0, 1}}}, {"[2, 2]", "3 features", "[3, 3]"}},
      {"empty.npz", {{"mu", {0}, {}}, {"sigma", {0, 0}, {}}}, {"'mu' is empty"}},
      {"mu_nan.npz", {{"mu", {2}, {1, nan}}, {"sigma", {2, 2}, {1, 0, 0, 1}}}, {"mu[1]", "not finite"}},
      {"sigma_inf.npz", {{"mu", {2}, {1, 2}}, {"sigma", {2, 2}, {1, 0, INFINITY, 1}}}, {"sigma[1, 0]", "not finite"}},
      {"negative.npz", {{"mu", {2}, {1, 2}}, {"sigma", {2, 2}, {1, 0, 0, -1}}}, {"sigma[1, 1]", "negative variance"}},
      // Symmetric with a non-negative diagonal, yet not covariances: the eigenvalue -1 was once clamped to 0
      // as rounding and the gate said EQUIVALENT; with 1e6 off the diagonal every FID came out 0.
      {"indefinite.npz", {{"mu", {4}, {0, 0, 0, 0}}, {"sigma", {4, 4}, {1, 2, 0, 0, 2, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}}},
       {"the eigenvalue -1,", "not a covariance matrix"}},
      {"huge_offdiagonal.npz", {{"mu", {2}, {0, 0}}, {"sigma", {2, 2}, {1, 1e6f, 1e6f, 1}}},
       {"the eigenvalue -999999,", "positive semi-definite"}},
      // 3e-4 of the largest variance (4) apart: above the tolerance.
      {"asymmetric.npz", {{"mu", {2}, {1, 2}}, {"sigma", {2, 2}, {4, 1.0f, 1.0012f, 1}}},
       {"not symmetric", "sigma[0, 1] = 1 but sigma[1, 0] = 1.001"}},
  };
  for (const Case& c : cases) {
    const fs::path f = write(c.name, c.arrays);
    const std::string m = refusal(f);
    EXPECT_NE(m.find(f.string()), std::string::npos) << m;
    for (const std::string& w : c.words) EXPECT_NE(m.find(w), std::string::npos) << c.name << ": " << m;
  }
  // A covariance of fewer samples than dimensions is singular; stored in float32 its zero eigenvalues come
  // out slightly negative, and it is still a covariance. 3 samples of 64 dimensions, of a seeded draw.
  std::mt19937_64 rng(45);
  std::normal_distribution<double> normal;
  constexpr std::size_t kSamples = 3, kDims = 64;
  std::vector<double> x(kSamples * kDims);
  for (double& v : x) v = normal(rng);
  std::vector<float> sigma(kDims * kDims);
  for (std::size_t i = 0; i < kDims; ++i)
    for (std::size_t j = 0; j < kDims; ++j) {
      double sum = 0;
      for (std::size_t n = 0; n < kSamples; ++n) sum += x[n * kDims + i] * x[n * kDims + j];
      sigma[i * kDims + j] = static_cast<float>(sum / (kSamples - 1));
    }
  const fs::path singular = write("singular.npz", {{"mu", {kDims}, std::vector<float>(kDims, 0.0f)},
                                                   {"sigma", {kDims, kDims}, sigma}});
  EXPECT_EQ(refusal(singular), "");
  EXPECT_NE(refusal(root_ / "missing.npz").find("no such file"), std::string::npos);
  std::ofstream(root_ / "text.npz") << "not a zip archive";
  EXPECT_NE(refusal(root_ / "text.npz").find("text.npz"), std::string::npos);
}

}  // namespace
