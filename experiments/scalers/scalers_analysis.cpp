#include "scalers_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "metrics/equivalence.h"

namespace mpverify::experiments {

using nlohmann::json;

namespace {

const json& field(const json& line, const char* key) {
  if (!line.is_object() || !line.contains(key))
    throw std::invalid_argument(std::string("steps.jsonl: a step line has no \"") + key + "\"");
  return line[key];
}

std::string number_text(double v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

}  // namespace

TrajectoryStats trajectory_stats(const std::vector<json>& steps, double final_scale, double floor) {
  TrajectoryStats t;
  t.steps = steps.size();
  t.final_scale = final_scale;
  t.floor = floor;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const double scale = field(steps[k], "scale").get<double>();
    const bool skipped = field(steps[k], "skipped").get<bool>();
    t.skipped += skipped ? 1 : 0;
    if (!skipped && !t.first_clean) t.first_clean = k;
    t.found_inf += field(steps[k], "found_inf").get<bool>() ? 1 : 0;
    if (field(steps[k], "aborted").get<bool>() && !t.aborted_at) t.aborted_at = k;
    if (k == 0) {
      t.first_scale = t.lowest_scale = scale;
    } else {
      t.lowest_scale = std::min(t.lowest_scale, scale);
    }
    t.steps_at_floor += floor > 0 && scale == floor ? 1 : 0;
  }
  for (const json& line : steps) t.steps_at_lowest += line["scale"].get<double>() == t.lowest_scale ? 1 : 0;
  return t;
}

std::vector<training::TraceStep> found_inf_trace(const std::vector<json>& steps) {
  std::vector<training::TraceStep> trace;
  for (std::size_t k = 0; k < steps.size(); ++k)
    trace.push_back({static_cast<int>(k) + 1, field(steps[k], "found_inf").get<bool>() ? 1.0 : 0.0});
  return trace;
}

ReplayCheck check_replay(const std::string& scaler, const training::ScalerOptions& options,
                         const std::vector<json>& steps, double final_scale) {
  ReplayCheck check;
  const std::unique_ptr<training::Scaler> fresh = training::make_scaler(scaler, options);
  const std::vector<training::TraceStep> trace = found_inf_trace(steps);
  const training::Replay r = training::replay(*fresh, trace, scaler);
  const auto differ = [&](std::string what) {
    check.first_difference = std::move(what);
    return check;
  };
  for (std::size_t k = 0; k < steps.size(); ++k) {
    if (k >= r.steps.size()) return differ("step " + std::to_string(k) + ": the replay stopped earlier");
    const double trained = steps[k]["scale"].get<double>();
    if (r.steps[k].scale != trained)
      return differ("step " + std::to_string(k) + ": scale " + number_text(r.steps[k].scale) + " in the replay, " +
                    number_text(trained) + " in training");
    if (r.steps[k].skipped != steps[k]["skipped"].get<bool>())
      return differ("step " + std::to_string(k) + ": skipped differs");
    if (r.steps[k].aborted != steps[k]["aborted"].get<bool>())
      return differ("step " + std::to_string(k) + ": aborted differs");
    ++check.steps_compared;
  }
  if (r.steps.size() != steps.size()) return differ("the replay ran " + std::to_string(r.steps.size()) + " steps");
  if (r.final_scale != final_scale)
    return differ("final scale " + number_text(r.final_scale) + " in the replay, " + number_text(final_scale) +
                  " in training");
  check.agrees = true;
  return check;
}

std::map<std::string, std::size_t> nonfinite_origins(const std::vector<json>& steps) {
  std::map<std::string, std::size_t> origins;
  for (const json& line : steps) {
    const json& n = field(line, "nonfinite");
    if (n.is_null()) continue;
    std::string where = n.at("pass").get<std::string>();
    where += " ";
    where += n.at("layer").get<std::string>();
    where += " ";
    where += n.at("tensor").get<std::string>();
    ++origins[where];
  }
  return origins;
}

std::optional<PairedGap> paired_gap(const std::vector<std::optional<double>>& baseline,
                                    const std::vector<std::optional<double>>& candidate) {
  if (baseline.size() != candidate.size() || baseline.empty()) return std::nullopt;
  std::vector<double> d;
  for (std::size_t i = 0; i < baseline.size(); ++i) {
    if (!baseline[i] || !candidate[i]) return std::nullopt;
    d.push_back(100.0 * (*candidate[i] - *baseline[i]));
  }
  PairedGap g;
  g.n = d.size();
  double sum = 0;
  for (double v : d) sum += v;
  g.mean = sum / static_cast<double>(g.n);
  if (g.n >= 2) {
    double ss = 0;
    for (double v : d) ss += (v - g.mean) * (v - g.mean);
    const double se = std::sqrt(ss / static_cast<double>(g.n - 1) / static_cast<double>(g.n));
    // Two-sided 90%: t(0.95, n - 1), the level the parity gate's intervals use.
    const double t = metrics::student_t_quantile(0.95, static_cast<double>(g.n - 1));
    g.lower = g.mean - t * se;
    g.upper = g.mean + t * se;
  }
  return g;
}

}  // namespace mpverify::experiments
