#include "scalers_experiment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "record/run_log.h"
#include "report/output_files.h"
#include "scalers_report.h"
#include "training/base_config.h"
#include "training/ensemble.h"
#include "training/run_queue.h"
#include "training/trainer.h"

namespace mpverify::experiments {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A scale as make_scaler reads it: 2^k for a power of two, else the shortest exact decimal.
std::string scale_option(double v) {
  int e = 0;
  if (std::frexp(v, &e) == 0.5) return "2^" + std::to_string(e - 1);
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

training::TrainConfig base_config(const ScalersConfig& c, const ScenarioSpec& scenario) {
  training::TrainConfig t = training::experiment_config(
      {.model = c.model, .data = c.data, .data_dir = c.data_dir, .train_size = c.train_size,
       .test_size = c.test_size, .steps = scenario.steps, .lr = scenario.lr});
  t.input_scale = scenario.input_scale;
  t.histograms = false;  // the report draws no histograms; the rates need only the counts
  return t;
}

struct Side {
  StrategySpec spec;
  bool fp32 = false;
};

std::vector<Side> sides_of(const ScalersConfig& c, const ScenarioSpec& scenario) {
  std::vector<Side> sides;
  sides.push_back({{"fp32", "fp32 (ref)", "fp32", "none", {}}, true});
  for (const StrategySpec& s : fp16_strategies(c)) sides.push_back({s, false});
  if (scenario.fp8)
    for (const StrategySpec& s : fp8_strategies()) sides.push_back({s, false});
  return sides;
}

training::TrainConfig side_config(const ScalersConfig& c, const ScenarioSpec& scenario, const Side& side,
                                  std::uint64_t seed) {
  training::TrainConfig t = base_config(c, scenario);
  t.recipe = side.spec.recipe;
  t.scaler = side.spec.scaler;
  t.scaler_options = side.spec.options;
  t.backend = side.fp32 ? nn::BackendKind::ref : nn::BackendKind::emu;
  t.seed = seed;
  // Seed 1 with the recorders on (underflow rates; the FP8 amax trace needs
  // per-tensor records); the others off: the recorders only observe.
  t.recorders = seed == 1;
  t.record_every = seed == 1 && side.spec.recipe.starts_with("fp8") ? 1 : 0;
  t.eval_every = seed == 1 ? c.eval_every : 0;
  return t;
}

}  // namespace

std::vector<StrategySpec> fp16_strategies(const ScalersConfig& c) {
  const std::string interval = std::to_string(c.growth_interval);
  const std::string shortened = " (interval " + interval + ")";
  return {
      {"none", "none (scale 1)", "o2", "none", {}},
      {"static", "static " + scale_option(c.static_scale), "o2", "static", {{"scale", scale_option(c.static_scale)}}},
      {"torch-defaults", "torch (defaults, interval 2000)", "o2", "torch", {}},
      {"torch", "torch" + shortened, "o2", "torch", {{"interval", interval}}},
      {"apex", "apex" + shortened, "o2", "apex", {{"interval", interval}}},
      {"keras", "keras" + shortened, "o2", "keras", {{"interval", interval}}},
      {"deepspeed", "deepspeed" + shortened, "o2", "deepspeed", {{"interval", interval}}},
      {"megatron", "megatron" + shortened, "o2", "megatron", {{"interval", interval}}},
  };
}

std::vector<StrategySpec> fp8_strategies() {
  return {
      {"fp8-delayed-nonsaturating", "fp8, delayed scaling, casts without saturation",
       "fp8:fp8_scaling=delayed,matmul_forward=fp8-e4m3,matmul_backward=fp8-e5m2", "none", {}},
      {"fp8-current", "fp8, current scaling", "fp8:fp8_scaling=current", "none", {}},
      {"fp8-delayed", "fp8, delayed scaling (saturating casts)", "fp8:fp8_scaling=delayed", "none", {}},
      {"fp8-unscaled", "fp8, no operand scaling", "fp8:fp8_scaling=none", "none", {}},
  };
}

std::vector<ScenarioSpec> scenarios(const ScalersConfig& c) {
  return {
      {"normal", "the normal model", 1.0, kLearningRate, c.steps, c.seeds, c.fp8},
      {"backward", "backward overflow (images × " + scale_option(c.backward_input_scale) + ")",
       c.backward_input_scale, kLearningRate / c.backward_input_scale, c.steps, c.overflow_seeds, false},
      {"forward", "forward overflow (images × " + scale_option(c.forward_input_scale) + ")", c.forward_input_scale,
       kLearningRate / c.forward_input_scale, c.forward_steps, 1, false},
  };
}

void validate_scalers(const ScalersConfig& c) {
  if (c.model != "mlp")
    throw std::invalid_argument("--model " + c.model +
                                ": only mlp (the CNN's batch norm divides out an input scale, so its gradients "
                                "cannot be made to overflow that way)");
  if (c.seeds < 1 || c.seeds > training::kMaxSeeds)
    throw std::invalid_argument("--seeds must be between 1 and " + std::to_string(training::kMaxSeeds));
  if (c.overflow_seeds < 1 || c.overflow_seeds > c.seeds)
    throw std::invalid_argument("--overflow-seeds must be between 1 and --seeds");
  if (c.steps < 2 || c.forward_steps < 2) throw std::invalid_argument("--steps and --forward-steps must be at least 2");
  if (c.growth_interval < 1) throw std::invalid_argument("--growth-interval must be at least 1");
  if (!(c.static_scale > 0) || !std::isfinite(c.static_scale))
    throw std::invalid_argument("--static-scale must be a finite number > 0 (e.g. 128)");
  for (const auto& [name, k] : {std::pair{"--backward-input-scale", c.backward_input_scale},
                                std::pair{"--forward-input-scale", c.forward_input_scale}})
    if (!(k > 0 && std::isfinite(static_cast<float>(k))))
      throw std::invalid_argument(std::string(name) + " must be a number > 0 that fits in fp32");
  if (c.jobs < 1) throw std::invalid_argument("--jobs must be at least 1");
  if (c.report.extension() != ".md" || c.report.stem().empty())
    throw std::invalid_argument("--report '" + c.report.string() + "': the report is a Markdown file (NAME.md)");
  if (c.runs.empty()) throw std::invalid_argument("--runs: give the directory for the runs");
  // Every strategy and recipe parses; one Trainer per scenario checks the
  // data and the input scale (run_queue builds every Trainer again before
  // it writes anything).
  for (const ScenarioSpec& scenario : scenarios(c)) {
    const std::vector<Side> sides = sides_of(c, scenario);
    for (const Side& side : sides) {
      training::make_scaler(side.spec.scaler, side.spec.options);
      training::parse_recipe(side.spec.recipe);
    }
    const training::Trainer check(side_config(c, scenario, sides.at(1), 1));
  }
}

ScalersResult run_scalers(const ScalersConfig& c, const Progress& progress) {
  validate_scalers(c);
  const auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  ScalersResult result;
  std::vector<training::QueuedRun> queue;
  for (const ScenarioSpec& scenario : scenarios(c)) {
    for (const Side& side : sides_of(c, scenario))
      for (std::uint64_t seed = 1; seed <= scenario.seeds; ++seed) {
        training::QueuedRun q{side_config(c, scenario, side, seed), {}, {}};
        q.dir = training::seed_directory(c.runs / scenario.name / side.spec.side, seed);
        q.label = scenario.name + "/" + side.spec.side + " seed " + std::to_string(seed);
        queue.push_back(std::move(q));
        ScalersRun run;
        run.scenario = scenario.name;
        run.side = side.spec.side;
        run.seed = seed;
        run.recorders = seed == 1;
        run.dir = queue.back().dir;
        result.runs.push_back(std::move(run));
      }
  }
  // The slowest first (recorders on, emulated), so the threads end close together.
  std::vector<std::size_t> order(queue.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto cost = [&](std::size_t i) {
    const training::TrainConfig& t = queue[i].config;
    return static_cast<double>(t.steps) * (t.backend == nn::BackendKind::ref ? 1.0 : 3.0) * (t.recorders ? 1.5 : 1.0);
  };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return cost(a) > cost(b); });
  std::vector<training::QueuedRun> sorted;
  for (std::size_t i : order) sorted.push_back(queue[i]);
  say(std::to_string(sorted.size()) + " runs, " + std::to_string(std::min(c.jobs, sorted.size())) +
      " at a time, into " + c.runs.string());
  // A previous experiment's directories are replaced, unless an interrupted one resumes (training/run_queue.h).
  const fs::path journal = c.runs / "queue.json";
  const auto start = [&](bool resuming) {
    if (resuming) say("resuming the interrupted runs in " + c.runs.string());
    else
      for (const ScenarioSpec& scenario : scenarios(c)) fs::remove_all(c.runs / scenario.name);
  };
  const std::vector<training::FinishedRun> finished =
      training::run_queue(sorted, c.jobs, [&](const std::string& line) { say(line); }, journal, start);
  for (std::size_t k = 0; k < order.size(); ++k) {
    ScalersRun& run = result.runs[order[k]];
    run.summary = finished[k].summary;
    run.wall_seconds = finished[k].wall_seconds;
    run.steps = record::read_steps(run.dir);
  }

  say("replays, figures and report");
  const ScalersReport report = write_scalers_report(c, result.runs, result.files);

  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  for (const ScalersRun& r : result.runs)
    runs.push_back({{"scenario", r.scenario}, {"side", r.side}, {"seed", r.seed}, {"dir", r.dir.string()},
                    {"wall_seconds", r.wall_seconds},
                    {"test_accuracy", r.summary["evaluation"]["test_accuracy"]},
                    {"skipped_steps", r.summary["skipped_steps"]}, {"aborted", r.summary["aborted"]},
                    {"final_scale", r.summary["final_scale"]}});
  result.json["runs"] = runs;
  result.json["replays_agree"] = report.replays_agree;
  result.json["replay_checks"] = report.replay_checks;
  result.json["files"] = result.files;
  return result;
}

}  // namespace mpverify::experiments
