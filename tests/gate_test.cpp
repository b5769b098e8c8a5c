// The parity gate: the equivalence statistics against published t-table
// values and hand-worked intervals; every verdict of `mpverify gate` on run
// directories written here (values chosen by the test); paired against Welch;
// divergence; each kind of bad input giving exit 2 with a message that names
// the file and the problem, nothing on stdout and no report; and the JUnit
// report's structure, read back with a strict XML reader.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "metrics/ensemble.h"
#include "metrics/equivalence.h"
#include "metrics/parity_gate.h"
#include "report/gate_junit.h"
#include "report/junit.h"
#include "support/gate_runs.h"
#include "support/run_command.h"
#include "support/xml_checker.h"

namespace {

namespace fs = std::filesystem;
using mpverify::metrics::EquivalenceMethod;
using mpverify::metrics::EquivalenceOptions;
using mpverify::metrics::Verdict;
using mpverify::test::parse_xml;
using mpverify::test::run_command;
using mpverify::test::XmlElement;
using mpverify::test::accuracies;
using mpverify::test::GateCli;
using mpverify::test::RunSpec;
using mpverify::test::write_ensemble;
using mpverify::test::write_run;
using nlohmann::json;

// ---------------------------------------------------------------- quantiles

// Published Student-t critical values (e.g. NIST/SEMATECH e-Handbook, table
// 1.3.6.7.2, printed to 3 decimals): t(p, df).
TEST(GateStatistics, StudentTQuantilesMatchPublishedTable) {
  struct Row {
    double p, df, t;
  };
  // In this order, neighbours share p, or df, or both: the quantile function keeps its last answer per
  // thread, and must give each its own.
  const Row table[] = {{0.95, 1, 6.314},  {0.95, 2, 2.920},   {0.95, 3, 2.353},  {0.95, 4, 2.132},
                       {0.95, 5, 2.015},  {0.95, 10, 1.812},  {0.95, 10, 1.812}, {0.975, 10, 2.228},
                       {0.95, 30, 1.697}, {0.95, 100, 1.660}, {0.99, 4, 3.747},  {0.995, 20, 2.845},
                       {0.90, 7, 1.415}};
  for (const Row& r : table)
    // The table rounds to 3 decimals: the true value lies within 0.0005.
    EXPECT_NEAR(mpverify::metrics::student_t_quantile(r.p, r.df), r.t, 0.0005) << "p " << r.p << " df " << r.df;
  // Normal quantiles (same handbook, table 1.3.6.7.1): z(0.95) = 1.645, z(0.975) = 1.960, z(0.995) = 2.576.
  EXPECT_NEAR(mpverify::metrics::normal_quantile(0.95), 1.645, 0.0005);
  EXPECT_NEAR(mpverify::metrics::normal_quantile(0.975), 1.960, 0.0005);
  EXPECT_NEAR(mpverify::metrics::student_t_quantile(0.995, INFINITY), 2.576, 0.0005);
  // The upper tail inverts the quantile: P(T > t(0.95, 4)) = 0.05.
  EXPECT_NEAR(mpverify::metrics::student_t_upper_tail(2.132, 4), 0.05, 0.0005 * 1.0);  // |dP/dt| < 1 there
}

TEST(GateStatistics, IntervalClassification) {
  using mpverify::metrics::classify_interval;
  EXPECT_EQ(classify_interval(-0.99, 0.99, 1), Verdict::equivalent);
  EXPECT_EQ(classify_interval(-1.0, 0.5, 1), Verdict::inconclusive);  // an end on the margin decides nothing
  EXPECT_EQ(classify_interval(1.0, 2.0, 1), Verdict::inconclusive);
  EXPECT_EQ(classify_interval(1.01, 2.0, 1), Verdict::not_equivalent);
  EXPECT_EQ(classify_interval(-3.0, -1.01, 1), Verdict::not_equivalent);
  EXPECT_EQ(classify_interval(-3.0, 3.0, 1), Verdict::inconclusive);  // covers the whole region
  EXPECT_EQ(classify_interval(0.5, 1.5, 1), Verdict::inconclusive);
}

// Equal sizes and equal variances make the Welch-Satterthwaite df exactly
// 2n - 2 = 4, so the table's t(0.95, 4) = 2.132 applies:
// baseline {10, 12, 14}, candidate {11, 13, 15}: means 12 and 13, variances 4,
// se = sqrt(4/3 + 4/3) = sqrt(8/3), d = 1, interval 1 -+ 2.132 sqrt(8/3).
TEST(GateStatistics, WelchIntervalByHand) {
  const std::vector<double> b = {10, 12, 14}, c = {11, 13, 15};
  const auto r = mpverify::metrics::welch_tost(b, c, EquivalenceOptions{5.0, 0.05});
  EXPECT_EQ(r.method, EquivalenceMethod::welch);
  EXPECT_DOUBLE_EQ(r.difference, 1.0);
  EXPECT_NEAR(r.standard_error, std::sqrt(8.0 / 3.0), 1e-12);
  EXPECT_NEAR(r.df, 4.0, 1e-12);
  const double half = 2.132 * std::sqrt(8.0 / 3.0);
  // 0.0005 (the table's rounding) times se.
  EXPECT_NEAR(r.lower, 1 - half, 0.0005 * std::sqrt(8.0 / 3.0));
  EXPECT_NEAR(r.upper, 1 + half, 0.0005 * std::sqrt(8.0 / 3.0));
  EXPECT_EQ(r.verdict, Verdict::equivalent);  // [-2.48, 4.48] inside ±5
  EXPECT_LT(r.p_lower, 0.05);
  EXPECT_LT(r.p_upper, 0.05);
  const auto narrow = mpverify::metrics::welch_tost(b, c, EquivalenceOptions{4.0, 0.05});
  EXPECT_EQ(narrow.verdict, Verdict::inconclusive);  // 4.48 > 4
  EXPECT_GE(narrow.p_upper, 0.05);
  ASSERT_TRUE(narrow.seeds_needed.has_value());
  EXPECT_GT(*narrow.seeds_needed, 3u);
}

// Unequal variances: baseline {1, 2, 3, 4} (variance 5/3), candidate {2, 4, 6}
// (variance 4): se^2 = 5/12 + 4/3 = 7/4, df = (7/4)^2 / ((5/12)^2/3 + (4/3)^2/2)
// = 3.0625 / (25/432 + 8/9) = 3.0625 / (409/432) = 3.2347...
TEST(GateStatistics, WelchSatterthwaiteDegreesOfFreedom) {
  const std::vector<double> b = {1, 2, 3, 4}, c = {2, 4, 6};
  const auto r = mpverify::metrics::welch_tost(b, c, EquivalenceOptions{1.0, 0.05});
  EXPECT_NEAR(r.standard_error, std::sqrt(7.0 / 4.0), 1e-12);
  EXPECT_NEAR(r.df, 3.0625 * 432.0 / 409.0, 1e-12);
  EXPECT_DOUBLE_EQ(r.difference, 1.5);
}

// Per-seed differences {0.1, 0.3, -0.1, 0.2, 0.0}: mean 0.1, variance
// (0 + 0.04 + 0.04 + 0.01 + 0.01)/4 = 0.025, se = sqrt(0.025/5), df 4: the
// interval 0.1 -+ 2.132 sqrt(0.005) = [-0.0508, 0.2508] is inside ±0.3. The
// same values unpaired spread over 1..5 and Welch cannot decide.
TEST(GateStatistics, PairedRemovesSharedSeedNoise) {
  const std::vector<double> b = {1, 2, 3, 4, 5}, c = {1.1, 2.3, 2.9, 4.2, 5.0};
  const auto paired = mpverify::metrics::paired_tost(b, c, EquivalenceOptions{0.3, 0.05});
  EXPECT_EQ(paired.method, EquivalenceMethod::paired);
  EXPECT_NEAR(paired.difference, 0.1, 1e-12);
  EXPECT_NEAR(paired.sd_difference, std::sqrt(0.025), 1e-12);
  EXPECT_NEAR(paired.standard_error, std::sqrt(0.005), 1e-12);
  EXPECT_DOUBLE_EQ(paired.df, 4.0);
  EXPECT_NEAR(paired.lower, 0.1 - 2.132 * std::sqrt(0.005), 0.0005 * std::sqrt(0.005));
  EXPECT_NEAR(paired.upper, 0.1 + 2.132 * std::sqrt(0.005), 0.0005 * std::sqrt(0.005));
  EXPECT_EQ(paired.verdict, Verdict::equivalent);
  const auto welch = mpverify::metrics::welch_tost(b, c, EquivalenceOptions{0.3, 0.05});
  EXPECT_EQ(welch.verdict, Verdict::inconclusive);
}

// One value per side with bootstrap errors 0.3 and 0.4: se = 0.5, d = 0.2.
// From B = 101 and 201 replicates the df is min(B) - 1 = 100, the table's
// t(0.95, 100) = 1.660: interval [0.2 - 0.830, 0.2 + 0.830] = [-0.630, 1.030].
TEST(GateStatistics, StderrIntervalUsesTWithReplicatesMinusOneDf) {
  using mpverify::metrics::replicates_df;
  using mpverify::metrics::stderr_t_tost;
  EXPECT_EQ(replicates_df(101, 201), 100.0);
  EXPECT_EQ(replicates_df(2, 50), 1.0);
  EXPECT_THROW(replicates_df(1, 50), std::invalid_argument);
  const auto r = stderr_t_tost(20.0, 0.3, 20.2, 0.4, replicates_df(101, 201), EquivalenceOptions{1.5, 0.05});
  EXPECT_EQ(r.method, EquivalenceMethod::stderr_t);
  EXPECT_NEAR(r.standard_error, 0.5, 1e-12);
  EXPECT_EQ(r.df, 100.0);
  EXPECT_NEAR(r.lower, 0.2 - 1.660 * 0.5, 0.0005 * 0.5);  // the table's rounding times se
  EXPECT_NEAR(r.upper, 0.2 + 1.660 * 0.5, 0.0005 * 0.5);
  EXPECT_EQ(r.verdict, Verdict::equivalent);
  EXPECT_EQ(stderr_t_tost(20.0, 0.3, 20.2, 0.4, 100, EquivalenceOptions{1.0, 0.05}).verdict,
            Verdict::inconclusive);  // 1.030 > 1
  EXPECT_FALSE(stderr_t_tost(20.0, 0.3, 20.2, 0.4, 100, EquivalenceOptions{1.0, 0.05})
                   .seeds_needed.has_value());  // seeds cannot be planned from bootstrap errors
  // B = 2 on one side: df 1, the table's t(0.95, 1) = 6.314, where the normal
  // quantile (1.645) would have claimed the interval [-0.62, 1.02] and passed at margin 1.5.
  const auto two = stderr_t_tost(20.0, 0.3, 20.2, 0.4, replicates_df(2, 200), EquivalenceOptions{1.5, 0.05});
  EXPECT_NEAR(two.upper, 0.2 + 6.314 * 0.5, 0.0005 * 0.5);
  EXPECT_EQ(two.verdict, Verdict::inconclusive);
  // df = +infinity is the normal quantile, z(0.95) = 1.645 (the same handbook's table).
  EXPECT_NEAR(stderr_t_tost(20.0, 0.3, 20.2, 0.4, INFINITY, EquivalenceOptions{1.5, 0.05}).upper, 0.2 + 1.645 * 0.5,
              0.0005 * 0.5);
}

// No spread, no estimate of the noise: inconclusive whichever side of the
// margin the difference lies (see equivalence.h), for every method.
TEST(GateStatistics, ZeroSpreadIsInconclusive) {
  const std::vector<double> b = {90, 90, 90}, c = {90.5, 90.5, 90.5};
  for (const double margin : {1.0, 0.25}) {
    const auto r = mpverify::metrics::welch_tost(b, c, EquivalenceOptions{margin, 0.05});
    EXPECT_EQ(r.lower, 0.5);
    EXPECT_EQ(r.upper, 0.5);
    EXPECT_EQ(r.verdict, Verdict::inconclusive) << margin;
    EXPECT_EQ(r.p_lower, 1.0);
    EXPECT_EQ(r.p_upper, 1.0);
    EXPECT_FALSE(r.seeds_needed.has_value());
  }
  // paired: every per-seed difference equal, though each side varies
  const std::vector<double> pb = {90, 91}, pc = {90.9, 91.9};
  EXPECT_EQ(mpverify::metrics::paired_tost(pb, pc, EquivalenceOptions{1.0, 0.05}).verdict, Verdict::inconclusive);
  EXPECT_EQ(mpverify::metrics::stderr_t_tost(10, 0, 10.9, 0, 49, EquivalenceOptions{1.0, 0.05}).verdict,
            Verdict::inconclusive);
}

// With a resolution, a zero spread stands for the rounding to it: each value
// uniform within +-res/2 (variance res^2/12), a paired difference res^2/6.
TEST(GateStatistics, ZeroSpreadWithAResolutionUsesTheRounding) {
  EquivalenceOptions o{1.0, 0.05};
  o.resolution = 0.5;
  const std::vector<double> b = {90, 91, 92, 90.5}, c = b;
  const auto paired = mpverify::metrics::paired_tost(b, c, o);
  EXPECT_EQ(paired.resolution_spread, 0.5);
  EXPECT_NEAR(paired.standard_error, 0.5 / std::sqrt(6.0) / 2.0, 1e-15);
  EXPECT_EQ(paired.df, 3.0);
  EXPECT_EQ(paired.verdict, Verdict::equivalent);  // half-width 2.353 * 0.102 = 0.24
  const std::vector<double> wb = {90, 90, 90}, wc = {90.5, 90.5, 90.5};
  const auto welch = mpverify::metrics::welch_tost(wb, wc, o);
  EXPECT_NEAR(welch.standard_error, std::sqrt(0.25 / 12 * (1.0 / 3 + 1.0 / 3)), 1e-15);
  EXPECT_NEAR(welch.df, 4.0, 1e-12);  // equal variances and sizes: n_b + n_c - 2
  EXPECT_EQ(welch.verdict, Verdict::equivalent);  // 0.5 +- 2.132 * 0.118
  o.resolution = 2;  // coarse: the same runs prove nothing
  EXPECT_EQ(mpverify::metrics::welch_tost(wb, wc, o).verdict, Verdict::inconclusive);
  // A sample spread, however small, is used as it is.
  const std::vector<double> spread = {90, 90, 90.1};
  EXPECT_EQ(mpverify::metrics::welch_tost(spread, wc, o).resolution_spread, 0.0);
}

// Welch with unequal sides: seeds_needed is per side and may be fewer than
// the larger side already has (only the smaller side needs more); it is the
// smallest n whose equal-sides half-width t(1-a, df(n)) sqrt((s_b^2 + s_c^2)/n)
// is below the distance from |d| to the margin, checked against that here.
TEST(GateStatistics, WelchSeedsNeededWithUnequalSides) {
  const std::vector<double> b = {90.1, 91.3, 89.6}, c = {90.4, 91.1, 89.2, 90.8, 91.6, 89.9, 90.2, 91.0, 90.5, 89.7};
  const double margin = 1.07;
  const auto r = mpverify::metrics::welch_tost(b, c, EquivalenceOptions{margin, 0.05});
  ASSERT_EQ(r.verdict, Verdict::inconclusive);
  ASSERT_TRUE(r.seeds_needed.has_value());
  const double var_b = r.sd_baseline * r.sd_baseline, var_c = r.sd_candidate * r.sd_candidate;
  const double target = std::fabs(std::fabs(r.difference) - margin);
  auto half = [&](std::size_t n) {
    const double df = mpverify::metrics::welch_df(var_b, n, var_c, n);
    return mpverify::metrics::student_t_quantile(0.95, df) * std::sqrt((var_b + var_c) / static_cast<double>(n));
  };
  std::size_t want = 2;
  while (!(half(want) < target)) ++want;
  EXPECT_EQ(*r.seeds_needed, want);
  EXPECT_LT(want, r.n_candidate) << "the case was made for a count below the larger side's";
}

// seeds_needed is the smallest n per side whose half-width t(1-a, n-1) sd/sqrt(n)
// is below the distance from |d| to the margin (paired), checked against that
// definition here, on both sides of the margin.
TEST(GateStatistics, SeedsNeededIsTheSmallestDecisiveCount) {
  const std::vector<double> b = {0, 0, 0, 0}, c = {0.2, 0.9, -0.3, 0.8};  // d = 0.4, sd ~ 0.56
  for (const double margin : {0.9, 0.2}) {
    const auto r = mpverify::metrics::paired_tost(b, c, EquivalenceOptions{margin, 0.05});
    ASSERT_EQ(r.verdict, Verdict::inconclusive) << margin;
    ASSERT_TRUE(r.seeds_needed.has_value()) << margin;
    const double target = std::fabs(std::fabs(r.difference) - margin);
    auto half = [&](std::size_t n) {
      return mpverify::metrics::student_t_quantile(0.95, static_cast<double>(n - 1)) * r.sd_difference /
             std::sqrt(static_cast<double>(n));
    };
    const std::size_t n = *r.seeds_needed;
    EXPECT_LT(half(n), target) << margin;
    EXPECT_GE(half(n - 1), target) << margin;
  }
}

TEST(GateStatistics, RejectsBadArguments) {
  const std::vector<double> two = {1, 2}, one = {1};
  EXPECT_THROW(mpverify::metrics::welch_tost(one, two, EquivalenceOptions{1, 0.05}), std::invalid_argument);
  EXPECT_THROW(mpverify::metrics::welch_tost(two, two, EquivalenceOptions{0, 0.05}), std::invalid_argument);
  EXPECT_THROW(mpverify::metrics::welch_tost(two, two, EquivalenceOptions{1, 0.5}), std::invalid_argument);
  const std::vector<double> nan = {1, NAN};
  EXPECT_THROW(mpverify::metrics::welch_tost(two, nan, EquivalenceOptions{1, 0.05}), std::invalid_argument);
  const std::vector<double> three = {1, 2, 3};
  EXPECT_THROW(mpverify::metrics::paired_tost(two, three, EquivalenceOptions{1, 0.05}), std::invalid_argument);
}

// ------------------------------------------------------------ crafted runs

// Baseline fp32 seeds 1..6; equivalent candidate: each seed +-0.1 point.
const std::vector<std::int64_t> kSeeds = {1, 2, 3, 4, 5, 6};
const std::vector<double> kBaseline = {0.900, 0.910, 0.895, 0.905, 0.915, 0.890};
const std::vector<double> kClose = {0.901, 0.909, 0.896, 0.904, 0.916, 0.889};
// 2 points lower on average, each seed's drop 1.9 or 2.1 (a spread: with none
// the gate cannot estimate the noise and says inconclusive)
const std::vector<double> kDropped = {0.881, 0.889, 0.876, 0.884, 0.896, 0.869};

TEST_F(GateCli, EquivalentPairedExitsZero) {
  write_ensemble(root_ / "fp32", accuracies(kSeeds, kBaseline, "fp32"));
  write_ensemble(root_ / "o2", accuracies(kSeeds, kClose, "o2"));
  const Outcome line = gate("--baseline fp32 --candidate o2 --metric accuracy --margin 1");
  EXPECT_EQ(line.exit_code, 0) << line.out_err;
  EXPECT_EQ(line.out.rfind("EQUIVALENT (accuracy)", 0), 0u) << line.out;
  EXPECT_EQ(std::count(line.out.begin(), line.out.end(), '\n'), 1) << "one line";
  EXPECT_NE(line.out.find("paired TOST on 6 seeds"), std::string::npos) << line.out;
  const json j = gate_json("--baseline fp32 --candidate o2 --metric accuracy --margin 1", 0);
  EXPECT_EQ(j["verdict"], "equivalent");
  EXPECT_EQ(j["method"], "paired");
  EXPECT_EQ(j["n_baseline"], 6);
  EXPECT_EQ(j["paired_seeds"], json({1, 2, 3, 4, 5, 6}));
  // Per-seed differences {+0.1, -0.1, +0.1, -0.1, +0.1, -0.1} points: mean 0.
  EXPECT_NEAR(j["difference"].get<double>(), 0.0, 1e-9);
  EXPECT_NEAR(j["mean_baseline"].get<double>(), 90.25, 1e-9);
  EXPECT_NEAR(j["baseline_runs"][0]["value"].get<double>(), 90.0, 1e-9);  // accuracy in points
  EXPECT_EQ(j["margin"], 1.0);
  EXPECT_EQ(j["alpha"], 0.05);
  EXPECT_LT(j["ci_lower"].get<double>(), 0.0);
  EXPECT_GT(j["ci_upper"].get<double>(), 0.0);
}

TEST_F(GateCli, DifferentSeedSetsUseWelch) {
  write_ensemble(root_ / "fp32", accuracies(kSeeds, kBaseline, "fp32"));
  write_ensemble(root_ / "fp32b", accuracies({11, 12, 13, 14, 15, 16}, kClose, "fp32"));
  const json j = gate_json("--baseline fp32 --candidate fp32b --metric accuracy --margin 1.5", 0);
  EXPECT_EQ(j["method"], "welch");
  EXPECT_TRUE(j["paired_seeds"].empty());
  EXPECT_GT(j["df"].get<double>(), 5.0);  // Welch df lies in [min(n)-1, n_b + n_c - 2] = [5, 10]
  EXPECT_LE(j["df"].get<double>(), 10.0);
  // The same runs forced unpaired when the seeds agree: --method welch.
  write_ensemble(root_ / "o2", accuracies(kSeeds, kClose, "o2"));
  EXPECT_EQ(gate_json("--baseline fp32 --candidate o2 --metric accuracy --margin 1.5 --method welch", 0)["method"],
            "welch");
}

TEST_F(GateCli, TwoPointDropIsNotEquivalent) {
  write_ensemble(root_ / "fp32", accuracies(kSeeds, kBaseline, "fp32"));
  write_ensemble(root_ / "o2", accuracies(kSeeds, kDropped, "o2"));
  const Outcome o = gate("--baseline fp32 --candidate o2 --metric accuracy --margin 1");
  EXPECT_EQ(o.exit_code, 1) << o.out_err;
  EXPECT_EQ(o.out.rfind("NOT EQUIVALENT (accuracy)", 0), 0u) << o.out;
  const json j = gate_json("--baseline fp32 --candidate o2 --metric accuracy --margin 1", 1);
  EXPECT_NEAR(j["difference"].get<double>(), -2.0, 1e-9);
  EXPECT_LT(j["ci_upper"].get<double>(), -1.0);
}

TEST_F(GateCli, WideSpreadIsInconclusiveAndSaysHowManySeeds) {
  // Baseline and candidate spread over 6 points, different seeds: the interval
  // of a 0.5-point difference is several points wide.
  write_ensemble(root_ / "fp32", accuracies({1, 2, 3}, {0.86, 0.92, 0.89}, "fp32"));
  write_ensemble(root_ / "o2", accuracies({4, 5, 6}, {0.865, 0.925, 0.895}, "o2"));
  const Outcome o = gate("--baseline fp32 --candidate o2 --metric accuracy --margin 1");
  EXPECT_EQ(o.exit_code, 3) << o.out_err;
  EXPECT_EQ(o.out.rfind("INCONCLUSIVE (accuracy)", 0), 0u) << o.out;
  EXPECT_NE(o.out.find("need more seeds: about"), std::string::npos) << o.out;
  const json j = gate_json("--baseline fp32 --candidate o2 --metric accuracy --margin 1", 3);
  ASSERT_TRUE(j["seeds_needed"].is_number_integer());
  EXPECT_GT(j["seeds_needed"].get<int>(), 3);
  // The difference (0.5 points) lies inside the margin (1): more seeds would point to equivalent.
  EXPECT_EQ(j["leaning_toward"], "equivalent");
  EXPECT_NE(o.out.find("the observed difference lies inside the margin, so more seeds would point to EQUIVALENT"),
            std::string::npos) << o.out;
  // The same spread 3 points apart, margin 1: outside, towards not equivalent, and the line says so.
  write_ensemble(root_ / "o2-far", accuracies({4, 5, 6}, {0.89, 0.95, 0.92}, "o2"));
  const Outcome far = gate("--baseline fp32 --candidate o2-far --metric accuracy --margin 1");
  EXPECT_EQ(far.exit_code, 3) << far.out_err;
  EXPECT_NE(far.out.find("lies outside the margin, so more seeds would point to NOT EQUIVALENT"), std::string::npos)
      << far.out;
  EXPECT_EQ(gate_json("--baseline fp32 --candidate o2-far --metric accuracy --margin 1", 3)["leaning_toward"],
            "not equivalent");
}

// Any figure a run's evaluation records is a metric of run directories, in its own unit: a language model's
// perplexity (lower is better, from the documented names), a user's own score (its direction stated).
TEST_F(GateCli, AnyEvaluationFigureOfRunDirectoriesIsAMetric) {
  const std::vector<double> base = {3.10, 3.12, 3.08, 3.11, 3.09, 3.13}, worse = {3.61, 3.62, 3.57, 3.60, 3.60, 3.63};
  auto runs = [&](const std::vector<double>& ppl, const char* recipe) {
    auto r = accuracies(kSeeds, kBaseline, recipe);
    for (std::size_t i = 0; i < r.size(); ++i) r[i].extra_evaluation = {{"perplexity", ppl[i]}, {"my_score", ppl[i]}};
    return r;
  };
  write_ensemble(root_ / "fp32", runs(base, "fp32"));
  write_ensemble(root_ / "bf16", runs(worse, "bf16"));
  const Outcome o = gate("--baseline fp32 --candidate bf16 --metric perplexity --margin 0.2");
  EXPECT_EQ(o.exit_code, 1) << o.out_err;
  EXPECT_EQ(o.out.rfind("NOT EQUIVALENT (perplexity)", 0), 0u) << o.out;
  json j = gate_json("--baseline fp32 --candidate bf16 --metric perplexity --margin 0.2", 1);
  EXPECT_EQ(j["unit"], "perplexity");
  EXPECT_EQ(j["direction"], "lower");
  // Per-seed differences 0.51, 0.50, 0.49, 0.49, 0.51, 0.50: mean 0.5 (sums of decimals: 1e-9).
  EXPECT_NEAR(j["difference"].get<double>(), 0.5, 1e-9);
  EXPECT_NEAR(j["baseline_runs"][0]["value"].get<double>(), 3.10, 1e-12);
  // test_loss (0.3 in every run of these fixtures): equal sides, no spread, the steps of none: inconclusive.
  EXPECT_NE(gate("--baseline fp32 --candidate bf16 --metric test_loss --margin 0.1").exit_code, 2);
  // A name without a known direction: the test is the same, the direction unspecified until stated.
  j = gate_json("--baseline fp32 --candidate bf16 --metric my_score --margin 0.2", 1);
  EXPECT_TRUE(j["direction"].is_null());
  j = gate_json("--baseline fp32 --candidate bf16 --metric my_score --margin 0.2 --lower-is-better", 1);
  EXPECT_EQ(j["direction"], "lower");
  // A figure the runs do not record is bad input naming what they hold.
  expect_bad_input("--baseline fp32 --candidate bf16 --metric bleu --margin 1", {"has no \"bleu\"", "perplexity"});
  // A null figure is a diverged run, which never passes.
  auto diverged = runs(base, "bf16");
  diverged[2].extra_evaluation["perplexity"] = nullptr;
  write_ensemble(root_ / "bf16-diverged", diverged);
  const Outcome d = gate("--baseline fp32 --candidate bf16-diverged --metric perplexity --margin 0.2");
  EXPECT_EQ(d.exit_code, 1) << d.out_err;
  EXPECT_NE(d.out.find("evaluation.perplexity is null (diverged)"), std::string::npos) << d.out;
}

TEST_F(GateCli, DivergedRunsNeverPass) {
  // The statistics alone would say equivalent (kClose); one diverged run decides.
  struct Case {
    const char* what;
    void (*spoil)(RunSpec&);
    const char* reason;
  };
  const Case cases[] = {
      {"aborted", [](RunSpec& r) { r.aborted = true; }, "aborted is true"},
      {"null accuracy", [](RunSpec& r) { r.accuracy.reset(); }, "test_accuracy is null"},
      {"non-finite final loss", [](RunSpec& r) { r.final_loss_null = true; }, "final_loss is null"},
  };
  for (const Case& c : cases)
    for (const bool in_candidate : {true, false}) {
      SCOPED_TRACE(std::string(c.what) + (in_candidate ? " in the candidate" : " in the baseline"));
      fs::remove_all(root_ / "fp32");
      fs::remove_all(root_ / "o2");
      auto b = accuracies(kSeeds, kBaseline, "fp32"), o2 = accuracies(kSeeds, kClose, "o2");
      c.spoil((in_candidate ? o2 : b)[3]);
      write_ensemble(root_ / "fp32", b);
      write_ensemble(root_ / "o2", o2);
      const Outcome line = gate("--baseline fp32 --candidate o2 --metric accuracy --margin 1");
      EXPECT_EQ(line.exit_code, 1) << line.out_err;
      EXPECT_EQ(line.out.rfind("NOT EQUIVALENT", 0), 0u) << line.out;
      EXPECT_NE(line.out.find(in_candidate ? "o2/seed-4" : "fp32/seed-4"), std::string::npos) << line.out;
      EXPECT_NE(line.out.find(c.reason), std::string::npos) << line.out;
      const json j = gate_json("--baseline fp32 --candidate o2 --metric accuracy --margin 1", 1);
      EXPECT_EQ(j[in_candidate ? "candidate_runs" : "baseline_runs"][3]["diverged"], true);
    }
}

// One run per side is inconclusive (exit 3) whatever the FIDs say;
// --accept-single-run tests on the bootstrap errors with t(B - 1).
TEST_F(GateCli, FidSingleRunsAreInconclusiveUnlessAccepted) {
  RunSpec b, c;
  b.fid = 20.0;
  b.fid_stderr = 0.3;
  b.fid_replicates = 101;
  c.fid = 20.2;
  c.fid_stderr = 0.4;
  c.fid_replicates = 201;
  c.recipe = "o2";
  write_run(root_ / "gan-fp32", b);
  write_run(root_ / "gan-o2", c);
  const std::string args = "--baseline gan-fp32 --candidate gan-o2 --metric fid";
  const Outcome single = gate(args + " --margin 1.5");
  EXPECT_EQ(single.exit_code, 3) << single.out_err;
  EXPECT_EQ(single.out.rfind("INCONCLUSIVE (fid)", 0), 0u) << single.out;
  EXPECT_NE(single.out.find("--accept-single-run"), std::string::npos) << single.out;
  EXPECT_EQ(gate_json(args + " --margin 1.5", 3)["method"], nullptr);
  // Interval 0.2 -+ t(0.95, min(101, 201) - 1 = 100) 0.5 = [-0.630, 1.030] (GateStatistics.StderrInterval...).
  const json eq = gate_json(args + " --margin 1.5 --accept-single-run", 0);
  EXPECT_EQ(eq["method"], "stderr-t");
  EXPECT_EQ(eq["df"], 100.0);
  EXPECT_NEAR(eq["ci_upper"].get<double>(), 0.2 + 1.660 * 0.5, 0.0005 * 0.5);  // the table's rounding times se
  EXPECT_NE(eq["line"].get<std::string>().find("seed-to-seed variance not covered"), std::string::npos);
  EXPECT_EQ(gate_json(args + " --margin 1 --accept-single-run", 3)["verdict"], "inconclusive");
  c.fid = 25.0;
  write_run(root_ / "gan-o2", c);
  // d = 5, interval [4.17, 5.83]: entirely above 1.5, but one run per side decides nothing without the flag.
  EXPECT_EQ(gate_json(args + " --margin 1.5", 3)["verdict"], "inconclusive");
  EXPECT_EQ(gate_json(args + " --margin 1.5 --accept-single-run", 1)["verdict"], "not equivalent");
  // Two replicates: df 1, the table's t(0.95, 1) = 6.314, interval 5 -+ 3.157 = [1.843, 8.157], which straddles the
  // margin 2: inconclusive, where the normal quantile's [4.18, 5.82] said not equivalent.
  c.fid_replicates = 2;
  write_run(root_ / "gan-o2", c);
  const json two = gate_json(args + " --margin 2 --accept-single-run", 3);
  EXPECT_EQ(two["df"], 1.0);
  EXPECT_NEAR(two["ci_lower"].get<double>(), 5 - 6.314 * 0.5, 0.0005 * 0.5);
  // A run without its replicate count cannot be tested this way.
  c.fid_replicates = 0;
  write_run(root_ / "gan-o2", c);
  expect_bad_input(args + " --margin 2 --accept-single-run", {"gan-o2", "replicates"});
}

TEST_F(GateCli, FidEnsemblesUseTheRuns) {
  std::vector<RunSpec> b, c;
  const double fb[] = {20.0, 21.0, 19.5, 20.5}, fc[] = {20.1, 20.9, 19.7, 20.4};
  for (int i = 0; i < 4; ++i) {
    RunSpec r;
    r.seed = i + 1;
    r.fid = fb[i];
    b.push_back(r);
    r.fid = fc[i];
    r.recipe = "o2";
    c.push_back(r);
  }
  write_ensemble(root_ / "gan-fp32", b);
  write_ensemble(root_ / "gan-o2", c);
  const json j = gate_json("--baseline gan-fp32 --candidate gan-o2 --metric fid --margin 1", 0);
  EXPECT_EQ(j["method"], "paired");
  EXPECT_NEAR(j["difference"].get<double>(), 0.025, 1e-9);  // (0.1 - 0.1 + 0.2 - 0.1)/4
}

// KID as the metric: the runs' evaluation.kid, paired over seeds. Per-seed
// differences {2, -1, 3, -2} x 1e-4: mean 5e-5, sample variance
// (1.5^2 + 1.5^2 + 2.5^2 + 2.5^2) 1e-8 / 3 = 17e-8 / 3, df 3.
TEST_F(GateCli, KidEnsemblesUseTheRuns) {
  std::vector<RunSpec> b, c;
  const double kb[] = {0.0100, 0.0120, 0.0110, 0.0130}, kc[] = {0.0102, 0.0119, 0.0113, 0.0128};
  for (int i = 0; i < 4; ++i) {
    RunSpec r;
    r.seed = i + 1;
    r.fid = 20;
    r.kid = kb[i];
    b.push_back(r);
    r.kid = kc[i];
    r.recipe = "o2";
    c.push_back(r);
  }
  write_ensemble(root_ / "gan-fp32", b);
  write_ensemble(root_ / "gan-o2", c);
  const json j = gate_json("--baseline gan-fp32 --candidate gan-o2 --metric kid --margin 0.002", 0);
  EXPECT_EQ(j["method"], "paired");
  EXPECT_EQ(j["unit"], "KID");
  EXPECT_EQ(j["direction"], "lower");
  EXPECT_NEAR(j["difference"].get<double>(), 5e-5, 1e-15);
  const double se = std::sqrt(17e-8 / 3 / 4);
  EXPECT_NEAR(j["standard_error"].get<double>(), se, 1e-15);
  EXPECT_NEAR(j["ci_upper"].get<double>(), 5e-5 + 2.353 * se, 0.0005 * se);  // the table's t(0.95, 3)
  // A diverged KID never passes; a single KID run has no standard error to test on.
  c[2].kid = NAN;  // written as null by nlohmann
  write_ensemble(root_ / "gan-o2", c);
  EXPECT_EQ(gate_json("--baseline gan-fp32 --candidate gan-o2 --metric kid --margin 0.002", 1)["verdict"],
            "not equivalent");
  write_run(root_ / "one-fp32", b[0]);
  write_run(root_ / "one-o2", c[0]);
  EXPECT_EQ(gate("--baseline one-fp32 --candidate one-o2 --metric kid --margin 0.002").exit_code, 3);
  expect_bad_input("--baseline one-fp32 --candidate one-o2 --metric kid --margin 0.002 --accept-single-run",
                   {"kid_stderr", "not a standard error"});
}

TEST_F(GateCli, LossTailMeanAndEnvelope) {
  // Losses 2/(s+1) + offset over 20 steps; the tail is the last 2 steps (10%).
  std::vector<RunSpec> b, c;
  const double ob[] = {0.00, 0.02, 0.04}, oc[] = {0.01, 0.03, 0.05};
  for (int i = 0; i < 3; ++i) {
    RunSpec r;
    r.seed = i + 1;
    r.loss_offset = ob[i];
    b.push_back(r);
    r.recipe = "o2";
    r.loss_offset = oc[i];
    c.push_back(r);
  }
  write_ensemble(root_ / "fp32", b);
  write_ensemble(root_ / "o2", c);
  const json j = gate_json("--baseline fp32 --candidate o2 --metric loss --margin 0.05", 0);
  EXPECT_EQ(j["method"], "paired");
  EXPECT_NEAR(j["difference"].get<double>(), 0.01, 1e-12);  // every pair differs by exactly 0.01
  EXPECT_EQ(j["loss"]["tail_steps"], 2);
  EXPECT_EQ(j["loss"]["tail_first_step"], 18);
  // Tail mean of seed 1's baseline: (2/19 + 2/20) / 2.
  EXPECT_NEAR(j["baseline_runs"][0]["value"].get<double>(), (2.0 / 19 + 2.0 / 20) / 2, 1e-12);
  // Envelope over steps 2..19 (the warm-up is ceil(10% of 20) = 2 steps): the
  // baseline spans offsets [0, 0.04]; candidate offsets 0.01 and 0.03 stay
  // inside, 0.05 is outside at every step but within the margin.
  const json& e = j["loss"]["envelope"];
  EXPECT_EQ(e["first_step"], 2);
  EXPECT_EQ(e["points"], 3 * 18);
  EXPECT_EQ(e["outside"], 18);
  EXPECT_EQ(e["outside_widened"], 0);
  EXPECT_DOUBLE_EQ(e["expected_outside_fraction"].get<double>(), 0.5);  // 2 / (3 + 1)
  // A candidate 0.2 higher: not equivalent, and outside the widened envelope from step 2 on.
  for (RunSpec& r : c) r.loss_offset += 0.2;
  write_ensemble(root_ / "o2", c);
  const json n = gate_json("--baseline fp32 --candidate o2 --metric loss --margin 0.05", 1);
  EXPECT_EQ(n["loss"]["envelope"]["first_step_outside_widened"], 2);
  EXPECT_EQ(n["loss"]["envelope"]["outside_widened"], 3 * 18);
}

TEST_F(GateCli, NonFiniteLossInTheTailIsDivergence) {
  auto b = accuracies({1, 2}, {0.9, 0.91}, "fp32"), c = accuracies({1, 2}, {0.9, 0.91}, "o2");
  write_ensemble(root_ / "fp32", b);
  write_ensemble(root_ / "o2", c);
  // seed 2's candidate logs null (the run log's non-finite) at step 19.
  std::ofstream steps(root_ / "o2" / "seed-2" / "steps.jsonl");
  for (int s = 0; s < 20; ++s)
    steps << json{{"step", s}, {"loss", s == 19 ? json(nullptr) : json(2.0 / (s + 1))}}.dump() << "\n";
  steps.close();
  const Outcome o = gate("--baseline fp32 --candidate o2 --metric loss --margin 0.05");
  EXPECT_EQ(o.exit_code, 1) << o.out_err;
  EXPECT_NE(o.out.find("non-finite at step 19"), std::string::npos) << o.out;
}

// An aborted run stops early: its short log is the divergence, not a truncated file.
TEST_F(GateCli, AbortedRunWithAShortLogIsNotEquivalent) {
  auto b = accuracies({1, 2}, {0.9, 0.91}, "fp32"), c = accuracies({1, 2}, {0.9, 0.91}, "o2");
  c[0].aborted = true;
  c[0].steps = 12;  // the log holds steps 0..11
  c[0].config_overrides = {{"steps", 20}};
  write_ensemble(root_ / "fp32", b);
  write_ensemble(root_ / "o2", c);
  const Outcome o = gate("--baseline fp32 --candidate o2 --metric loss --margin 0.05");
  EXPECT_EQ(o.exit_code, 1) << o.out_err;
  EXPECT_NE(o.out.find("o2/seed-1"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("aborted is true"), std::string::npos) << o.out;
  // The same short log without "aborted" is a truncated log: bad input.
  c[0].aborted = false;
  write_ensemble(root_ / "o2", c);
  expect_bad_input("--baseline fp32 --candidate o2 --metric loss --margin 0.05",
                   {"holds 12 records but summary.json's config.steps is 20", "truncated"});
}

// ------------------------------------------------------------- bad input

TEST_F(GateCli, BadInputExitsTwoWithAClearMessage) {
  write_ensemble(root_ / "fp32", accuracies(kSeeds, kBaseline, "fp32"));
  write_ensemble(root_ / "o2", accuracies(kSeeds, kClose, "o2"));
  const std::string ok = "--baseline fp32 --candidate o2 --metric accuracy --margin 1";
  ASSERT_EQ(gate(ok).exit_code, 0);

  expect_bad_input("--baseline nowhere --candidate o2 --metric accuracy --margin 1", {"nowhere", "does not exist"});
  expect_bad_input(ok + " --alpha 0.6", {"--alpha"});
  expect_bad_input("--baseline fp32 --candidate o2 --metric accuracy --margin 0", {"--margin"});
  expect_bad_input("--baseline fp32 --candidate o2 --metric accuracy --margin -1", {"--margin"});
  expect_bad_input("--baseline fp32 --candidate o2 --metric speed --margin 1", {"--metric"});
  expect_bad_input("--baseline fp32 --candidate o2 --metric accuracy", {"--margin"});  // required

  // A missing run in an ensemble.
  fs::rename(root_ / "o2" / "seed-3", root_ / "o2-seed-3-moved");
  expect_bad_input(ok, {"o2/seed-3", "not found", "lists seed 3"});
  fs::rename(root_ / "o2-seed-3-moved", root_ / "o2" / "seed-3");
  // A run directory without summary.json.
  fs::create_directories(root_ / "empty-run");
  expect_bad_input("--baseline empty-run --candidate o2 --metric accuracy --margin 1",
                   {"empty-run/summary.json", "not found"});
  // A truncated summary.json.
  {
    const fs::path s = root_ / "o2" / "seed-2" / "summary.json";
    std::ifstream in(s);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(s) << text.substr(0, text.size() / 2);
    expect_bad_input(ok, {"o2/seed-2/summary.json", "truncated"});
    std::ofstream(s) << text;
  }
  // A literal NaN in summary.json.
  {
    const fs::path s = root_ / "o2" / "seed-2" / "summary.json";
    std::ifstream in(s);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string key = "\"test_loss\": 0.3";
    const auto at = text.find(key);
    ASSERT_NE(at, std::string::npos);
    std::string spoiled = text;
    spoiled.replace(at, key.size(), "\"test_loss\": NaN");
    std::ofstream(s) << spoiled;
    expect_bad_input(ok, {"o2/seed-2/summary.json", "literal NaN"});
    std::ofstream(s) << text;
  }
  ASSERT_EQ(gate(ok).exit_code, 0);
  // Mismatched configs: different step counts, different models.
  {
    auto c = accuracies(kSeeds, kClose, "o2");
    for (RunSpec& r : c) r.steps = 40;
    write_ensemble(root_ / "o2-longer", c);
    expect_bad_input("--baseline fp32 --candidate o2-longer --metric accuracy --margin 1",
                     {"mismatched configs", "config.steps", "20", "40"});
    for (RunSpec& r : c) {
      r.steps = 20;
      r.config_overrides = {{"model", "cnn"}};
    }
    write_ensemble(root_ / "o2-cnn", c);
    expect_bad_input("--baseline fp32 --candidate o2-cnn --metric accuracy --margin 1", {"config.model", "cnn"});
    // Two recipes inside one side.
    c = accuracies(kSeeds, kClose, "o2");
    c[4].recipe = "bf16-o2";
    write_ensemble(root_ / "o2-mixed", c);
    expect_bad_input("--baseline fp32 --candidate o2-mixed --metric accuracy --margin 1",
                     {"config.recipe", "one side must be one recipe"});
    // Different test sets.
    c = accuracies(kSeeds, kClose, "o2");
    c[0].test_size = 500;
    write_ensemble(root_ / "o2-test", c);
    expect_bad_input("--baseline fp32 --candidate o2-test --metric accuracy --margin 1", {"test_size", "500"});
  }
  // Mismatched metrics: accuracy asked of GAN runs, and a side without the metric.
  {
    std::vector<RunSpec> g;
    for (const std::int64_t s : kSeeds) {
      RunSpec r;
      r.seed = s;
      r.fid = 20;
      g.push_back(r);
    }
    write_ensemble(root_ / "gan", g);
    write_ensemble(root_ / "gan2", g);
    expect_bad_input("--baseline gan --candidate gan2 --metric accuracy --margin 1",
                     {"gan/seed-1/summary.json", "no \"test_accuracy\"", "fid"});
    expect_bad_input("--baseline fp32 --candidate o2 --metric fid --margin 1", {"no \"fid\"", "test_accuracy"});
    auto c = accuracies(kSeeds, kClose, "o2");
    c[5].accuracy_key = false;  // an evaluation without test_accuracy
    write_ensemble(root_ / "o2-noacc", c);
    expect_bad_input("--baseline fp32 --candidate o2-noacc --metric accuracy --margin 1",
                     {"o2-noacc/seed-6/summary.json", "no \"test_accuracy\""});
  }
  // Paired asked of different seeds, or of single runs; --accept-single-run where no standard error exists.
  {
    write_run(root_ / "single-fp32", accuracies({1}, {0.9}, "fp32")[0]);
    write_run(root_ / "single-o2", accuracies({1}, {0.9}, "o2")[0]);
    expect_bad_input("--baseline single-fp32 --candidate single-o2 --metric accuracy --margin 1 --method paired",
                     {"--method paired", ">= 2 runs per side"});
    expect_bad_input("--baseline single-fp32 --candidate single-o2 --metric accuracy --margin 1 --accept-single-run",
                     {"--accept-single-run", "no standard error"});
    write_ensemble(root_ / "o2-other", accuracies({7, 8, 9, 10, 11, 12}, kClose, "o2"));
    expect_bad_input("--baseline fp32 --candidate o2-other --metric accuracy --margin 1 --method paired",
                     {"--method paired", "same set"});
  }
  // ensemble.json without seeds; a seed directory whose summary names another seed.
  {
    write_ensemble(root_ / "o2-bad", accuracies(kSeeds, kClose, "o2"));
    std::ofstream(root_ / "o2-bad" / "ensemble.json") << R"({"config": {}})";
    expect_bad_input("--baseline fp32 --candidate o2-bad --metric accuracy --margin 1",
                     {"o2-bad/ensemble.json", "\"seeds\""});
    auto c = accuracies(kSeeds, kClose, "o2");
    write_ensemble(root_ / "o2-renamed", c);
    c[1].seed = 99;
    write_run(root_ / "o2-renamed" / "seed-2", c[1]);
    expect_bad_input("--baseline fp32 --candidate o2-renamed --metric accuracy --margin 1",
                     {"o2-renamed/seed-2/summary.json", "config.seed is 99"});
  }
}

// The same directory on both sides is refused (exit 2). Identical accuracies
// on both sides take the accuracy's steps as their spread (equivalence.h):
// 2 seeds on a 10-example test set (steps of 10 points) prove nothing at a
// margin of 1 point; 6 seeds on 1000 examples (steps of 0.1) do.
TEST_F(GateCli, NoSpreadTakesTheAccuracysStepsAsItsSpread) {
  write_ensemble(root_ / "fp32", accuracies(kSeeds, kBaseline, "fp32"));
  expect_bad_input("--baseline fp32 --candidate fp32 --metric accuracy --margin 1", {"same directory"});
  expect_bad_input("--baseline fp32 --candidate ./fp32/ --metric accuracy --margin 1", {"same directory"});
  write_ensemble(root_ / "o2", accuracies(kSeeds, kBaseline, "o2"));  // the same accuracies, seed for seed
  const json j = gate_json("--baseline fp32 --candidate o2 --metric accuracy --margin 1", 0);
  EXPECT_NEAR(j["resolution_spread"].get<double>(), 0.1, 1e-12);
  // se = (0.1 / sqrt(6)) / sqrt(6) over 6 pairs, df 5
  EXPECT_NEAR(j["standard_error"].get<double>(), 0.1 / 6.0, 1e-12);
  EXPECT_NE(j["line"].get<std::string>().find("no spread between the runs"), std::string::npos);

  auto small = [&](const std::string& recipe) {
    auto runs = accuracies({1, 2}, {0.9, 0.8}, recipe);
    for (RunSpec& r : runs) r.test_size = 10;
    return runs;
  };
  write_ensemble(root_ / "fp32-small", small("fp32"));
  write_ensemble(root_ / "o2-small", small("o2"));
  const Outcome o = gate("--baseline fp32-small --candidate o2-small --metric accuracy --margin 1");
  EXPECT_EQ(o.exit_code, 3) << o.out_err;
  EXPECT_EQ(o.out.rfind("INCONCLUSIVE (accuracy)", 0), 0u) << o.out;
  EXPECT_NE(o.out.find("steps of 10 points"), std::string::npos) << o.out;
}

TEST_F(GateCli, BadStepLogsExitTwoWithTheLine) {
  auto b = accuracies({1, 2, 3}, {0.9, 0.91, 0.92}, "fp32"), c = accuracies({1, 2, 3}, {0.901, 0.908, 0.921}, "o2");
  c[0].loss_offset = 0.001, c[1].loss_offset = -0.002, c[2].loss_offset = 0.0005;  // a spread between the seeds
  write_ensemble(root_ / "fp32", b);
  write_ensemble(root_ / "o2", c);
  const std::string loss = "--baseline fp32 --candidate o2 --metric loss --margin 0.1";
  ASSERT_EQ(gate(loss).exit_code, 0);
  const fs::path log = root_ / "o2" / "seed-3" / "steps.jsonl";
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < text.size();) {
    const auto end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  ASSERT_EQ(lines.size(), 20u);
  auto write_lines = [&](std::vector<std::string> l, bool final_newline = true) {
    std::string t;
    for (std::size_t i = 0; i < l.size(); ++i) t += l[i] + (i + 1 < l.size() || final_newline ? "\n" : "");
    std::ofstream(log) << t;
  };
  // A literal NaN on line 6.
  {
    auto l = lines;
    l[5] = R"({"step": 5, "loss": NaN, "scale": 65536.0})";
    write_lines(l);
    expect_bad_input(loss, {"o2/seed-3/steps.jsonl", "line 6", "literal NaN"});
  }
  // Truncated: the last line cut in the middle (no newline at the end).
  {
    auto l = lines;
    l.back() = l.back().substr(0, l.back().size() / 2);
    write_lines(l, false);
    expect_bad_input(loss, {"o2/seed-3/steps.jsonl", "line 20", "cut off", "truncated"});
  }
  // Malformed in the middle.
  {
    auto l = lines;
    l[9] = R"({"step": 9, "loss": })";
    write_lines(l);
    expect_bad_input(loss, {"o2/seed-3/steps.jsonl", "line 10", "not valid JSON"});
  }
  // Missing steps: the log stops at step 14 while config.steps is 20.
  {
    auto l = lines;
    l.resize(15);
    write_lines(l);
    expect_bad_input(loss, {"o2/seed-3/steps.jsonl", "holds 15 records but summary.json's config.steps is 20"});
  }
  // A step without the loss key; a repeated step.
  {
    auto l = lines;
    l[3] = R"({"step": 3, "scale": 65536.0})";
    write_lines(l);
    expect_bad_input(loss, {"o2/seed-3/steps.jsonl", "line 4", "no \"loss\""});
    l = lines;
    l[4] = l[3];
    write_lines(l);
    expect_bad_input(loss, {"line 5", "step 3 appears a second time"});
  }
  // Missing steps.jsonl.
  fs::remove(log);
  expect_bad_input(loss, {"o2/seed-3/steps.jsonl", "does not exist"});
  // ... which the accuracy gate does not read.
  EXPECT_EQ(gate("--baseline fp32 --candidate o2 --metric accuracy --margin 1").exit_code, 0);
  // A forged config.steps (10^9, on every run, so that the configs agree) is refused before anything is
  // sized by it: it once asked for 16 GB.
  {
    write_lines(lines);
    for (const char* side : {"fp32", "o2"})
      for (const fs::directory_entry& seed : fs::directory_iterator(root_ / side)) {
        if (!seed.is_directory()) continue;
        const fs::path summary = seed.path() / "summary.json";
        std::ifstream sin(summary);
        nlohmann::json j = nlohmann::json::parse(sin);
        sin.close();
        j["config"]["steps"] = 1000000000;
        std::ofstream(summary) << j.dump();
      }
    expect_bad_input(loss, {"steps.jsonl", "holds 20 records but summary.json's config.steps is 1000000000"});
  }
}

// ------------------------------------------------------------------ JUnit

const XmlElement& only_testcase(const XmlElement& root) {
  EXPECT_EQ(root.name, "testsuites");
  const auto suites = root.all("testsuite");
  EXPECT_EQ(suites.size(), 1u);
  const auto cases = suites.at(0)->all("testcase");
  EXPECT_EQ(cases.size(), 1u);
  return *cases.at(0);
}

std::map<std::string, std::string> properties_of(const XmlElement& root) {
  std::map<std::string, std::string> p;
  const XmlElement* props = root.first("testsuite")->first("properties");
  EXPECT_NE(props, nullptr);
  if (!props) return p;
  for (const XmlElement* e : props->all("property")) {
    EXPECT_TRUE(e->has("name") && e->has("value"));
    p[e->attributes.at("name")] = e->attributes.at("value");
  }
  return p;
}

XmlElement read_report(const fs::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << file;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>", 0), 0u);
  return parse_xml(text);
}

TEST_F(GateCli, JUnitReportForEachVerdict) {
  write_ensemble(root_ / "fp32", accuracies(kSeeds, kBaseline, "fp32"));
  write_ensemble(root_ / "o2", accuracies(kSeeds, kClose, "o2"));
  write_ensemble(root_ / "o2-drop", accuracies(kSeeds, kDropped, "o2"));
  write_ensemble(root_ / "wide-a", accuracies({1, 2, 3}, {0.86, 0.92, 0.89}, "fp32"));
  write_ensemble(root_ / "wide-b", accuracies({4, 5, 6}, {0.865, 0.925, 0.895}, "o2"));
  struct Case {
    std::string args;
    int exit_code;
    const char* element;  // nullptr: passed
    const char* type;
    const char* verdict;
  };
  const Case cases[] = {
      {"--baseline fp32 --candidate o2", 0, nullptr, nullptr, "equivalent"},
      {"--baseline fp32 --candidate o2-drop", 1, "failure", "not-equivalent", "not equivalent"},
      {"--baseline wide-a --candidate wide-b", 3, "error", "inconclusive", "inconclusive"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const fs::path report = root_ / "report.xml";
    fs::remove(report);
    const Outcome o = gate(c.args + " --metric accuracy --margin 1 --junit " + report.string());
    ASSERT_EQ(o.exit_code, c.exit_code) << o.out_err;
    EXPECT_FALSE(fs::exists(report.string() + ".tmp"));
    const XmlElement root = read_report(report);
    const XmlElement& suite = *root.first("testsuite");
    const XmlElement& tc = only_testcase(root);
    for (const XmlElement* e : {&root, &suite}) {
      EXPECT_EQ(e->attributes.at("tests"), "1");
      EXPECT_EQ(e->attributes.at("failures"), c.element && std::string(c.element) == "failure" ? "1" : "0");
      EXPECT_EQ(e->attributes.at("errors"), c.element && std::string(c.element) == "error" ? "1" : "0");
      EXPECT_EQ(e->attributes.at("skipped"), "0");
      EXPECT_TRUE(e->has("name"));
      EXPECT_TRUE(e->has("time"));
    }
    EXPECT_EQ(tc.attributes.at("classname"), "mpverify.gate.accuracy");
    EXPECT_NE(tc.attributes.at("name").find("accuracy parity"), std::string::npos);
    EXPECT_NO_THROW((void)std::stod(tc.attributes.at("time")));
    // Exactly one outcome element, of the right kind, whose message is the printed verdict line.
    std::size_t outcomes = 0;
    for (const char* kind : {"failure", "error", "skipped"}) outcomes += tc.all(kind).size();
    EXPECT_EQ(outcomes, c.element ? 1u : 0u);
    if (c.element) {
      const XmlElement* e = tc.first(c.element);
      ASSERT_NE(e, nullptr);
      EXPECT_EQ(e->attributes.at("type"), c.type);
      std::string line = o.out;
      if (!line.empty() && line.back() == '\n') line.pop_back();
      EXPECT_EQ(e->attributes.at("message"), line);
      EXPECT_FALSE(e->text.empty());
    }
    ASSERT_NE(tc.first("system-out"), nullptr);
    EXPECT_NE(tc.first("system-out")->text.find("baseline"), std::string::npos);
    const auto p = properties_of(root);
    EXPECT_EQ(p.at("verdict"), c.verdict);
    EXPECT_EQ(p.at("exit_code"), std::to_string(c.exit_code));
    for (const char* key : {"metric", "method", "margin", "alpha", "n_baseline", "n_candidate", "mean_baseline",
                            "mean_candidate", "difference", "ci_lower", "ci_upper", "p_lower", "p_upper"})
      EXPECT_EQ(p.count(key), 1u) << key;
    EXPECT_EQ(p.at("margin"), "1.0");
    // The numbers read back as the JSON's.
    const json j = gate_json(c.args + " --metric accuracy --margin 1", c.exit_code);
    EXPECT_EQ(std::stod(p.at("difference")), j["difference"].get<double>());
    EXPECT_EQ(std::stod(p.at("ci_upper")), j["ci_upper"].get<double>());
    EXPECT_EQ(p.count("candidate_run:" + j["candidate_runs"][0]["run"].get<std::string>()), 1u);
  }
}

TEST(GateJUnit, EscapesEverythingAndReadsBack) {
  using namespace mpverify::report;
  JUnitTestSuite suite;
  suite.name = "suite <&> \"quoted\" 'single'";
  suite.properties.push_back({"a&b", "line one\nline two\ttab <tag> & \"q\""});
  JUnitTestCase c;
  c.name = "case ]]> & <";
  c.classname = "x.y";
  c.outcome = JUnitOutcome::failure;
  c.message = "msg with \x01 control and \"quotes\"";
  c.type = "t";
  c.details = "details <b>&amp;</b>\nmore";
  c.system_out = "out & about";
  suite.cases.push_back(c);
  JUnitTestCase passed;
  passed.name = "ok";
  passed.classname = "x.y";
  suite.cases.push_back(passed);
  const XmlElement root = parse_xml(junit_xml(suite));
  EXPECT_EQ(root.attributes.at("name"), suite.name);
  EXPECT_EQ(root.attributes.at("tests"), "2");
  EXPECT_EQ(root.attributes.at("failures"), "1");
  const XmlElement& s = *root.first("testsuite");
  const XmlElement& prop = *s.first("properties")->first("property");
  EXPECT_EQ(prop.attributes.at("name"), "a&b");
  EXPECT_EQ(prop.attributes.at("value"), "line one\nline two\ttab <tag> & \"q\"");  // newline and tab survive
  const auto cases = s.all("testcase");
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0]->attributes.at("name"), c.name);
  EXPECT_EQ(cases[0]->first("failure")->attributes.at("message"), "msg with \xEF\xBF\xBD control and \"quotes\"");
  EXPECT_EQ(cases[0]->first("failure")->text, c.details);
  EXPECT_EQ(cases[0]->first("system-out")->text, "out & about");
  EXPECT_TRUE(cases[1]->children.empty());
  // The checker itself rejects what is not well-formed.
  EXPECT_THROW(parse_xml("<a><b></a></b>"), std::runtime_error);
  EXPECT_THROW(parse_xml("<a x=\"1 & 2\"/>"), std::runtime_error);
  EXPECT_THROW(parse_xml("<a x=\"<\"/>"), std::runtime_error);
  EXPECT_THROW(parse_xml("<a>&#1;</a>"), std::runtime_error);
  EXPECT_THROW(parse_xml("<a/><b/>"), std::runtime_error);
  EXPECT_THROW(parse_xml("<a x=\"1\" x=\"2\"/>"), std::runtime_error);
}

TEST(GateJUnit, WrittenAtomicallyReplacingTheOldReport) {
  char path[] = "/tmp/mpverify-junit-XXXXXX";
  ASSERT_NE(mkdtemp(path), nullptr);
  const fs::path file = fs::path(path) / "r.xml";
  std::ofstream(file) << "old";
  mpverify::report::JUnitTestSuite suite;
  suite.name = "s";
  suite.cases.push_back({});
  mpverify::report::write_junit(file, suite);
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, mpverify::report::junit_xml(suite));
  EXPECT_FALSE(fs::exists(fs::path(path) / "r.xml.tmp"));
  EXPECT_THROW(mpverify::report::write_junit(fs::path(path) / "no-such-dir" / "r.xml", suite), std::runtime_error);
  fs::remove_all(path);
}

}  // namespace
