// Experiment 3: loss-scale strategies side by side.
//
// Every fp16 strategy (none, static S, torch, apex, keras, deepspeed,
// megatron; torch once more at its defaults) trains the same model under o2
// in three scenarios, chosen so that each strategy's rule is exercised:
//  - normal: the model as it is (MNIST images in [0, 1]);
//  - backward overflow: the images multiplied by `backward_input_scale`, so
//    that the MLP's gradients (proportional to it: the MLP has no
//    normalization) overflow fp16 at the usual scales while its forward pass
//    stays finite: a dynamic scaler backs off and recovers, a static S keeps
//    skipping;
//  - forward overflow: the images multiplied by `forward_input_scale`, so
//    that the input and fc1's output overflow fp16 in the FORWARD pass: every step is
//    skipped whatever the scale, the dynamic scales collapse, DeepSpeed
//    aborts at its minimum.
// The FP8 recipe (operand scaling delayed, current or none) trains the normal
// model too. One recorded found_inf sequence is replayed through every
// strategy (training/scaler_replay.h), every run's own sequence is replayed
// through its own strategy and must reproduce its scale and skips step by
// step, and the amax of one recorded backward operand is replayed through the
// FP8 strategies (delayed, current, mxfp8).
//
// Output: the run directories under `runs` (<scenario>/<side>/seed-<s>), the
// report and its figures (<stem>-*.svg). The report holds no time, host or
// absolute path: the same configuration gives the same bytes whatever `jobs`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiment_main.h"
#include "training/loss_scaler.h"

namespace mpverify::experiments {

struct ScalersConfig {
  std::filesystem::path report = "reports/scalers.md";
  std::filesystem::path runs = "runs/scalers";
  std::string model = "mlp";  // mlp (see the report: the CNN's batch norm undoes an input scale)
  std::string data = "mnist";
  std::filesystem::path data_dir;  // empty: the loader's default
  std::size_t train_size = 8000, test_size = 2000;
  std::size_t seeds = 3;           // the normal scenario and FP8: seeds 1..seeds (paired with fp32)
  std::size_t overflow_seeds = 3;  // the backward-overflow scenario
  std::size_t steps = 200;         // normal and backward overflow
  std::size_t forward_steps = 40;  // forward overflow (every step is skipped anyway)
  int growth_interval = 25;        // the shortened growth interval of the dynamic strategies
  double static_scale = 128;       // static S (MXNet's example)
  double backward_input_scale = 4096;  // 2^12
  double forward_input_scale = 131072;  // 2^17
  std::size_t eval_every = 25;     // test accuracy along the way, seed 1 (0: only at the end)
  bool fp8 = true;                 // train the FP8 recipe too
  std::size_t jobs = 2;
};

// One strategy as it is trained: `side` names its directory.
struct StrategySpec {
  std::string side, title;  // "torch", "torch (interval 25)"
  std::string recipe = "o2";
  std::string scaler;
  training::ScalerOptions options;
};

// The fp16 strategies of every scenario (their options from the config).
std::vector<StrategySpec> fp16_strategies(const ScalersConfig& config);
// The FP8 sides (recipe fp8 with each operand scaling, loss scaler none).
std::vector<StrategySpec> fp8_strategies();

struct ScenarioSpec {
  std::string name, title;
  double input_scale = 1;
  double lr = 0.05;  // SGD's, kLearningRate / input_scale (see scenarios())
  std::size_t steps = 0;
  std::size_t seeds = 0;
  bool fp8 = false;  // the FP8 sides train in it
};

// The normal model's SGD learning rate (momentum 0.9, batch 64).
inline constexpr double kLearningRate = 0.05;

// normal, backward, forward. A scaled model trains with lr / input_scale:
// its weight gradients are input_scale times larger (the MLP is positively
// homogeneous in its input, biases aside), so each step then changes every
// weight by the same fraction as on the normal model instead of blowing the
// model up at the first update.
std::vector<ScenarioSpec> scenarios(const ScalersConfig& config);

// One finished run.
struct ScalersRun {
  std::string scenario, side;
  std::uint64_t seed = 0;
  bool recorders = false;
  std::filesystem::path dir;
  nlohmann::json summary;            // summary.json
  std::vector<nlohmann::json> steps; // steps.jsonl
  double wall_seconds = 0;
};

struct ScalersResult {
  std::vector<ScalersRun> runs;
  nlohmann::ordered_json json;               // --json
  std::vector<std::filesystem::path> files;  // written, besides the run directories
};

// Checks the configuration (and that the data loads) without writing
// anything; std::invalid_argument (or data::DataFileError) naming the option.
void validate_scalers(const ScalersConfig& config);

// validate, train every run (`jobs` at a time), write the report and figures.
ScalersResult run_scalers(const ScalersConfig& config, const Progress& progress = {});

}  // namespace mpverify::experiments
