#include "report/gate_junit.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace mpverify::report {

namespace {

// Shortest text that reads back as the same double (nlohmann's number output).
// Non-finite values (df of the normal method) as "inf"/"-inf"/"nan", which nlohmann would write as null.
std::string number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return nlohmann::json(v).dump();
}

std::string run_value(const metrics::RunOutcome& o) {
  if (!o.divergence.empty()) return "diverged: " + o.divergence;
  return o.value ? number(*o.value) : "none";
}

}  // namespace

JUnitTestSuite gate_junit_suite(const metrics::GateResult& g, double time_seconds) {
  using metrics::Verdict;
  JUnitTestSuite suite;
  suite.name = "mpverify gate";
  auto add = [&](std::string name, std::string value) { suite.properties.push_back({std::move(name), std::move(value)}); };
  add("verdict", metrics::to_string(g.verdict));
  add("exit_code", std::to_string(metrics::gate_exit_code(g.verdict)));
  add("metric", g.metric_name);
  add("unit", g.unit);
  add("baseline", g.baseline);
  add("candidate", g.candidate);
  add("margin", number(g.margin));
  add("alpha", number(g.alpha));
  add("ci_level", number(1 - 2 * g.alpha));
  add("reason", g.reason);
  if (g.test) {
    const metrics::EquivalenceResult& t = *g.test;
    add("method", metrics::to_string(t.method));
    add("n_baseline", std::to_string(t.n_baseline));
    add("n_candidate", std::to_string(t.n_candidate));
    add("mean_baseline", number(t.mean_baseline));
    add("mean_candidate", number(t.mean_candidate));
    add("difference", number(t.difference));
    add("standard_error", number(t.standard_error));
    add("df", number(t.df));
    add("ci_lower", number(t.lower));
    add("ci_upper", number(t.upper));
    add("p_lower", number(t.p_lower));
    add("p_upper", number(t.p_upper));
    if (t.seeds_needed) add("seeds_needed", std::to_string(*t.seeds_needed));
  }
  for (const metrics::RunOutcome& o : g.baseline_runs) add("baseline_run:" + o.run, run_value(o));
  for (const metrics::RunOutcome& o : g.candidate_runs) add("candidate_run:" + o.run, run_value(o));

  JUnitTestCase c;
  c.name = g.metric_name + " parity: " + g.candidate + " vs " + g.baseline;
  c.classname = "mpverify.gate." + g.metric_name;
  c.time_seconds = time_seconds;
  const std::string line = metrics::gate_verdict_line(g);
  std::string out = line + "\n" + g.reason + "\n";
  for (const std::string& note : g.notes) out += "note: " + note + "\n";
  for (const metrics::RunOutcome& o : g.baseline_runs) out += "baseline  " + o.run + ": " + run_value(o) + "\n";
  for (const metrics::RunOutcome& o : g.candidate_runs) out += "candidate " + o.run + ": " + run_value(o) + "\n";
  c.system_out = out;
  if (g.verdict == Verdict::not_equivalent) {
    c.outcome = JUnitOutcome::failure;
    c.type = "not-equivalent";
    c.message = line;
    c.details = g.reason;
  } else if (g.verdict == Verdict::inconclusive) {
    c.outcome = JUnitOutcome::error;
    c.type = "inconclusive";
    c.message = line;
    c.details = g.reason + "; the gate could not decide at this alpha with these runs: train more seeds per side";
    if (g.test && g.test->seeds_needed)
      c.details += " (about " + std::to_string(*g.test->seeds_needed) + " if the observed difference and spread hold)";
  }
  suite.cases.push_back(std::move(c));
  return suite;
}

}  // namespace mpverify::report
