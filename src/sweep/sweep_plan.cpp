#include "sweep/sweep_plan.h"

#include <set>
#include <stdexcept>

#include "io/json_text.h"
#include "training/ensemble.h"

namespace mpverify::sweep {

namespace {

using nlohmann::json;

[[noreturn]] void refuse(const std::string& where, const std::string& what) {
  throw std::invalid_argument("plan: " + where + ": " + what);
}

// What the sweep sets itself for each run, or what would make a run print instead of train.
const std::set<std::string> kReservedOptions = {"out", "seed", "seeds", "force", "json", "quiet", "help"};

std::string scalar_text(const json& value, const std::string& where) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return value.dump();
  if (value.is_number_float()) return value.dump();  // the shortest text that reads back as the same double
  refuse(where, "write a string or a number (found " + value.dump() + ")");
}

// `mpverify train` arguments for one option: --key value, --key for true, nothing for false, the
// option repeated for a list.
void append_option(std::vector<std::string>& out, const std::string& key, const json& value) {
  const std::string where = "train option \"" + key + "\"";
  if (kReservedOptions.count(key))
    refuse(where, "the sweep sets it for each run (seeds go in \"axes\": {\"seed\": [...]})");
  if (key.empty() || key.starts_with("-")) refuse(where, "write the option's name without dashes, e.g. \"steps\"");
  if (value.is_boolean()) {
    if (value.get<bool>()) out.push_back("--" + key);
    return;
  }
  if (value.is_array()) {
    for (const json& item : value) {
      out.push_back("--" + key);
      out.push_back(scalar_text(item, where));
    }
    return;
  }
  out.push_back("--" + key);
  out.push_back(scalar_text(value, where));
}

json object_at(const json& plan, const std::string& key, bool required) {
  if (!plan.contains(key)) {
    if (required) refuse("\"" + key + "\"", "missing (see docs/sweep.md for a plan's shape)");
    return json::object();
  }
  if (!plan[key].is_object()) refuse("\"" + key + "\"", "must be an object");
  return plan[key];
}

std::vector<std::uint64_t> parse_seeds(const json& seeds) {
  if (seeds.is_string()) return training::parse_seed_list(seeds.get<std::string>());
  if (!seeds.is_array() || seeds.empty())
    refuse("axes \"seed\"", "write a non-empty list of whole numbers, e.g. [1, 2, 3], or \"1-10\"");
  std::string text;
  for (const json& s : seeds) {
    if (!s.is_number_unsigned()) refuse("axes \"seed\"", "seed " + s.dump() + " is not a whole number >= 0");
    if (!text.empty()) text += ',';  // piecewise: GCC 12's false -Wrestrict on "literal" + string
    text += s.dump();
  }
  return training::parse_seed_list(text);  // refuses repeats and too many seeds
}

// The non-seed axes, in name order, each a non-empty list of distinct scalars.
std::vector<std::pair<std::string, json>> parse_axes(const json& axes) {
  std::vector<std::pair<std::string, json>> out;
  for (const auto& [name, values] : axes.items()) {
    if (name == "seed") continue;
    const std::string where = "axes \"" + name + "\"";
    if (!values.is_array() || values.empty()) refuse(where, "write a non-empty list of values");
    std::set<std::string> seen;
    for (const json& v : values) {
      if (!(v.is_string() || v.is_number() || v.is_boolean())) refuse(where, "value " + v.dump() + " is not a scalar");
      if (!seen.insert(v.dump()).second) refuse(where, "value " + v.dump() + " appears twice");
    }
    out.emplace_back(name, values);
  }
  return out;
}

std::string directory_text(const json& value) {
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  for (char& c : text) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '+' || c == '-';
    if (!keep) c = '_';
  }
  return text;
}

// Every combination of the axes, the first axis varying slowest.
std::vector<json> combinations(const std::vector<std::pair<std::string, json>>& axes) {
  std::vector<json> out{json::object()};
  for (const auto& [name, values] : axes) {
    std::vector<json> next;
    for (const json& partial : out)
      for (const json& v : values) {
        json c = partial;
        c[name] = v;
        next.push_back(std::move(c));
      }
    out = std::move(next);
  }
  return out;
}

bool matches(const json& axes, const json& match) {
  for (const auto& [name, value] : match.items())
    if (!axes.contains(name) || axes[name] != value) return false;
  return true;
}

// The plan's "overrides": each {"match": {axis: value, ...}, "train": {...}} applied, in order, to the
// candidates it matches. An override that matches none is a mistake in the plan.
void apply_overrides(const json& plan, std::vector<SweepCandidate>& candidates) {
  if (!plan.contains("overrides")) return;
  const json& overrides = plan["overrides"];
  if (!overrides.is_array()) refuse("\"overrides\"", "must be a list of {\"match\": {...}, \"train\": {...}}");
  for (std::size_t i = 0; i < overrides.size(); ++i) {
    const std::string where = "overrides[" + std::to_string(i) + "]";
    const json& o = overrides[i];
    if (!o.is_object() || !o.contains("match") || !o["match"].is_object() || !o.contains("train") ||
        !o["train"].is_object() || o.size() != 2)
      refuse(where, "write {\"match\": {AXIS: VALUE, ...}, \"train\": {OPTION: VALUE, ...}}");
    std::size_t matched = 0;
    for (SweepCandidate& c : candidates) {
      if (!matches(c.axes, o["match"])) continue;
      ++matched;
      for (const auto& [key, value] : o["train"].items()) c.train[key] = value;
    }
    if (matched == 0) refuse(where, "its match " + o["match"].dump() + " names no combination of the axes");
  }
}

// How many runs the axes and seeds make, computed before any is made: a short plan can name more
// combinations than memory holds. Saturates above kMaxSweepRuns, so a product past 2^64 cannot wrap.
std::size_t run_count(const std::vector<std::pair<std::string, json>>& axes, std::size_t seeds) {
  std::size_t count = seeds;
  for (const auto& [name, values] : axes) {
    if (count > kMaxSweepRuns) break;
    count *= values.size();  // both factors <= kMaxSweepRuns and the JSON's size: no overflow
  }
  return count;
}

std::vector<SweepCandidate> make_candidates(const json& plan, std::size_t seeds) {
  const json train = object_at(plan, "train", false);
  const std::vector<std::pair<std::string, json>> axes = parse_axes(object_at(plan, "axes", true));
  if (run_count(axes, seeds) > kMaxSweepRuns)
    refuse("axes", "more than " + std::to_string(kMaxSweepRuns) + " runs (the product of the axes' lengths and the "
                   "seeds); a plan holds at most " + std::to_string(kMaxSweepRuns));
  std::vector<SweepCandidate> candidates;
  std::set<std::string> names;
  for (json& combination : combinations(axes)) {
    SweepCandidate c;
    std::string name;
    for (const auto& [axis, value] : combination.items()) {
      if (!name.empty()) name += '_';
      name += directory_text(axis) + "-" + directory_text(value);  // one safe path component, never ".."
    }
    c.name = name.empty() ? "runs" : name;
    if (!names.insert(c.name).second)
      refuse("axes", "two combinations get the same directory name '" + c.name + "'; make their values differ in letters "
                     "or digits");
    c.train = train;
    for (const auto& [axis, value] : combination.items()) c.train[axis] = value;
    c.axes = std::move(combination);
    candidates.push_back(std::move(c));
  }
  apply_overrides(plan, candidates);
  for (SweepCandidate& c : candidates)
    for (const auto& [key, value] : c.train.items()) append_option(c.arguments, key, value);
  return candidates;
}

metrics::Pairing parse_pairing(const json& value) {
  if (value == "auto") return metrics::Pairing::automatic;
  if (value == "paired") return metrics::Pairing::paired;
  if (value == "welch") return metrics::Pairing::welch;
  refuse("gate \"method\"", "write \"auto\", \"paired\" or \"welch\"");
}

// "sequential": [5, 10, 15, 20] (the looks, seeds per side) and "spending": "obrien-fleming" | "pocock".
metrics::SequentialDesign parse_sequential(const json& gate) {
  const json& looks = gate["sequential"];
  metrics::SequentialDesign design;
  const auto bad_looks = [] { refuse("gate \"sequential\"", "write the looks, increasing counts of seeds >= 2, e.g. [5, 10, 15, 20]"); };
  if (!looks.is_array()) bad_looks();
  for (const json& n : looks) {
    if (!n.is_number_unsigned() || n.get<std::uint64_t>() > 1000000) bad_looks();
    design.looks.push_back(n.get<std::size_t>());
  }
  try {
    metrics::check_design(design);
  } catch (const std::invalid_argument& e) {
    refuse("gate \"sequential\"", e.what());
  }
  if (gate.contains("spending")) {
    const json& name = gate["spending"];
    const auto spending = name.is_string() ? metrics::parse_spending(name.get<std::string>()) : std::nullopt;
    if (!spending) refuse("gate \"spending\"", "write \"obrien-fleming\" or \"pocock\"");
    design.spending = *spending;
  }
  return design;
}

SweepGate parse_gate(const json& gate, const std::vector<SweepCandidate>& candidates) {
  for (const auto& [key, value] : gate.items())
    if (key != "baseline" && key != "metric" && key != "margin" && key != "alpha" && key != "method" &&
        key != "sequential" && key != "spending")
      refuse("gate \"" + key + "\"",
             "unknown key; a gate holds baseline, metric, margin, alpha, method, sequential and spending");
  if (!gate.contains("baseline") || !gate["baseline"].is_object())
    refuse("gate \"baseline\"", "write the baseline's axis values, e.g. {\"recipe\": \"fp32\"}");
  SweepGate g;
  std::vector<std::size_t> found;
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (matches(candidates[i].axes, gate["baseline"])) found.push_back(i);
  if (found.size() != 1)
    refuse("gate \"baseline\"", gate["baseline"].dump() + " matches " + std::to_string(found.size()) +
                                   " combinations of the axes; it must match exactly one");
  g.baseline = found.front();
  const json metric = gate.value("metric", json("accuracy"));
  const auto parsed = metric.is_string() ? metrics::parse_gate_metric(metric.get<std::string>()) : std::nullopt;
  if (!parsed) refuse("gate \"metric\"", "write \"accuracy\", \"fid\", \"kid\" or \"loss\"");
  g.options.metric = *parsed;
  if (!gate.contains("margin") || !gate["margin"].is_number() || !(gate["margin"].get<double>() > 0))
    refuse("gate \"margin\"", "write the equivalence margin, a number > 0 in the metric's unit (accuracy: points)");
  g.options.margin = gate["margin"].get<double>();
  if (gate.contains("alpha")) {
    const json& a = gate["alpha"];
    if (!a.is_number() || !(a.get<double>() > 0 && a.get<double>() < 0.5)) refuse("gate \"alpha\"", "write 0 < alpha < 0.5");
    g.options.alpha = a.get<double>();
  }
  if (gate.contains("method")) g.options.pairing = parse_pairing(gate["method"]);
  if (gate.contains("sequential")) g.options.sequential = parse_sequential(gate);
  else if (gate.contains("spending")) refuse("gate \"spending\"", "applies to a gate in rounds: add \"sequential\"");
  return g;
}

}  // namespace

SweepPlan parse_sweep_plan(const json& plan) {
  if (!plan.is_object()) refuse("the plan", "must be a JSON object with \"train\", \"axes\" and optionally \"gate\"");
  for (const auto& [key, value] : plan.items())
    if (key != "train" && key != "axes" && key != "overrides" && key != "gate")
      refuse("\"" + key + "\"", "unknown key; a plan holds train, axes, overrides and gate");
  SweepPlan p;
  p.source = plan;
  const json axes = object_at(plan, "axes", true);
  if (!axes.contains("seed")) refuse("axes", "add \"seed\": [1, 2, 3] (the seeds of every ensemble)");
  try {
    p.seeds = parse_seeds(axes["seed"]);
  } catch (const std::invalid_argument& e) {
    refuse("axes \"seed\"", e.what());
  }
  p.candidates = make_candidates(plan, p.seeds.size());
  for (std::size_t c = 0; c < p.candidates.size(); ++c)
    for (std::uint64_t s : p.seeds) p.runs.push_back({c, s, training::seed_directory(p.candidates[c].name, s)});
  if (plan.contains("gate")) {
    if (!plan["gate"].is_object()) refuse("\"gate\"", "must be an object");
    p.gate = parse_gate(plan["gate"], p.candidates);
  }
  return p;
}

SweepPlan read_sweep_plan(const std::filesystem::path& file) {
  json plan;
  try {
    plan = io::read_json_file(file);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());  // "FILE: cannot be opened", "FILE: byte N: not valid JSON ..."
  }
  try {
    return parse_sweep_plan(plan);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(file.string() + ": " + e.what());
  }
}

std::vector<std::string> run_arguments(const SweepPlan& plan, const SweepRun& run) {
  std::vector<std::string> args = plan.candidates.at(run.candidate).arguments;
  args.push_back("--seed");
  args.push_back(std::to_string(run.seed));
  return args;
}

}  // namespace mpverify::sweep
