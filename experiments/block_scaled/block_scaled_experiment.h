// Block-scaled formats: the recipes mxfp8, nvfp4 and fp8-blockwise (training/recipe.h) against bf16
// (bf16-o1) and fp32 on the CNN (synthetic digits) and on the character transformer (the KJV), and
// three claims of the literature, each reproduced or refuted with the numbers:
//  (a) OCP's floor rule for E8M0 scales saturates the largest element of every E4M3 block whose amax
//      significand exceeds 1.75, and rceil (Transformer Engine's) never saturates:
//      `mxfp8:scale_rule=floor` against `mxfp8`, the saturation counts of blocks.jsonl, and the rule
//      itself checked block by block on real activations and gradients (block_amax_check);
//  (b) NVFP4 with every linear layer in FP4 (`nvfp4:high_precision_last=0`) trains worse than with the
//      output head in BF16 (`nvfp4`);
//  (c) the random Hadamard transform and stochastic rounding of dy each narrow NVFP4's gap to BF16:
//      `nvfp4:hadamard=off` and `nvfp4:dy_rounding=rne` against `nvfp4`.
//
// What runs, for each model and seed 1..seeds: fp32 on the `ref` backend, every other recipe on `emu`,
// the same seed giving the same initial weights and batches on every side. The block-scaled runs record
// blocks.jsonl every `record_every` steps (the other recorders' histograms off; the fp32 and bf16 runs
// record nothing beyond the per-step loss). Claims (b) and (c) are decided on the held-out test loss
// (summary.json's evaluation.test_loss), paired by seed: the variant minus the default nvfp4, with the
// paired (1 - 2 alpha) t interval; "reproduced" when the whole interval lies above 0 (the variant is
// worse), "refuted" when it lies below, "not reproduced at this scale" when it holds 0, and "undecided"
// with one seed (no interval). The parity gate (metrics::evaluate_gate, paired, test accuracy in points
// and the tail-mean training loss) compares every emulated side with fp32; it needs 2 seeds.
//
// Output: the run directories under `runs` (<model>/<side>/seed-<s>/ and each side's ensemble.json, so
// `mpverify gate` reproduces every verdict), the report and its figures next to it
// (<stem>-loss-cnn.svg, <stem>-loss-transformer.svg). The report holds no time, host or absolute path:
// the same configuration gives the same bytes, whatever `jobs` is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/parity_gate.h"
#include "training/trainer.h"

namespace mpverify::experiments {

struct BlockScaledConfig {
  std::filesystem::path runs = "runs/block_scaled";
  std::filesystem::path report = "reports/block_scaled.md";
  // The defaults fit in about 20 minutes of 2 idle cores (measured costs in the report's "What ran").
  std::size_t seeds = 3;
  // The CNN: synthetic 28x28 digits.
  std::size_t cnn_steps = 80, cnn_batch = 32, train_size = 2000, test_size = 500;
  // The transformer: Adam at lr 3e-3, batch windows of context_length tokens; test_windows held-out windows.
  std::size_t transformer_steps = 60, transformer_batch = 16, context_length = 32, test_windows = 64;
  std::size_t record_every = 4;  // blocks.jsonl every N steps
  std::size_t jobs = 2;
  double margin = 1.0;        // the gate's margin on test accuracy, points
  double loss_margin = 0.05;  // the gate's margin on the tail-mean training loss
  double alpha = 0.05;
  bool amax_check = true;     // claim (a)'s block-by-block check of the 1.75 rule
  // Tests and --quick: the transformer's text in place of the KJV (TrainConfig::text_for_tests).
  std::optional<std::string> text_for_tests;
  bool quick = false;  // printed in the report's command line only
};

// The tiny configuration of --quick (the tests' and a try in seconds): 2 seeds of 3 steps, small batches,
// a built-in text for the transformer.
BlockScaledConfig quick_block_scaled_config();

// The recipes every model runs (fp32 first, then bf16-o1, the three block-scaled recipes and the claims'
// variants), in the report's order.
std::vector<std::string> block_scaled_recipes();
// "mxfp8:scale_rule=floor" -> "mxfp8-scale_rule-floor-emu"; "fp32" -> "fp32-ref".
std::string block_scaled_side_name(const std::string& recipe);
// The training configuration of one side (seed 0; the queue sets it).
training::TrainConfig block_scaled_train_config(const BlockScaledConfig& c, const std::string& model,
                                                 const std::string& recipe);

// Claim (a) checked on real tensors: the activations and activation gradients one short run stores
// (mxfp8 with floor scales), cut into blocks of 32 consecutive elements and quantized with floor and with
// rceil scales, once per element format: mxfp8-e4m3 (max 448 = 1.75 * 2^8: the threshold 1.75) and mxfp4
// (E2M1, max 6 = 1.5 * 2^2: the threshold 1.5).
struct AmaxCheck {
  std::string model;
  std::string scheme;                   // mxfp8-e4m3 or mxfp4
  double threshold = 0;                 // the element format's max_finite / 2^emax_elem
  std::size_t tensors = 0;
  std::uint64_t blocks = 0;             // blocks with a finite non-zero amax and an unclamped floor scale
  std::uint64_t above = 0;              // of which amax's significand > threshold
  std::uint64_t above_saturated = 0;    // of those, floor saturated the block's largest element
  std::uint64_t below_saturated = 0;    // blocks at or below the threshold that floor saturated (the rule says 0)
  std::uint64_t rceil_saturated = 0;    // blocks rceil saturated (the claim says 0)
  std::uint64_t floor_saturated_elements = 0, elements = 0;
};
// Checks the tensors of one run of `model` (first `steps` steps, seed 1): one check per scheme.
std::vector<AmaxCheck> block_amax_check(const BlockScaledConfig& c, const std::string& model, std::size_t steps);
// The schemes claim (a)'s block check quantizes with.
inline constexpr const char* kAmaxCheckSchemes[] = {"mxfp8-e4m3", "mxfp4"};

// A per-(layer, operand) mean of blocks.jsonl's rates over the recorded steps and seeds.
struct OperandRates {
  std::string layer, operand;
  double saturation_rate = 0, underflow_rate = 0;
  std::optional<double> sqnr_db;  // the mean of the finite values; nullopt when none
  std::size_t lines = 0;
};
// Every (layer, operand) of the side's blocks.jsonl files (seeds 1..seeds), in the order first seen.
std::vector<OperandRates> operand_rates(const std::filesystem::path& side_dir, std::size_t seeds);

// Totals over a side's blocks.jsonl files.
struct SaturationTotals {
  std::uint64_t elements = 0, saturated = 0, blocks = 0;
  std::size_t lines = 0, lines_saturated = 0;
};
SaturationTotals saturation_totals(const std::filesystem::path& side_dir, std::size_t seeds);

// One claim row of (b)/(c): a variant against the default nvfp4, paired by seed on the test loss.
struct ClaimComparison {
  std::string model, variant, reference = "nvfp4";
  std::vector<std::optional<double>> variant_loss, reference_loss, bf16_loss;  // per seed (nullopt: diverged)
  std::optional<double> mean_difference, lower, upper;  // variant - reference; the interval (>= 2 seeds)
  std::string verdict;  // "reproduced", "refuted", "not reproduced at this scale", "undecided (one seed)", ...
};
ClaimComparison compare_claim(const BlockScaledConfig& c, const std::string& model, const std::string& variant);

struct BlockScaledGate {
  std::string model, recipe;
  metrics::GateResult accuracy, loss;
};

struct BlockScaledResult {
  std::vector<BlockScaledGate> gates;  // empty with one seed
  std::vector<ClaimComparison> claims;
  std::vector<AmaxCheck> amax_checks;
  std::string verdict_a, verdict_b, verdict_c;
  std::string report_text;
  nlohmann::ordered_json json;
  std::vector<std::filesystem::path> files;  // written, besides the run directories
};

// Checks the configuration (and that every side's trainer can be built) without writing anything;
// std::invalid_argument naming the setting.
void validate_block_scaled(const BlockScaledConfig& c);

// validate, train every run (`jobs` at a time), gate, decide the claims, write the figures and the report.
BlockScaledResult run_block_scaled(const BlockScaledConfig& c, const std::function<void(const std::string&)>& progress = {});

// The loss curves (seed 1, every recipe; one figure per model), appended to `files`.
void write_block_scaled_figures(const BlockScaledConfig& c, std::vector<std::filesystem::path>& files);
// The report's Markdown from the finished runs and `result`'s gates, claims and checks.
std::string block_scaled_report(const BlockScaledConfig& c, const BlockScaledResult& result);
// The command line that reproduces `c` (the report's first lines).
std::string block_scaled_command(const BlockScaledConfig& c);

// The overall verdict of a claim from its rows: "reproduced" when every row reproduces it, "refuted" when
// any row refutes it and none reproduces it, otherwise the rows' verdicts are mixed or open.
std::string combined_verdict(const std::vector<std::string>& verdicts);

}  // namespace mpverify::experiments
