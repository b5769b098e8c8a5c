// The parity gate's decision (`mpverify gate`): is a candidate recipe's
// training equivalent to the FP32 baseline's, by one metric, within a margin?
// The statistics are metrics/equivalence.h; this file turns run directories
// (metrics/ensemble.h) into the values tested, checks that the two sides are
// comparable, and never lets a diverged run pass.
//
// Metrics and their values (one per run):
//  - accuracy: summary.evaluation.test_accuracy (a fraction), times 100: the
//    margin and every number printed are in percentage points.
//  - fid: summary.evaluation.fid. With >= 2 runs per side the runs' FIDs are
//    the samples (their spread includes both seed and sampling noise); one
//    run per side is inconclusive unless accept_single_run (below), which
//    tests on evaluation.fid_stderr with evaluation.fid_bootstrap_replicates.
//  - loss: the mean training loss over the last `loss_tail_fraction` of the
//    steps (K = ceil(fraction * steps), at least 1), per run; the steps'
//    key is "loss" (or "loss_g", a GAN's generator loss, when the runs log no
//    "loss"), or `loss_key`. Why a tail mean and not the envelope: the TOST
//    on one number per run has a controlled error rate; a rule on the
//    fraction of steps outside the baseline's envelope has none (successive
//    steps are correlated, and even a run drawn from the baseline's own
//    distribution falls outside the [min, max] of n baseline runs at a step
//    with probability 2/(n + 1)). The envelope is still computed and reported
//    (LossEnvelope) as a diagnostic of where the curves part.
//  - kid: summary.evaluation.kid, like fid with >= 2 runs per side (its
//    kid_stderr is the spread of one subset's estimate, not a standard
//    error, so no single-run test).
//  - any other name (GateMetric::custom): summary.evaluation.<name>, a figure
//    the run's evaluation recorded (test_loss, perplexity, a user's own), in
//    its own unit, null for a diverged run; test_size must agree where given.
// Value files (metrics/value_file.h) give the values directly, under any
// metric name (GateMetric::custom; accuracy/fid/kid/loss name their
// direction only): one value per seed, a non-finite value a diverged run.
// Method: paired when both sides ran the same set of seeds (each once;
// summary.config.seed, the seed-<s> directory, or the file's seed column),
// else Welch; `pairing` forces one (paired on different seed sets is bad
// input). Welch and paired need >= 2 runs per side; with fewer the verdict is
// inconclusive (exit 3): one run shows no seed-to-seed spread, and a single
// FID's bootstrap interval alone passed pairs that differed by seed noise.
// `accept_single_run` lets one run per side be tested on the values' own
// standard errors (stderr_t: FID's bootstrap standard error, or a file's
// stderr column, t with min(B_b, B_c) - 1 degrees of freedom), and the
// verdict says that seed-to-seed variance is not covered.
// Divergence: a run whose summary says "aborted": true, whose metric is null
// (test_accuracy/fid is null after a divergence), whose "final_loss" is null
// (non-finite), or (loss) whose loss is non-finite at a tail step, diverged.
// Any diverged run, on either side, makes the verdict "not equivalent" with
// the reason, whatever the statistics would say: a baseline that diverged
// cannot vouch for anything either.
//
// Bad input (InputError; the CLI's exit 2), found before any verdict: the
// errors of ensemble.h, the metric missing from a run's evaluation (with what
// the evaluation does hold: "mismatched metrics"), a value of the wrong type
// or out of range, fewer than 2 runs where the method needs them, runs whose
// configs differ in what makes them the same experiment (model, data,
// train_size, steps, batch_size, optimizer, and the evaluation's test_size or
// n, across both sides; also recipe, scaler and backend within one side), and
// (loss) a steps.jsonl that does not hold each step 0..steps-1 exactly once
// with a "step" and the loss key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/ensemble.h"
#include "metrics/equivalence.h"
#include "metrics/sequential_design.h"
#include "metrics/value_file.h"

namespace mpverify::metrics {

enum class GateMetric { accuracy, fid, loss, kid, custom };
enum class Pairing { automatic, paired, welch };
// Which way is better. The equivalence test is symmetric; the direction names
// the worse side in the verdict and decides "reached the target" (curves).
enum class Direction { unspecified, higher_is_better, lower_is_better };

const char* to_string(GateMetric metric);  // "accuracy", "fid", "loss", "kid", "custom"
const char* to_string(Direction direction);  // "unspecified", "higher", "lower"
// accuracy, fid, loss, kid; nullopt for any other name (a value file's custom metric).
std::optional<GateMetric> parse_gate_metric(const std::string& name);
// accuracy: higher; fid, kid, loss: lower; custom: unspecified.
Direction natural_direction(GateMetric metric);
// A figure of the runs' evaluation: its direction from its name, when it is one of the documented common
// names (test_loss, perplexity, bpc, error, wer, ...: lower; accuracy, top1, bleu, f1, auc, ...: higher);
// else unspecified, and --higher-is-better / --lower-is-better says it (the test itself is symmetric).
// Value files' metrics keep the direction their flags state.
Direction direction_of_name(const std::string& name);

struct GateOptions {
  GateMetric metric = GateMetric::accuracy;
  std::string metric_name;  // custom: the name printed; "" for the named metrics
  Direction direction = Direction::unspecified;  // a named metric's contradicting direction is bad input
  bool accept_single_run = false;  // one run per side: test on the standard errors (see above)
  double margin = 0;  // > 0, in the metric's unit (accuracy: percentage points)
  double alpha = 0.05;
  Pairing pairing = Pairing::automatic;
  double loss_tail_fraction = 0.1;  // in (0, 1]
  std::string loss_key;             // "" chooses "loss" or "loss_g"
  // In rounds (sequential_design.h): runs ordered by seed, each planned look tested at its spent level.
  std::optional<SequentialDesign> sequential;
};

struct RunOutcome {
  std::string run;  // the run directory
  std::optional<std::int64_t> seed;
  std::optional<double> value;   // in the gate's unit; nullopt when the run diverged
  std::optional<double> stderr_value;  // fid: evaluation.fid_stderr when present; a file's stderr
  std::optional<std::int64_t> replicates;  // fid: evaluation.fid_bootstrap_replicates; a file's replicates
  std::string divergence;        // why the run counts as diverged; "" when it does not
};

// Over the steps after the warm-up (the first ceil(10%) of the steps): how
// often the candidate's runs leave the baseline runs' [min, max] at a step,
// and that envelope widened by the margin. A non-finite loss counts as outside.
struct LossEnvelope {
  std::int64_t first_step = 0, last_step = 0;
  std::size_t points = 0;  // candidate runs x steps compared
  std::size_t outside = 0, outside_widened = 0;
  double expected_outside_fraction = 0;  // 2/(n_baseline + 1): a run exchangeable with the baseline's
  std::optional<std::int64_t> first_step_outside_widened;
};

// The per-step golden-values check (metrics/curve_gate.h): the largest
// relative deviation |c - g| / |g| of the candidate's curve from the
// baseline's (the golden values) over the matched steps, against rtol.
struct GoldenCheck {
  double rtol = 0;
  double max_relative_deviation = 0;
  std::optional<std::int64_t> worst_step, worst_seed;
  std::size_t pairs = 0, steps_compared = 0, steps_outside = 0;
};

// The MLPerf-style steps-to-target check (metrics/curve_gate.h): per side the
// runs' steps to reach the target, the fastest and slowest dropped, and a
// one-sided pooled-variance t-test that the candidate is slower.
struct MlperfCheck {
  double target = 0;
  std::string reached;  // "<= target" or ">= target"
  std::vector<double> baseline_trimmed, candidate_trimmed;  // sorted; +inf: never reached
  double mean_baseline = 0, mean_candidate = 0, sd_baseline = 0, sd_candidate = 0;
  double t = 0, df = 0, p_slower = 1;  // p: P(T >= t) under "not slower"
};

// The sequential gate's looks (sequential_design.h), when options.sequential was given.
struct SequentialGate {
  SequentialDesign design;
  std::vector<double> levels;  // each look's level; they sum to alpha
  SequentialOutcome outcome;   // the looks reached; the deciding one, or the next look
  std::size_t available = 0;   // runs per side the looks could use (min of the sides; pairs when paired)
};

struct GateResult {
  GateMetric metric = GateMetric::accuracy;
  std::string metric_name;  // what the line and the reports call it ("accuracy", "bleu", ...)
  Direction direction = Direction::unspecified;
  std::string unit;  // "points", "FID", "KID", the loss key, or a value file's metric name
  std::string baseline, candidate;  // the directories
  Verdict verdict = Verdict::inconclusive;
  std::string reason;  // one sentence: why this verdict
  std::optional<EquivalenceResult> test;  // absent when a divergence decided; sequential: the last look's
  std::optional<SequentialGate> sequential;
  std::vector<std::int64_t> paired_seeds;  // the seeds paired on (paired only)
  std::vector<RunOutcome> baseline_runs, candidate_runs;
  std::vector<std::string> notes;  // what the method does not cover, how it was chosen
  double margin = 0, alpha = 0;
  // loss only
  std::string loss_key;
  std::size_t loss_tail_steps = 0;
  std::int64_t loss_tail_first_step = 0;
  std::optional<LossEnvelope> envelope;
  // the per-step modes (curve_gate.h); absent otherwise
  std::optional<GoldenCheck> golden;
  std::optional<MlperfCheck> mlperf;
};

// Throws InputError for bad input (see above).
GateResult evaluate_gate(const Ensemble& baseline, const Ensemble& candidate, const GateOptions& options);
// The same decision on value files (options.metric: any; loss reads the files' values, not steps).
GateResult evaluate_gate(const ValueFile& baseline, const ValueFile& candidate, const GateOptions& options);

// Comparable experiments: the configs that must agree across both sides and
// within each (bad input otherwise). Returns every run, the baseline's first.
std::vector<const RunDirectory*> comparable_runs(const Ensemble& baseline, const Ensemble& candidate);

// 0 equivalent, 1 not equivalent, 3 inconclusive (2 is bad input, never a verdict).
int gate_exit_code(Verdict verdict);
// One readable line: the verdict in capitals, the difference, interval,
// margin, method and n; or the diverged run.
std::string gate_verdict_line(const GateResult& result);
// An inconclusive test's lean: "equivalent" when the observed difference lies inside the margin, "not
// equivalent" outside it; nullptr for a decided test or a difference exactly on the margin. More seeds move
// the interval, not (in expectation) the difference, so this is where they would most likely lead.
const char* leaning_toward(const EquivalenceResult& test);
// Everything, for --json: verdict, exit_code, line, metric, unit, method,
// n_baseline, n_candidate, means, difference, standard_error, df (null when
// infinite), ci_level, ci_lower, ci_upper, p_lower, p_upper, margin, alpha,
// seeds_needed, reason, notes, paired_seeds, the per-run values, and (loss)
// the tail and the envelope.
nlohmann::ordered_json gate_json(const GateResult& result);

}  // namespace mpverify::metrics
