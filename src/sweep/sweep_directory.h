// What a sweep's directory holds, and how a sweep finds where it stands in it:
//   DIR/plan.json                    the plan, written before anything else
//   DIR/<candidate>/seed-<s>/        one run each, what `mpverify train --out` writes (summary.json last)
//   DIR/<candidate>/ensemble.json    once every run finished (what `train --seeds` writes)
//   DIR/sweep.json, DIR/summary.md   the gate's verdicts, written last (sweep/sweep_summary.h)
// Nothing in it depends on how the plan ran (workers, MPI ranks, shards, interruptions): runs are seeded,
// and the sweep's own files hold no time, host or rank.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweep/sweep_plan.h"
#include "training/trainer.h"

namespace mpverify::sweep {

// The configuration `mpverify train ARGUMENTS` stands for (the train command's own parser).
using TrainParser = std::function<training::TrainConfig(const std::vector<std::string>& arguments)>;

// Each candidate's summary.json "config" without "seed" (training::plan_ensemble: one Trainer per
// candidate, which validates it). A refusal names the candidate: std::invalid_argument, or what `parse`
// throws with the candidate's name prepended when it is a std::runtime_error.
std::vector<nlohmann::json> candidate_configs(const SweepPlan& plan, const TrainParser& parse);

// Opens DIR for the plan: a missing or empty directory gets DIR/plan.json (returns false); a directory whose
// plan.json holds this plan is resumed (returns true), as is one whose plan differs only by seeds added after
// its own (its plan.json is then replaced by this plan: a sweep in rounds). Throws std::invalid_argument for a
// directory holding another plan, or files but no plan.json.
bool open_sweep_directory(const std::filesystem::path& out, const SweepPlan& plan);

// The plan a sweep directory was started with (DIR/plan.json). Throws std::invalid_argument when there is none.
SweepPlan read_directory_plan(const std::filesystem::path& out);

// Whether the run finished with its planned configuration (its summary.json; training::seed_run_state).
bool run_finished(const SweepPlan& plan, const std::filesystem::path& out, std::size_t run,
                  const std::vector<nlohmann::json>& configs);

// The runs not finished, in plan order; with a shard (index, count), only those with run % count == index.
std::vector<std::size_t> unfinished_runs(const SweepPlan& plan, const std::filesystem::path& out,
                                         const std::vector<nlohmann::json>& configs, std::size_t shard_index = 0,
                                         std::size_t shard_count = 1);

}  // namespace mpverify::sweep
