#include "metrics/curve_gate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

namespace mpverify::metrics {

namespace {

using nlohmann::json;
constexpr double kInfiniteDeviation = std::numeric_limits<double>::infinity();

std::string gate_number_text(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

// The loss key the curves are read under: the option, else "loss", or
// "loss_g" (a GAN's generator loss) when the first run logs no "loss".
std::string curve_key(const RunDirectory& first, const GateOptions& options) {
  if (!options.loss_key.empty()) return options.loss_key;
  const json& step = first.steps->front();
  return step.contains("loss") || !step.contains("loss_g") ? "loss" : "loss_g";
}

// What the run's summary says of a divergence; "" when nothing.
std::string declared_divergence(const RunDirectory& run) {
  const auto a = run.summary.find("aborted");
  if (a != run.summary.end() && a->is_boolean() && a->get<bool>())
    return "summary.json: aborted is true (the loss scaler gave up)";
  const auto f = run.summary.find("final_loss");
  if (f != run.summary.end() && f->is_null()) return "summary.json: final_loss is null (non-finite)";
  return "";
}

CurveSide side_of(const Ensemble& e, const std::string& key, std::int64_t steps) {
  CurveSide side{e.name, {}};
  for (const RunDirectory& run : e.runs) {
    CurveRun c{run.name, run.seed, {}, declared_divergence(run)};
    const auto curve = read_loss_curve(run, key, steps, !c.divergence.empty());
    for (std::size_t s = 0; s < curve.size(); ++s) c.values[static_cast<std::int64_t>(s)] = curve[s];
    side.runs.push_back(std::move(c));
  }
  return side;
}

CurveSide side_of(const ValueFile& f) {
  if (!f.has_steps)
    throw InputError("'" + f.name + "' has no step column: the per-step modes read curves (seed,step,value), or give "
                     "--mode tost for one value per seed");
  CurveSide side{f.name, {}};
  std::map<std::int64_t, std::size_t> index;  // seed -> position in side.runs, in first-appearance order
  for (const ValueRecord& r : f.records) {
    auto [it, fresh] = index.emplace(r.seed, side.runs.size());
    if (fresh) side.runs.push_back({f.name + " (seed " + std::to_string(r.seed) + ")", r.seed, {}, ""});
    side.runs[it->second].values[*r.step] = r.value;
  }
  return side;
}

// The result's names and numbers from the options, as evaluate_gate sets them.
GateResult result_for(const CurveSide& b, const CurveSide& c, const GateOptions& gate) {
  GateResult g;
  g.metric = gate.metric;
  g.metric_name = gate.metric == GateMetric::custom ? gate.metric_name : to_string(gate.metric);
  g.direction = gate.direction != Direction::unspecified ? gate.direction : natural_direction(gate.metric);
  g.unit = g.metric_name;
  g.baseline = b.name;
  g.candidate = c.name;
  g.margin = gate.margin;
  g.alpha = gate.alpha;
  return g;
}

RunOutcome outcome_of(const CurveRun& r) {
  RunOutcome o;
  o.run = r.run;
  o.seed = r.seed;
  o.divergence = r.divergence;
  return o;
}

// The (baseline, candidate) pairs the golden check compares: the single runs,
// or the runs of each seed (the seed sets must agree).
std::vector<std::pair<const CurveRun*, const CurveRun*>> curve_pairs(const CurveSide& b, const CurveSide& c) {
  if (b.runs.size() == 1 && c.runs.size() == 1) return {{&b.runs[0], &c.runs[0]}};
  std::map<std::int64_t, const CurveRun*> by_seed;
  std::set<std::int64_t> seeds_b, seeds_c;
  for (const CurveRun& r : b.runs)
    if (r.seed) by_seed[*r.seed] = &r, seeds_b.insert(*r.seed);
  for (const CurveRun& r : c.runs)
    if (r.seed) seeds_c.insert(*r.seed);
  if (seeds_b != seeds_c || seeds_b.size() != b.runs.size() || seeds_c.size() != c.runs.size())
    throw InputError("--mode curve compares each candidate run with the baseline run of the same seed: give one run "
                     "per side, or the same set of distinct seeds on both sides ('" + b.name + "' and '" + c.name +
                     "' differ)");
  std::vector<std::pair<const CurveRun*, const CurveRun*>> pairs;
  for (const CurveRun& r : c.runs) pairs.push_back({by_seed.at(*r.seed), &r});
  return pairs;
}

// One pair's steps into the check; a divergence found ("" when none).
std::string compare_pair(const CurveRun& golden, const CurveRun& run, GoldenCheck& check) {
  for (const auto& [step, g] : golden.values) {
    if (!g) return "baseline run '" + golden.run + "' is non-finite at step " + std::to_string(step);
    const auto at = run.values.find(step);
    if (at == run.values.end())
      return "candidate run '" + run.run + "' has no value at step " + std::to_string(step) + " (the golden curve has)";
    if (!at->second) return "candidate run '" + run.run + "' is non-finite at step " + std::to_string(step);
    const double c = *at->second;
    const double deviation = *g != 0 ? std::fabs(c - *g) / std::fabs(*g) : (c == 0 ? 0.0 : kInfiniteDeviation);
    ++check.steps_compared;
    if (deviation > check.rtol) ++check.steps_outside;
    if (!check.worst_step || deviation > check.max_relative_deviation) {
      check.max_relative_deviation = deviation;
      check.worst_step = step;
      check.worst_seed = run.seed;
    }
  }
  return "";
}

// A run whose summary declared a divergence, either side; "" when none.
std::string declared(const CurveSide& b, const CurveSide& c) {
  for (const CurveSide* side : {&c, &b})
    for (const CurveRun& r : side->runs)
      if (!r.divergence.empty())
        return std::string(side == &c ? "candidate" : "baseline") + " run '" + r.run + "' diverged (" + r.divergence +
               ")";
  return "";
}

}  // namespace

const char* to_string(GateMode mode) {
  switch (mode) {
    case GateMode::tost: return "tost";
    case GateMode::curve: return "curve";
    case GateMode::mlperf: return "mlperf";
  }
  return "?";
}

std::optional<GateMode> parse_gate_mode(const std::string& name) {
  if (name == "tost") return GateMode::tost;
  if (name == "curve") return GateMode::curve;
  if (name == "mlperf") return GateMode::mlperf;
  return std::nullopt;
}

std::pair<CurveSide, CurveSide> read_curves(const Ensemble& baseline, const Ensemble& candidate,
                                            const GateOptions& options, std::string& key) {
  const std::vector<const RunDirectory*> all = comparable_runs(baseline, candidate);
  for (const RunDirectory* r : all)
    if (!r->steps) throw InputError("'" + r->name + "/steps.jsonl' was not read (read the runs with their steps)");
  const auto config = all.front()->summary.find("config");
  const auto s = config->find("steps");
  if (s == config->end() || !s->is_number_integer() || s->get<std::int64_t>() < 1)
    throw InputError("'" + all.front()->name + "/summary.json': config.steps is not an integer >= 1 (the per-step "
                     "modes need it)");
  key = curve_key(*all.front(), options);
  return {side_of(baseline, key, s->get<std::int64_t>()), side_of(candidate, key, s->get<std::int64_t>())};
}

std::pair<CurveSide, CurveSide> read_curves(const ValueFile& baseline, const ValueFile& candidate) {
  return {side_of(baseline), side_of(candidate)};
}

GateResult golden_values_gate(const CurveSide& b, const CurveSide& c, const GateOptions& gate,
                              const CurveGateOptions& options) {
  if (!(std::isfinite(options.rtol) && options.rtol > 0))
    throw InputError("--rtol must be a finite number > 0 (the relative tolerance per step; e.g. 0.01 for 1%)");
  GateResult g = result_for(b, c, gate);
  GoldenCheck check;
  check.rtol = options.rtol;
  const auto pairs = curve_pairs(b, c);
  check.pairs = pairs.size();
  for (const CurveRun& r : b.runs) g.baseline_runs.push_back(outcome_of(r));
  std::string divergence = declared(b, c);
  for (const auto& [golden, run] : pairs) {
    RunOutcome o = outcome_of(*run);
    GoldenCheck own;
    own.rtol = options.rtol;
    const std::string diverged = compare_pair(*golden, *run, own);
    if (divergence.empty()) divergence = diverged;
    if (diverged.empty()) o.value = own.max_relative_deviation;
    if (!diverged.empty() && o.divergence.empty()) o.divergence = diverged;
    check.steps_compared += own.steps_compared;
    check.steps_outside += own.steps_outside;
    if (own.worst_step && (!check.worst_step || own.max_relative_deviation > check.max_relative_deviation)) {
      check.max_relative_deviation = own.max_relative_deviation;
      check.worst_step = own.worst_step;
      check.worst_seed = own.worst_seed;
    }
    g.candidate_runs.push_back(std::move(o));
  }
  g.golden = check;
  if (divergence.empty() && check.steps_compared == 0)
    throw InputError("'" + b.name + "': the golden curve holds no steps to compare");
  if (!divergence.empty()) {
    g.verdict = Verdict::not_equivalent;
    g.reason = divergence + ": a diverged run never passes";
    return g;
  }
  g.verdict = check.max_relative_deviation <= options.rtol ? Verdict::equivalent : Verdict::not_equivalent;
  g.reason = "the largest relative deviation from the golden curve, " + gate_number_text(check.max_relative_deviation) +
             " at step " + std::to_string(*check.worst_step) + ", is " +
             (g.verdict == Verdict::equivalent ? "within" : "beyond") + " the tolerance " +
             gate_number_text(options.rtol) + " (" + std::to_string(check.steps_outside) + " of " +
             std::to_string(check.steps_compared) + " matched steps beyond it)";
  return g;
}

}  // namespace mpverify::metrics
