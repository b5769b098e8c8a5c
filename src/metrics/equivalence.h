// Equivalence tests for the parity gate (`mpverify gate`): is the candidate's
// mean within ±margin of the baseline's? Two one-sided tests (TOST, Schuirmann
// 1987) at level alpha, in their confidence-interval form: the (1 - 2 alpha)
// confidence interval of the difference d = mean(candidate) - mean(baseline).
//
// Three verdicts, decided from the interval [lower, upper] alone:
//  - equivalent:     -margin < lower and upper < margin. Both one-sided tests
//                    reject (H0: d <= -margin, H0: d >= margin) at level alpha,
//                    so a pair whose true |d| >= margin is called equivalent
//                    with probability at most alpha.
//  - not equivalent: lower > margin or upper < -margin (the interval lies
//                    entirely outside [-margin, margin]). That is a one-sided
//                    level-alpha test rejecting d <= margin (or d >= -margin):
//                    a pair whose true |d| <= margin is called not equivalent
//                    with probability at most alpha (alpha exactly when the
//                    true d sits on the margin, far less when it is 0).
//  - inconclusive:   anything else (the interval straddles a margin, or covers
//                    all of [-margin, margin]): the data cannot tell at this
//                    alpha; more runs would.
// An end exactly on a margin is inconclusive (neither strict inequality holds).
//
// Methods (the `method` field; the gate says which one it used):
//  - welch:  independent samples, unequal variances. se^2 = s_b^2/n_b +
//            s_c^2/n_c, Welch-Satterthwaite degrees of freedom
//            df = se^4 / ((s_b^2/n_b)^2/(n_b-1) + (s_c^2/n_c)^2/(n_c-1)),
//            quantile t(1 - alpha, df). Needs n >= 2 on each side.
//  - paired: the same seeds on both sides (same initialisation and data order),
//            so the per-seed differences d_k = c_k - b_k carry the signal and
//            the shared noise cancels: se = sd(d)/sqrt(n), df = n - 1. Needs
//            n >= 2 pairs.
//  - stderr_t: one value per side, each with its own standard error (an
//            FID and its bootstrap standard error): se^2 = se_b^2 + se_c^2,
//            the t quantile with the caller's df. Each standard error is the
//            standard deviation of B replicates, an estimate with B - 1
//            degrees of freedom; the gate passes df = min(B_b, B_c) - 1, the
//            low end of the Welch-Satterthwaite range for the sum (the df of
//            a sum of two variance estimates lies between the smaller df and
//            their total), so the interval is never narrower than the
//            Satterthwaite one. With B = 2 that is t(0.95, 1) = 6.31 where the
//            normal quantile 1.645 claimed a precision 2 replicates cannot
//            give. Covers the evaluation's sampling noise only, NOT
//            seed-to-seed variance; the gate says so.
// Student-t and normal quantiles come from Boost.Math.
//
// When se is 0 (no spread between the runs: every value equal on each side,
// or every per-seed difference equal) the sample says nothing of the noise.
// A zero spread from 2 or 3 runs is what a coarse metric gives (accuracy on a
// small test set moves in steps of 100/test_size points), not evidence: taken
// at face value, 2 seeds per side with accuracy rounded to 1 point passed
// about 25% of pairs whose true gap equals the margin, where the test promises
// at most alpha (5%). So:
//  - with options.resolution > 0 (the spacing of the values), the rounding to
//    that grid is taken as the spread: each value uniform within +-res/2,
//    variance res^2/12 (res^2/6 for a paired difference), and the test runs
//    on that (`resolution_spread` holds res then). Identical runs then pass once
//    there are enough of them for that spread: never on 2 seeds at a margin
//    of a few res;
//  - without one (continuous values) the verdict is inconclusive: interval
//    [d, d], p-values 1, no seeds_needed.
//
// seeds_needed (inconclusive only, welch/paired): the smallest number of runs
// per side (pairs for paired) with which the interval would have been
// decisive IF the observed difference and spreads were the true ones — a
// planning estimate, not a promise (the next runs move both). Towards
// "equivalent" when |d| < margin, towards "not equivalent" when |d| > margin;
// none when |d| == margin or when more than 10000 would be needed.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>

namespace mpverify::metrics {

enum class Verdict { equivalent, not_equivalent, inconclusive };
enum class EquivalenceMethod { welch, paired, stderr_t };

const char* to_string(Verdict verdict);           // "equivalent", "not equivalent", "inconclusive"
const char* to_string(EquivalenceMethod method);  // "welch", "paired", "stderr-t"

struct EquivalenceOptions {
  EquivalenceOptions() = default;
  EquivalenceOptions(double margin_, double alpha_ = 0.05, bool estimate_seeds_needed_ = true)
      : margin(margin_), alpha(alpha_), estimate_seeds_needed(estimate_seeds_needed_) {}
  double margin = 0;    // > 0, finite, in the values' unit
  double alpha = 0.05;  // in (0, 0.5)
  double resolution = 0;  // the spacing of the values (accuracy: 100/test_size points); 0: continuous
  bool estimate_seeds_needed = true;  // false skips the search (simulations call the tests millions of times)
};

struct EquivalenceResult {
  Verdict verdict = Verdict::inconclusive;
  EquivalenceMethod method = EquivalenceMethod::welch;
  std::size_t n_baseline = 0, n_candidate = 0;
  double mean_baseline = 0, mean_candidate = 0;
  double sd_baseline = 0, sd_candidate = 0;  // sample standard deviations (0 for stderr_t)
  double sd_difference = 0;                  // paired only: sd of the per-seed differences
  double difference = 0;                     // mean_candidate - mean_baseline
  double standard_error = 0;
  double df = 0;        // degrees of freedom; +infinity only when a caller passes it to stderr_t_tost
  double quantile = 0;  // t(1 - alpha, df) (or z(1 - alpha))
  double lower = 0, upper = 0;  // the (1 - 2 alpha) confidence interval of the difference
  // TOST p-values: p_lower for H0: d <= -margin, p_upper for H0: d >= margin.
  // Equivalent exactly when both are < alpha (up to ties at the boundary).
  double p_lower = 1, p_upper = 1;
  double margin = 0, alpha = 0;
  double resolution_spread = 0;  // > 0: the observed spread was 0 and this resolution stood in for it
  std::optional<std::size_t> seeds_needed;
};

// Throw std::invalid_argument on a margin/alpha out of range, too few values,
// or a non-finite value (the gate rejects those as bad input first).
EquivalenceResult welch_tost(std::span<const double> baseline, std::span<const double> candidate,
                             const EquivalenceOptions& options);
// baseline[k] and candidate[k] come from the same seed; the spans have equal sizes.
EquivalenceResult paired_tost(std::span<const double> baseline, std::span<const double> candidate,
                              const EquivalenceOptions& options);
// One value per side with its standard error (>= 0, finite); df > 0 (+infinity:
// the normal quantile).
EquivalenceResult stderr_t_tost(double baseline, double baseline_stderr, double candidate, double candidate_stderr,
                                double df, const EquivalenceOptions& options);
// The df stderr_t_tost takes for two standard errors from b and c replicates
// (each >= 2): min(b, c) - 1 (see the top of this file).
double replicates_df(std::size_t replicates_b, std::size_t replicates_c);

// The verdict of an interval against ±margin (the rule above).
Verdict classify_interval(double lower, double upper, double margin);

// Quantiles: t(p, df) for df > 0 (df = +infinity gives the normal quantile),
// and the normal quantile z(p); p in (0, 1).
double student_t_quantile(double p, double df);
double normal_quantile(double p);
// P(T > t) for T ~ t(df) (df = +infinity: standard normal).
double student_t_upper_tail(double t, double df);

// The Welch-Satterthwaite degrees of freedom for variances var_b, var_c and
// sizes n_b, n_c >= 2 (not both variances 0).
double welch_df(double var_b, std::size_t n_b, double var_c, std::size_t n_c);

}  // namespace mpverify::metrics
