// What the scalers report computes from a run's steps.jsonl: the scale
// trajectory's figures, the recorded found_inf trace and its replay, where
// the first non-finite values appeared, and the paired accuracy gap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "training/loss_scaler.h"
#include "training/scaler_replay.h"

namespace mpverify::experiments {

struct TrajectoryStats {
  std::size_t steps = 0;    // steps run (an aborted run stops early)
  std::size_t skipped = 0;  // steps whose update was not applied
  std::size_t found_inf = 0;
  double first_scale = 0, lowest_scale = 0, final_scale = 0;  // final: what a next step would use
  std::size_t steps_at_lowest = 0;  // steps run at lowest_scale
  double floor = 0;                 // the strategy's floor (0: none)
  std::size_t steps_at_floor = 0;   // steps run at the floor (0 where there is none)
  std::optional<std::size_t> aborted_at;
  std::optional<std::size_t> first_clean;  // the first step whose update was applied
};

// From the steps.jsonl lines (keys step, scale, skipped, found_inf, aborted),
// the summary's final_scale and the strategy's floor. Throws
// std::invalid_argument when a line lacks one of those keys.
TrajectoryStats trajectory_stats(const std::vector<nlohmann::json>& steps, double final_scale, double floor);

// The run's found_inf flags as a replay trace (one step per line, from 0).
std::vector<training::TraceStep> found_inf_trace(const std::vector<nlohmann::json>& steps);

// A run's own found_inf trace replayed through a fresh instance of its
// strategy: agrees when every step's scale (exactly) and skip flag, the
// aborting step and the final scale are the training's.
struct ReplayCheck {
  bool agrees = false;
  std::size_t steps_compared = 0;
  std::string first_difference;  // empty when it agrees
};
ReplayCheck check_replay(const std::string& scaler, const training::ScalerOptions& options,
                         const std::vector<nlohmann::json>& steps, double final_scale);

// Where the first non-finite value of each step appeared ("forward fc1
// output" -> number of steps), from the steps' "nonfinite" objects.
std::map<std::string, std::size_t> nonfinite_origins(const std::vector<nlohmann::json>& steps);

// candidate − baseline in points over paired seeds (both lists in seed
// order, accuracies in [0, 1]); the interval is the two-sided 90% Student-t
// interval of the mean difference (n − 1 degrees of freedom), absent for
// fewer than two pairs. Absent entirely when a run has no accuracy (diverged).
struct PairedGap {
  std::size_t n = 0;
  double mean = 0;
  std::optional<double> lower, upper;
};
std::optional<PairedGap> paired_gap(const std::vector<std::optional<double>>& baseline,
                                    const std::vector<std::optional<double>>& candidate);

}  // namespace mpverify::experiments
