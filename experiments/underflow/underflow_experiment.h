// Experiment 1: gradient underflow in fp16 and loss scaling, after
// Micikevicius et al., "Mixed Precision Training" (ICLR 2018), whose Multibox
// SSD histogram showed 67% of activation-gradient values zero in FP32, the
// values in [2^-27, 2^-24) mattering for training, and a loss scale of 8
// enough to match FP32.
//
// What runs (run_underflow):
//  1. The census (gradient_census.h) of FP32 training: the MNIST CNN (SGD)
//     and the DCGAN (Adam, lr 2e-4), fp32 recipe on the Eigen reference, the
//     gradients at the first, middle and last step binned by binade and
//     counted exactly at every scale: how many non-zero values would become
//     zero, become subnormal or overflow if stored in fp16 at that scale.
//  2. The parity sweep: the CNN in the mixed recipe (o2 by default) with the
//     `static` loss scaler at every scale, against fp32, paired seeds; per
//     scale the accuracy gate (metrics::evaluate_gate, paired TOST), the
//     skipped steps (overflow with a static scale) and the underflow rates
//     the o2 run measured at its scale (seed 1, recorders on).
//  3. The report (Markdown + SVG figures) and the JSON summary.
// The fp32 baseline's seed 1 is the CNN census run (the observer changes
// nothing the training computes). Every run is bitwise the same for a seed
// whatever `jobs` is, so the report's bytes are too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/parity_gate.h"
#include "underflow/gradient_census.h"

#include "experiment_main.h"

namespace mpverify::experiments {

struct UnderflowConfig {
  std::string data = "mnist";  // mnist, synthetic or sklearn-digits (the CNN and the DCGAN)
  std::filesystem::path data_dir;  // empty: the loader's default ($MPVERIFY_MNIST_DIR, ...)
  std::size_t train_size = 8000, test_size = 2000;
  std::size_t cnn_steps = 60;    // SGD lr 0.05, momentum 0.9, batch 64
  std::size_t gan_steps = 100;   // Adam lr 2e-4, batch 64; 0: no DCGAN census
  std::size_t seeds = 4;         // 1..seeds on both sides of every gate
  // The loss scales: 1, 8, 64, ..., 2^24 (every power of 8). Each must be a
  // power of two in [1, 2^64] (exact in fp32; the static scaler keeps it).
  std::vector<double> scales = default_scales();
  std::string recipe = "o2";     // the mixed-precision candidate (a recipe the emulator runs)
  double margin = 1.0;           // percentage points of test accuracy
  double alpha = 0.05;
  std::filesystem::path report = "reports/underflow.md";
  std::filesystem::path runs = "runs/underflow";
  std::size_t jobs = 2;

  static std::vector<double> default_scales();
};

// One scale of the parity sweep.
struct ScalePoint {
  double scale = 1;
  metrics::GateResult gate;
  std::vector<std::optional<double>> accuracy;  // candidate test accuracy (%) per seed; nullopt: diverged
  std::size_t skipped_steps = 0;                // over every seed
  // Seed 1's run (recorders on): means over its steps of the rates the o2 run
  // measured on its own gradients at the scale (steps.jsonl).
  double underflow_rate = 0, subnormal_rate = 0, overflow_rate = 0;
};

struct UnderflowResult {
  std::vector<double> baseline_accuracy;        // fp32 test accuracy (%) per seed
  std::vector<ScalePoint> points;               // in the order of config.scales
  std::optional<double> smallest_equivalent;    // the smallest scale whose verdict is equivalent
  std::map<CensusKey, CensusCell> census;       // classifier, discriminator, generator
  std::map<std::pair<std::string, std::string>, double> weight_grad_max;  // GradientCensus::weight_grad_max, both runs
  std::vector<std::size_t> census_steps_cnn, census_steps_gan;
  std::vector<std::filesystem::path> files;     // the report and its figures
  nlohmann::ordered_json json;                  // for --json
};

// Throws std::invalid_argument naming the bad setting (and data::DataFileError
// for data it cannot load) before anything is written.
void validate_underflow(const UnderflowConfig& config);

UnderflowResult run_underflow(const UnderflowConfig& config, const Progress& progress);

// "1,2^3,64" -> {1, 8, 64}: each item a decimal number or 2^k; throws
// std::invalid_argument naming the bad item (validate_underflow checks the values).
std::vector<double> parse_scale_list(const std::string& text);

// "o2-static-8": the run directory of one scale under config.runs.
std::string scale_side_name(const std::string& recipe, double scale);

}  // namespace mpverify::experiments
