// The MLPerf-style steps-to-target check (metrics/curve_gate.h has the rule).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "metrics/curve_gate.h"
#include "metrics/equivalence.h"

namespace mpverify::metrics {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

std::string mlperf_number_text(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

// Each run's steps to target (+inf: never reached) into its outcome; the
// first divergence (a non-finite value anywhere, or a declared one) into `why`.
std::vector<double> side_steps(const CurveSide& side, const char* name, double target, Direction direction,
                               std::vector<RunOutcome>& outcomes, std::string& why) {
  std::vector<double> steps;
  for (const CurveRun& r : side.runs) {
    RunOutcome o;
    o.run = r.run;
    o.seed = r.seed;
    o.divergence = r.divergence;
    for (const auto& [step, v] : r.values)
      if (!v && o.divergence.empty()) o.divergence = "non-finite at step " + std::to_string(step);
    if (!o.divergence.empty() && why.empty())
      why = std::string(name) + " run '" + r.run + "' diverged (" + o.divergence + "): a diverged run never passes";
    const auto reached = steps_to_target(r.values, target, direction);
    steps.push_back(reached ? static_cast<double>(*reached) : kInfinity);
    if (reached && o.divergence.empty()) o.value = static_cast<double>(*reached);
    outcomes.push_back(std::move(o));
  }
  return steps;
}

// Sorted, without the fastest and the slowest ("olympic").
std::vector<double> olympic(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return std::vector<double>(v.begin() + 1, v.end() - 1);
}

double mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); }

double sample_variance(const std::vector<double>& v, double m) {
  if (v.size() < 2) return 0;
  double sum = 0;
  for (double x : v) sum += (x - m) * (x - m);
  return sum / static_cast<double>(v.size() - 1);
}

// The pooled-variance one-sided t-test of "the candidate needs more steps".
void pooled_t_test(MlperfCheck& m) {
  const auto nb = static_cast<double>(m.baseline_trimmed.size()), nc = static_cast<double>(m.candidate_trimmed.size());
  m.mean_baseline = mean(m.baseline_trimmed);
  m.mean_candidate = mean(m.candidate_trimmed);
  const double vb = sample_variance(m.baseline_trimmed, m.mean_baseline);
  const double vc = sample_variance(m.candidate_trimmed, m.mean_candidate);
  m.sd_baseline = std::sqrt(vb);
  m.sd_candidate = std::sqrt(vc);
  m.df = nb + nc - 2;
  const double pooled = ((nb - 1) * vb + (nc - 1) * vc) / m.df;
  const double se = std::sqrt(pooled * (1 / nb + 1 / nc));
  const double gap = m.mean_candidate - m.mean_baseline;
  if (se > 0) {
    m.t = gap / se;
    m.p_slower = student_t_upper_tail(m.t, m.df);
  } else {  // every trimmed run of each side took the same steps: the sign decides
    m.t = gap > 0 ? kInfinity : gap < 0 ? -kInfinity : 0;
    m.p_slower = gap > 0 ? 0.0 : 1.0;
  }
}

}  // namespace

std::optional<std::int64_t> steps_to_target(const std::map<std::int64_t, std::optional<double>>& curve, double target,
                                            Direction direction) {
  for (const auto& [step, v] : curve)
    if (v && (direction == Direction::higher_is_better ? *v >= target : *v <= target)) return step;
  return std::nullopt;
}

GateResult mlperf_gate(const CurveSide& b, const CurveSide& c, const GateOptions& gate,
                       const CurveGateOptions& options) {
  if (!std::isfinite(options.target)) throw InputError("--target must be a finite number (the quality to reach)");
  if (!(options.alpha > 0 && options.alpha < 0.5)) throw InputError("--alpha must lie in (0, 0.5)");
  if (options.direction == Direction::unspecified)
    throw InputError("--mode mlperf --metric " + gate.metric_name +
                     ": say which way reaches the target, --higher-is-better or --lower-is-better");
  GateResult g;
  g.metric = gate.metric;
  g.metric_name = gate.metric == GateMetric::custom ? gate.metric_name : to_string(gate.metric);
  g.direction = options.direction;
  g.unit = "steps";
  g.baseline = b.name;
  g.candidate = c.name;
  g.alpha = options.alpha;
  MlperfCheck m;
  m.target = options.target;
  m.reached = (options.direction == Direction::higher_is_better ? ">= " : "<= ") + mlperf_number_text(options.target);
  std::string why;
  const std::vector<double> sb = side_steps(b, "baseline", options.target, options.direction, g.baseline_runs, why);
  const std::vector<double> sc = side_steps(c, "candidate", options.target, options.direction, g.candidate_runs, why);
  g.mlperf = m;
  if (!why.empty()) {
    g.verdict = Verdict::not_equivalent;
    g.reason = why;
    return g;
  }
  if (sb.size() < 3 || sc.size() < 3 || sb.size() + sc.size() < 7) {
    g.verdict = Verdict::inconclusive;
    g.reason = "too few runs (baseline " + std::to_string(sb.size()) + ", candidate " + std::to_string(sc.size()) +
               "): the check drops each side's fastest and slowest run and needs >= 3 runs per side and >= 7 in "
               "all; need more seeds";
    return g;
  }
  m.baseline_trimmed = olympic(sb);
  m.candidate_trimmed = olympic(sc);
  if (std::isinf(m.baseline_trimmed.back()))
    throw InputError("'" + b.name + "': more than one baseline run never reaches " + m.reached +
                     " (MLPerf drops only the slowest): choose a target the baseline reaches");
  if (std::isinf(m.candidate_trimmed.back())) {
    g.mlperf = m;
    g.verdict = Verdict::not_equivalent;
    g.reason = "more than one candidate run never reaches " + m.reached +
               " (MLPerf allows one, the slowest, which it drops)";
    return g;
  }
  pooled_t_test(m);
  g.mlperf = m;
  g.verdict = m.p_slower < options.alpha ? Verdict::not_equivalent : Verdict::equivalent;
  g.reason = std::string(g.verdict == Verdict::equivalent ? "no evidence that the candidate converges slower"
                                                          : "the candidate converges slower") +
             ": mean steps to " + m.reached + " " + mlperf_number_text(m.mean_candidate) + " vs " +
             mlperf_number_text(m.mean_baseline) + " (fastest and slowest dropped), one-sided p = " +
             mlperf_number_text(m.p_slower) + (g.verdict == Verdict::equivalent ? " >= " : " < ") + "alpha " +
             mlperf_number_text(options.alpha);
  return g;
}

}  // namespace mpverify::metrics
