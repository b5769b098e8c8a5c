#include "training/ensemble.h"

#include <charconv>
#include <fstream>
#include <set>
#include <stdexcept>

#include "io/json_text.h"
#include "record/run_log.h"

namespace mpverify::training {

namespace {

std::uint64_t parse_seed(const std::string& item, const std::string& whole) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
  if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
    std::string message = "--seeds '";
    message += whole;
    message += "': '";
    message += item;
    message += "' is not a whole number (write e.g. 1,2,3 or 1-8)";
    throw std::invalid_argument(message);
  }
  return v;
}

}  // namespace

std::vector<std::uint64_t> parse_seed_list(const std::string& text) {
  std::vector<std::uint64_t> seeds;
  std::set<std::uint64_t> seen;
  auto add = [&](std::uint64_t s) {
    if (!seen.insert(s).second) throw std::invalid_argument("--seeds '" + text + "': seed " + std::to_string(s) + " is repeated");
    if (seeds.size() == kMaxSeeds)
      throw std::invalid_argument("--seeds '" + text + "': more than " + std::to_string(kMaxSeeds) + " seeds");
    seeds.push_back(s);
  };
  std::size_t pos = 0;
  for (;;) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    const std::size_t dash = item.find('-');
    if (dash == std::string::npos) {
      add(parse_seed(item, text));
    } else {
      const std::uint64_t lo = parse_seed(item.substr(0, dash), text), hi = parse_seed(item.substr(dash + 1), text);
      if (hi < lo) throw std::invalid_argument("--seeds '" + text + "': range " + item + " goes down; write low-high");
      if (hi - lo >= kMaxSeeds)
        throw std::invalid_argument("--seeds '" + text + "': range " + item + " has more than " +
                                    std::to_string(kMaxSeeds) + " seeds");
      for (std::uint64_t s = lo;; ++s) {
        add(s);
        if (s == hi) break;
      }
    }
    if (comma == text.size()) break;
    pos = comma + 1;
  }
  return seeds;
}

std::filesystem::path seed_directory(const std::filesystem::path& out, std::uint64_t seed) {
  return out / ("seed-" + std::to_string(seed));
}

EnsemblePlan plan_ensemble(const TrainConfig& config, const std::vector<std::uint64_t>& seeds) {
  if (seeds.empty()) throw std::invalid_argument("--seeds: no seed given");
  // Only the seed differs between the runs, and no setting is valid for one seed only.
  TrainConfig c = config;
  c.seed = seeds.front();
  const Trainer check(c);
  nlohmann::json shared = check.summary()["config"];
  shared.erase("seed");
  return {config, seeds, std::move(shared)};
}

SeedRunState seed_run_state(const std::filesystem::path& out, std::uint64_t seed, const nlohmann::json& shared) {
  const std::filesystem::path dir = seed_directory(out, seed);
  if (!std::filesystem::exists(dir)) return SeedRunState::absent;
  if (!std::filesystem::exists(dir / "summary.json")) return SeedRunState::interrupted;
  nlohmann::json summary;
  try {
    summary = io::read_json_file(dir / "summary.json");
  } catch (const std::runtime_error&) {
    return SeedRunState::other_configuration;  // not ours to judge: the caller refuses without --force
  }
  if (!summary.is_object() || !summary.contains("config")) return SeedRunState::other_configuration;
  nlohmann::json config = summary["config"];
  if (!config.is_object() || config.value("seed", nlohmann::json()) != nlohmann::json(seed))
    return SeedRunState::other_configuration;
  config.erase("seed");
  return config == shared ? SeedRunState::finished : SeedRunState::other_configuration;
}

void run_ensemble(const EnsemblePlan& plan, const std::filesystem::path& out,
                  const std::function<void(std::uint64_t, std::size_t, const nlohmann::json&)>& progress,
                  bool keep_finished) {
  // References, not a structured binding: a lambda below captures them (clang before 16 cannot).
  const TrainConfig& config = plan.config;
  const std::vector<std::uint64_t>& seeds = plan.seeds;
  const nlohmann::json& shared = plan.shared;
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    const std::filesystem::path dir = seed_directory(out, seeds[i]);
    if (keep_finished && seed_run_state(out, seeds[i], shared) == SeedRunState::finished) continue;
    std::filesystem::remove_all(dir);  // what a killed run left, or a run being replaced
    TrainConfig c = config;
    c.seed = seeds[i];
    run_training(c, dir, [&](const nlohmann::json& step) {
      if (progress) progress(seeds[i], i, step);
    });
  }
  const nlohmann::json ensemble = {{"seeds", seeds}, {"config", shared}};
  record::write_file_atomically(out / "ensemble.json", ensemble.dump(2) + "\n");
}

void write_ensemble_manifest(const std::filesystem::path& dir, const std::vector<std::uint64_t>& seeds) {
  if (seeds.empty()) throw std::invalid_argument("write_ensemble_manifest: no seeds");
  const std::filesystem::path summary = seed_directory(dir, seeds.front()) / "summary.json";
  if (!std::filesystem::exists(summary)) throw std::runtime_error(summary.string() + ": no summary.json (the run did not finish)");
  nlohmann::json shared = io::read_json_file(summary).value("config", nlohmann::json::object());
  shared.erase("seed");
  shared.erase("recorders");
  const nlohmann::json ensemble = {{"seeds", seeds}, {"config", shared}};
  record::write_file_atomically(dir / "ensemble.json", ensemble.dump(2) + "\n");
}

}  // namespace mpverify::training
