#include "metrics/equivalence.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>

namespace mpverify::metrics {

namespace {

// Beyond this many runs per side the estimate is not worth printing: nobody
// trains 10000 seeds, and the number would be noise-driven anyway.
constexpr std::size_t kMaxSeedsNeeded = 10000;

void check_options(const EquivalenceOptions& o) {
  if (!(std::isfinite(o.margin) && o.margin > 0))
    throw std::invalid_argument("equivalence: the margin must be a finite number > 0");
  if (!(o.alpha > 0 && o.alpha < 0.5))
    throw std::invalid_argument("equivalence: alpha must lie in (0, 0.5) (the interval has level 1 - 2 alpha)");
}

void check_values(std::span<const double> values, const char* side, std::size_t at_least) {
  if (values.size() < at_least) {
    std::string m = "equivalence: the ";
    m += side;
    m += " needs at least " + std::to_string(at_least) + " values, got " + std::to_string(values.size());
    throw std::invalid_argument(m);
  }
  for (double v : values)
    if (!std::isfinite(v)) {
      std::string m = "equivalence: a non-finite value on the ";
      m += side;
      m += " side";
      throw std::invalid_argument(m);
    }
}

double mean_of(std::span<const double> v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

// Sample variance (n - 1 in the denominator), two-pass.
double variance_of(std::span<const double> v, double mean) {
  double sum = 0;
  for (double x : v) sum += (x - mean) * (x - mean);
  return sum / static_cast<double>(v.size() - 1);
}

// Fills the interval, p-values and verdict from difference, se, df.
void finish(EquivalenceResult& r, const EquivalenceOptions& o) {
  r.margin = o.margin;
  r.alpha = o.alpha;
  r.quantile = student_t_quantile(1 - o.alpha, r.df);
  if (r.standard_error > 0) {
    r.lower = r.difference - r.quantile * r.standard_error;
    r.upper = r.difference + r.quantile * r.standard_error;
    r.p_lower = student_t_upper_tail((r.difference + o.margin) / r.standard_error, r.df);
    r.p_upper = student_t_upper_tail((o.margin - r.difference) / r.standard_error, r.df);
  } else {  // no spread, no estimate of the noise: no test (see the header)
    r.lower = r.upper = r.difference;
    r.p_lower = r.p_upper = 1.0;
    r.verdict = Verdict::inconclusive;
    return;
  }
  r.verdict = classify_interval(r.lower, r.upper, o.margin);
}

// The smallest n in (current, kMaxSeedsNeeded] with half_width(n) < target,
// where half_width decreases in n and half_width(current) >= target (or
// current is below every count that half_width takes); nullopt when none.
template <class HalfWidth>
std::optional<std::size_t> smallest_n(std::size_t current, double target, HalfWidth half_width) {
  if (!(target > 0)) return std::nullopt;
  std::size_t lo = current, hi = kMaxSeedsNeeded;  // half_width(lo) >= target is assumed (inconclusive now)
  if (!(half_width(hi) < target)) return std::nullopt;
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    (half_width(mid) < target ? hi : lo) = mid;
  }
  return hi;
}

double target_for(const EquivalenceResult& r) {
  const double gap = std::fabs(r.difference) - r.margin;
  return gap < 0 ? -gap : gap;  // distance from |d| to the margin; 0 when on it
}

}  // namespace

const char* to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::equivalent: return "equivalent";
    case Verdict::not_equivalent: return "not equivalent";
    case Verdict::inconclusive: return "inconclusive";
  }
  return "?";
}

const char* to_string(EquivalenceMethod method) {
  switch (method) {
    case EquivalenceMethod::welch: return "welch";
    case EquivalenceMethod::paired: return "paired";
    case EquivalenceMethod::stderr_t: return "stderr-t";
  }
  return "?";
}

Verdict classify_interval(double lower, double upper, double margin) {
  if (-margin < lower && upper < margin) return Verdict::equivalent;
  if (lower > margin || upper < -margin) return Verdict::not_equivalent;
  return Verdict::inconclusive;
}

double normal_quantile(double p) {
  if (!(p > 0 && p < 1)) throw std::invalid_argument("normal_quantile: p must lie in (0, 1)");
  return boost::math::quantile(boost::math::normal_distribution<double>(), p);
}

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1)) throw std::invalid_argument("student_t_quantile: p must lie in (0, 1)");
  if (!(df > 0)) throw std::invalid_argument("student_t_quantile: df must be > 0");
  if (std::isinf(df)) return normal_quantile(p);
  // The last (p, df) asked on this thread, and its quantile: Boost's inversion in long double was most of
  // a simulation's time (gate_calibration), whose paired tests ask the same (p, n - 1) trial after trial.
  // The same arguments give the same bits, so the memo changes no result.
  thread_local double last_p = 0, last_df = 0, last_quantile = 0;
  if (p == last_p && df == last_df) return last_quantile;
  last_quantile = boost::math::quantile(boost::math::students_t_distribution<double>(df), p);
  last_p = p;
  last_df = df;
  return last_quantile;
}

double student_t_upper_tail(double t, double df) {
  if (!(df > 0)) throw std::invalid_argument("student_t_upper_tail: df must be > 0");
  if (std::isnan(t)) throw std::invalid_argument("student_t_upper_tail: t is NaN");
  if (std::isinf(t)) return t > 0 ? 0.0 : 1.0;
  if (std::isinf(df)) return boost::math::cdf(boost::math::complement(boost::math::normal_distribution<double>(), t));
  return boost::math::cdf(boost::math::complement(boost::math::students_t_distribution<double>(df), t));
}

double welch_df(double var_b, std::size_t n_b, double var_c, std::size_t n_c) {
  const double a = var_b / static_cast<double>(n_b), c = var_c / static_cast<double>(n_c);
  const double denominator =
      a * a / static_cast<double>(n_b - 1) + c * c / static_cast<double>(n_c - 1);
  return (a + c) * (a + c) / denominator;
}

EquivalenceResult welch_tost(std::span<const double> baseline, std::span<const double> candidate,
                             const EquivalenceOptions& options) {
  check_options(options);
  check_values(baseline, "baseline", 2);
  check_values(candidate, "candidate", 2);
  EquivalenceResult r;
  r.method = EquivalenceMethod::welch;
  r.n_baseline = baseline.size();
  r.n_candidate = candidate.size();
  r.mean_baseline = mean_of(baseline);
  r.mean_candidate = mean_of(candidate);
  const double var_b = variance_of(baseline, r.mean_baseline), var_c = variance_of(candidate, r.mean_candidate);
  r.sd_baseline = std::sqrt(var_b);
  r.sd_candidate = std::sqrt(var_c);
  r.difference = r.mean_candidate - r.mean_baseline;
  r.standard_error =
      std::sqrt(var_b / static_cast<double>(r.n_baseline) + var_c / static_cast<double>(r.n_candidate));
  // With both variances 0 the df formula is 0/0; the interval is a point then
  // and the quantile unused, so any df serves: the pooled n_b + n_c - 2.
  double spread_b = var_b, spread_c = var_c;  // what the test and the planning use
  if (!(r.standard_error > 0) && options.resolution > 0) {  // see the header: the rounding as the spread
    spread_b = spread_c = options.resolution * options.resolution / 12;
    r.standard_error = std::sqrt(spread_b / static_cast<double>(r.n_baseline) +
                                 spread_c / static_cast<double>(r.n_candidate));
    r.resolution_spread = options.resolution;
  }
  r.df = r.standard_error > 0 ? welch_df(spread_b, r.n_baseline, spread_c, r.n_candidate)
                              : static_cast<double>(r.n_baseline + r.n_candidate - 2);
  finish(r, options);
  // Planned as n per side: the search starts at 2, since with unequal sides
  // the larger count may already suffice (only the smaller side needs more).
  if (options.estimate_seeds_needed && r.verdict == Verdict::inconclusive && r.standard_error > 0)
    r.seeds_needed = smallest_n(1, target_for(r), [&](std::size_t n) {
      const double se = std::sqrt((spread_b + spread_c) / static_cast<double>(n));
      return student_t_quantile(1 - options.alpha, welch_df(spread_b, n, spread_c, n)) * se;
    });
  return r;
}

EquivalenceResult paired_tost(std::span<const double> baseline, std::span<const double> candidate,
                              const EquivalenceOptions& options) {
  check_options(options);
  check_values(baseline, "baseline", 2);
  check_values(candidate, "candidate", 2);
  if (baseline.size() != candidate.size())
    throw std::invalid_argument("equivalence: a paired test needs as many candidate values as baseline values");
  const std::size_t n = baseline.size();
  std::vector<double> differences(n);
  for (std::size_t k = 0; k < n; ++k) differences[k] = candidate[k] - baseline[k];
  EquivalenceResult r;
  r.method = EquivalenceMethod::paired;
  r.n_baseline = r.n_candidate = n;
  r.mean_baseline = mean_of(baseline);
  r.mean_candidate = mean_of(candidate);
  r.sd_baseline = std::sqrt(variance_of(baseline, r.mean_baseline));
  r.sd_candidate = std::sqrt(variance_of(candidate, r.mean_candidate));
  r.difference = mean_of(differences);
  const double var_d = variance_of(differences, r.difference);
  r.sd_difference = std::sqrt(var_d);
  double spread_d = r.sd_difference;  // what the test and the planning use
  if (!(r.sd_difference > 0) && options.resolution > 0) {  // see the header: the rounding as the spread
    spread_d = options.resolution / std::sqrt(6.0);
    r.resolution_spread = options.resolution;
  }
  r.standard_error = spread_d / std::sqrt(static_cast<double>(n));
  r.df = static_cast<double>(n - 1);
  finish(r, options);
  if (options.estimate_seeds_needed && r.verdict == Verdict::inconclusive && r.standard_error > 0)
    r.seeds_needed = smallest_n(n, target_for(r), [&](std::size_t m) {
      return student_t_quantile(1 - options.alpha, static_cast<double>(m - 1)) * spread_d /
             std::sqrt(static_cast<double>(m));
    });
  return r;
}

double replicates_df(std::size_t replicates_b, std::size_t replicates_c) {
  if (replicates_b < 2 || replicates_c < 2)
    throw std::invalid_argument("equivalence: a standard error needs at least 2 replicates");
  return static_cast<double>(std::min(replicates_b, replicates_c) - 1);
}

EquivalenceResult stderr_t_tost(double baseline, double baseline_stderr, double candidate, double candidate_stderr,
                                double df, const EquivalenceOptions& options) {
  check_options(options);
  if (!(df > 0)) throw std::invalid_argument("equivalence: df must be > 0");
  for (double v : {baseline, baseline_stderr, candidate, candidate_stderr})
    if (!std::isfinite(v)) throw std::invalid_argument("equivalence: a non-finite value or standard error");
  if (baseline_stderr < 0 || candidate_stderr < 0)
    throw std::invalid_argument("equivalence: a negative standard error");
  EquivalenceResult r;
  r.method = EquivalenceMethod::stderr_t;
  r.n_baseline = r.n_candidate = 1;
  r.mean_baseline = baseline;
  r.mean_candidate = candidate;
  r.difference = candidate - baseline;
  r.standard_error = std::hypot(baseline_stderr, candidate_stderr);
  r.df = df;
  finish(r, options);
  return r;
}

}  // namespace mpverify::metrics
