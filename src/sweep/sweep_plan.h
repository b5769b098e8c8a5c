// A sweep plan (`mpverify sweep PLAN.json`): a base training configuration, axes whose every
// combination is trained once per seed, overrides for some combinations, and what to gate at the end.
//
//   {"train": {"model": "mlp", "data": "synthetic", "backend": "emu", "steps": 40},
//    "axes": {"recipe": ["fp32", "o2"], "scaler": ["torch"], "seed": [1, 2, 3]},
//    "overrides": [{"match": {"recipe": "o2"}, "train": {"scaler-opt": ["init=1024"]}}],
//    "gate": {"baseline": {"recipe": "fp32"}, "metric": "accuracy", "margin": 1}}
//
// Keys of "train", of "axes" and of an override's "train" are `mpverify train`'s options without the
// dashes; a value is the option's value (a string or a number), true for a flag, or a list for a
// repeatable option (scaler-opt). "axes" must hold "seed" (a list of distinct whole numbers, or a seed
// list such as "1-10"): the seeds make one ensemble per combination of the other axes (a candidate).
// Axes are taken in the order of their names (JSON objects have no order), the first one varying
// slowest; candidate k's runs are runs k*S .. k*S + S-1 (S seeds, in the order written).
// A candidate's directory is named after its axis values, "recipe-o2_scaler-torch" (characters other than
// letters, digits, '.', '+' and '-' become '_'); a plan whose names collide is refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/parity_gate.h"

namespace mpverify::sweep {

struct SweepCandidate {
  std::string name;      // its directory under the sweep's
  nlohmann::json axes;   // the non-seed axes' values, {"recipe": "o2", "scaler": "torch"}
  nlohmann::json train;  // every train option: the plan's "train", the axes, then matching overrides
  std::vector<std::string> arguments;  // `mpverify train` arguments for `train` (no --seed, no --out)
};

struct SweepRun {
  std::size_t candidate = 0;  // index into SweepPlan::candidates
  std::uint64_t seed = 0;
  std::filesystem::path dir;  // relative to the sweep's directory: <candidate>/seed-<s>
};

struct SweepGate {
  std::size_t baseline = 0;  // the candidate every other one is gated against
  metrics::GateOptions options;
};

struct SweepPlan {
  nlohmann::json source;  // the plan as read: what DIR/plan.json holds
  std::vector<std::uint64_t> seeds;
  std::vector<SweepCandidate> candidates;
  std::vector<SweepRun> runs;  // candidate-major, seeds in the plan's order
  std::optional<SweepGate> gate;
};

// Throws std::invalid_argument naming the key and what to write instead: an unknown top-level key, no
// "axes" or no seed axis, an axis that is not a non-empty list of strings/numbers (or repeats a value),
// a train option the sweep sets itself (out, seed, seeds, force, json, quiet, help), a value of a type
// no option takes, an override matching no candidate, a gate whose baseline matches not exactly one
// candidate or whose metric/margin/alpha/method is bad, colliding directory names, more than
// kMaxSweepRuns runs.
SweepPlan parse_sweep_plan(const nlohmann::json& plan);
// Each run is a training process: 10,000 is days of compute already, and the plan's candidates (a JSON
// configuration and a command line each) are built in memory before any run starts.
inline constexpr std::size_t kMaxSweepRuns = 10000;

// parse_sweep_plan of a file read with io::read_json_file; every error is std::invalid_argument naming the
// file (and the byte offset, for JSON that does not parse).
SweepPlan read_sweep_plan(const std::filesystem::path& file);

// The `mpverify train` arguments of one run: the candidate's, then --seed S.
std::vector<std::string> run_arguments(const SweepPlan& plan, const SweepRun& run);

}  // namespace mpverify::sweep
