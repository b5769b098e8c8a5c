// The scalers report (Markdown) and its figures from the finished runs: the
// tables per scenario, the scale trajectories, the replays (cross-strategy,
// the self-consistency check, the FP8 amax replay) and the literature's
// claims beside ours.
#pragma once

#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "scalers_experiment.h"

namespace mpverify::experiments {

struct ScalersReport {
  bool replays_agree = false;           // every run's own trace replays to its training trajectory
  nlohmann::ordered_json replay_checks;  // per run: scenario, side, seed, agrees, first_difference
};

// Writes the report and its figures (atomically) and appends their paths to `files`.
ScalersReport write_scalers_report(const ScalersConfig& config, const std::vector<ScalersRun>& runs,
                                   std::vector<std::filesystem::path>& files);

}  // namespace mpverify::experiments
