// An ensemble: the same training configuration run once per seed, for the
// accuracy-parity gate (COMMON contract 2). `mpverify train --seeds 1,2,3
// --out DIR` writes one run directory per seed, DIR/seed-<s>/ (what `train
// --seed s --out DIR/seed-<s>` would write), then DIR/ensemble.json:
//   {"seeds": [1, 2, 3], "config": <summary.json's "config" without "seed">}
// ensemble.json is written last and atomically, so its presence means every
// run finished.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "training/trainer.h"

namespace mpverify::training {

// "1,2,3", "1-8" or a mix ("1-3,7"): distinct seeds in the order written.
// Throws std::invalid_argument naming the bad item (empty, not a whole
// number, a range written high-low, a repeated seed, more than kMaxSeeds).
std::vector<std::uint64_t> parse_seed_list(const std::string& text);
inline constexpr std::size_t kMaxSeeds = 1000;

std::filesystem::path seed_directory(const std::filesystem::path& out, std::uint64_t seed);

// An ensemble to train: the configuration, its seeds, and `shared`, summary.json's "config" of the
// first seed's run without "seed" (what every seed's run holds, and what ensemble.json records).
struct EnsemblePlan {
  TrainConfig config;
  std::vector<std::uint64_t> seeds;
  nlohmann::json shared;
};

// Validates the configuration once (builds a Trainer): std::invalid_argument / data::DataFileError as
// run_training, and std::invalid_argument for no seed.
EnsemblePlan plan_ensemble(const TrainConfig& config, const std::vector<std::uint64_t>& seeds);

// What a seed's directory holds when an ensemble (re)starts. A run writes summary.json last and
// atomically, so its presence means the run finished; a directory without it is what a killed run
// leaves.
enum class SeedRunState {
  absent,               // no directory
  interrupted,          // a directory without summary.json: trained again from its start
  finished,             // summary.json of this seed and of `shared` (ensemble_config): kept when resuming
  other_configuration,  // summary.json of another configuration or seed, or unreadable
};
SeedRunState seed_run_state(const std::filesystem::path& out, std::uint64_t seed, const nlohmann::json& shared);

// Runs the plan's configuration once per seed (config.seed replaced) into seed_directory(out, s), then
// writes ensemble.json. With keep_finished, a seed whose run is SeedRunState::finished is
// kept as it is (a resumed ensemble); every other seed's directory is removed and trained from its start,
// so a resumed ensemble is byte-identical to an uninterrupted one. `progress(seed, index, step_line)`
// follows every step of every run trained.
void run_ensemble(const EnsemblePlan& plan, const std::filesystem::path& out,
                  const std::function<void(std::uint64_t seed, std::size_t index, const nlohmann::json& step)>&
                      progress = {},
                  bool keep_finished = false);

// Writes dir/ensemble.json for runs that are already in seed_directory(dir, s)
// for every s in `seeds` (runs trained by a queue rather than by
// run_ensemble): the seeds, and the first seed's summary.json "config"
// without "seed" and "recorders" (the settings that may differ by seed).
// Throws std::runtime_error naming the file when that summary is missing.
void write_ensemble_manifest(const std::filesystem::path& dir, const std::vector<std::uint64_t>& seeds);

}  // namespace mpverify::training
