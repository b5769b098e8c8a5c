#include "sweep/sweep_summary.h"

#include <cstdio>

#include "metrics/ensemble.h"
#include "metrics/parity_gate.h"
#include "record/run_log.h"

namespace mpverify::sweep {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

ordered_json gate_entry(const SweepPlan& plan, const fs::path& out, std::size_t index) {
  const SweepGate& g = *plan.gate;
  const bool with_steps = g.options.metric == metrics::GateMetric::loss;
  try {
    const metrics::Ensemble baseline =
        metrics::read_named_ensemble(out, plan.candidates[g.baseline].name, with_steps);
    const metrics::Ensemble candidate = metrics::read_named_ensemble(out, plan.candidates[index].name, with_steps);
    return metrics::gate_json(metrics::evaluate_gate(baseline, candidate, g.options));
  } catch (const metrics::InputError& e) {
    return {{"error", e.what()}};
  }
}

std::string number(const ordered_json& v, const char* format = "%.4g") {
  if (!v.is_number()) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v.get<double>());
  return buf;
}

}  // namespace

ordered_json finish_sweep(const SweepPlan& plan, const fs::path& out, const std::vector<json>& configs) {
  for (std::size_t c = 0; c < plan.candidates.size(); ++c) {
    const json ensemble = {{"seeds", plan.seeds}, {"config", configs.at(c)}};
    record::write_file_atomically(out / plan.candidates[c].name / "ensemble.json", ensemble.dump(2) + "\n");
  }
  ordered_json summary;
  summary["plan"] = plan.source;
  summary["runs"] = plan.runs.size();
  summary["seeds"] = plan.seeds;
  summary["baseline"] = plan.gate ? json(plan.candidates[plan.gate->baseline].name) : json(nullptr);
  summary["candidates"] = ordered_json::array();
  for (std::size_t c = 0; c < plan.candidates.size(); ++c) {
    ordered_json entry;
    entry["name"] = plan.candidates[c].name;
    entry["axes"] = plan.candidates[c].axes;
    entry["role"] = !plan.gate ? "run" : c == plan.gate->baseline ? "baseline" : "candidate";
    if (plan.gate && c != plan.gate->baseline) entry["gate"] = gate_entry(plan, out, c);
    summary["candidates"].push_back(std::move(entry));
  }
  record::write_file_atomically(out / "summary.md", "# Sweep\n\n" + summary_table(summary));
  record::write_file_atomically(out / "sweep.json", summary.dump(2) + "\n");
  return summary;
}

std::string summary_table(const ordered_json& summary) {
  std::string t = "| candidate | runs | verdict | candidate - baseline | CI | margin |\n|---|---|---|---|---|---|\n";
  const std::string runs = std::to_string(summary["seeds"].size());
  for (const ordered_json& c : summary["candidates"]) {
    t += "| " + c["name"].get<std::string>() + " | " + runs + " | ";
    if (c["role"] == "baseline") t += "baseline | | | |\n";
    else if (c["role"] == "run") t += "(no gate) | | | |\n";
    else if (c["gate"].contains("error")) t += "ERROR: " + c["gate"]["error"].get<std::string>() + " | | | |\n";
    else {
      const ordered_json& g = c["gate"];
      const std::string verdict = g["verdict"].get<std::string>();
      t += verdict + " | " + number(g.value("difference", ordered_json())) + " | [" +
           number(g.value("ci_lower", ordered_json())) + ", " + number(g.value("ci_upper", ordered_json())) + "] | ±" +
           number(g.value("margin", ordered_json())) + " |\n";
    }
  }
  if (!summary["baseline"].is_null()) {
    t += "\nBaseline: " + summary["baseline"].get<std::string>() + ". Each verdict's reason:\n\n";
    for (const ordered_json& c : summary["candidates"])
      if (c.contains("gate") && c["gate"].contains("line"))
        t += "- " + c["name"].get<std::string>() + ": " + c["gate"]["line"].get<std::string>() + "\n";
  }
  return t;
}

int sweep_exit_code(const ordered_json& summary) {
  int code = 0;
  for (const ordered_json& c : summary["candidates"]) {
    if (!c.contains("gate")) continue;
    if (c["gate"].contains("error")) return 2;
    const int e = c["gate"]["exit_code"].get<int>();
    if (e == 1) code = 1;
    else if (e == 3 && code == 0) code = 3;
  }
  return code;
}

}  // namespace mpverify::sweep
