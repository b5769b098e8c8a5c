#include "sweep/sweep_directory.h"

#include <algorithm>
#include <stdexcept>

#include "io/json_text.h"
#include "record/run_log.h"
#include "training/ensemble.h"

namespace mpverify::sweep {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<json> candidate_configs(const SweepPlan& plan, const TrainParser& parse) {
  std::vector<json> configs;
  for (const SweepCandidate& c : plan.candidates) {
    try {
      configs.push_back(training::plan_ensemble(parse(c.arguments), plan.seeds).shared);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("plan: candidate " + c.name + ": " + e.what());
    }
  }
  return configs;
}

namespace {

// The held plan with more seeds: the same plan but for the seed axis, whose seeds begin with the held ones
// (a sweep in rounds, gate "sequential": the next look's seeds added).
bool adds_seeds_to(const json& held, const SweepPlan& plan) {
  json widened = held;
  if (!widened.is_object() || !widened.contains("axes") || !widened["axes"].is_object()) return false;
  widened["axes"]["seed"] = plan.source["axes"]["seed"];
  if (widened != plan.source) return false;
  std::vector<std::uint64_t> held_seeds;
  try {
    held_seeds = parse_sweep_plan(held).seeds;
  } catch (const std::invalid_argument&) {
    return false;
  }
  return held_seeds.size() <= plan.seeds.size() &&
         std::equal(held_seeds.begin(), held_seeds.end(), plan.seeds.begin());
}

}  // namespace

bool open_sweep_directory(const fs::path& out, const SweepPlan& plan) {
  const fs::path file = out / "plan.json";
  if (fs::exists(file)) {
    json held;
    try {
      held = io::read_json_file(file);
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(out.string() + " holds an unreadable plan.json (" + e.what() +
                                  "); choose another --out or remove it");
    }
    if (held == plan.source) return true;
    if (!adds_seeds_to(held, plan))
      throw std::invalid_argument(out.string() + " holds a sweep of another plan (its plan.json differs; only the "
                                  "seed axis may grow, its earlier seeds first); choose another --out, or remove that "
                                  "directory to start over");
    record::write_file_atomically(file, plan.source.dump(2) + "\n");  // the finished runs are kept
    return true;
  }
  if (fs::exists(out) && !fs::is_directory(out))
    throw std::invalid_argument("--out " + out.string() + " exists and is not a directory");
  if (fs::exists(out) && !fs::is_empty(out))
    throw std::invalid_argument("--out " + out.string() + " holds files but no plan.json (not a sweep's directory); "
                                "choose an empty or new directory");
  fs::create_directories(out);
  record::write_file_atomically(file, plan.source.dump(2) + "\n");
  return false;
}

SweepPlan read_directory_plan(const fs::path& out) {
  const fs::path file = out / "plan.json";
  if (!fs::exists(file))
    throw std::invalid_argument(out.string() + " holds no plan.json: not a sweep's directory (mpverify sweep PLAN.json "
                                "--out DIR writes it)");
  return read_sweep_plan(file);
}

bool run_finished(const SweepPlan& plan, const fs::path& out, std::size_t run, const std::vector<json>& configs) {
  const SweepRun& r = plan.runs.at(run);
  const fs::path ensemble = out / plan.candidates.at(r.candidate).name;
  return training::seed_run_state(ensemble, r.seed, configs.at(r.candidate)) == training::SeedRunState::finished;
}

std::vector<std::size_t> unfinished_runs(const SweepPlan& plan, const fs::path& out, const std::vector<json>& configs,
                                         std::size_t shard_index, std::size_t shard_count) {
  std::vector<std::size_t> runs;
  for (std::size_t i = 0; i < plan.runs.size(); ++i)
    if (i % shard_count == shard_index && !run_finished(plan, out, i, configs)) runs.push_back(i);
  return runs;
}

}  // namespace mpverify::sweep
