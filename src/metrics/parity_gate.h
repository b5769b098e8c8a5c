// The parity gate's decision (`mpverify gate`): is a candidate recipe's
// training equivalent to the FP32 baseline's, by one metric, within a margin?
// The statistics are metrics/equivalence.h; this file turns run directories
// (metrics/ensemble.h) into the values tested, checks that the two sides are
// comparable, and never lets a diverged run pass.
//
// Metrics and their values (one per run):
//  - accuracy: summary.evaluation.test_accuracy (a fraction), times 100: the
//    margin and every number printed are in percentage points.
//  - fid: summary.evaluation.fid. With one run per side, each FID's bootstrap
//    standard error (evaluation.fid_stderr) gives the interval (normal
//    quantile); that covers the evaluation's sampling noise only, and the
//    verdict says that seed-to-seed variance is not covered. With >= 2 runs
//    per side the runs' FIDs are the samples (their spread includes both).
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
// Method: paired when both sides ran the same set of seeds (each once;
// summary.config.seed, or the seed-<s> directory), else Welch; `pairing`
// forces one (paired on different seed sets is bad input). fid with one run
// per side uses normal_stderr. Welch and paired need >= 2 runs per side.
//
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

namespace mpverify::metrics {

enum class GateMetric { accuracy, fid, loss };
enum class Pairing { automatic, paired, welch };

const char* to_string(GateMetric metric);  // "accuracy", "fid", "loss"
std::optional<GateMetric> parse_gate_metric(const std::string& name);

struct GateOptions {
  GateMetric metric = GateMetric::accuracy;
  double margin = 0;  // > 0, in the metric's unit (accuracy: percentage points)
  double alpha = 0.05;
  Pairing pairing = Pairing::automatic;
  double loss_tail_fraction = 0.1;  // in (0, 1]
  std::string loss_key;             // "" chooses "loss" or "loss_g"
};

struct RunOutcome {
  std::string run;  // the run directory
  std::optional<std::int64_t> seed;
  std::optional<double> value;   // in the gate's unit; nullopt when the run diverged
  std::optional<double> stderr_value;  // fid: evaluation.fid_stderr when present
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

struct GateResult {
  GateMetric metric = GateMetric::accuracy;
  std::string unit;  // "points", "FID", or the loss key
  std::string baseline, candidate;  // the directories
  Verdict verdict = Verdict::inconclusive;
  std::string reason;  // one sentence: why this verdict
  std::optional<EquivalenceResult> test;  // absent when a divergence decided
  std::vector<std::int64_t> paired_seeds;  // the seeds paired on (paired only)
  std::vector<RunOutcome> baseline_runs, candidate_runs;
  std::vector<std::string> notes;  // what the method does not cover, how it was chosen
  double margin = 0, alpha = 0;
  // loss only
  std::string loss_key;
  std::size_t loss_tail_steps = 0;
  std::int64_t loss_tail_first_step = 0;
  std::optional<LossEnvelope> envelope;
};

// Throws InputError for bad input (see above).
GateResult evaluate_gate(const Ensemble& baseline, const Ensemble& candidate, const GateOptions& options);

// 0 equivalent, 1 not equivalent, 3 inconclusive (2 is bad input, never a verdict).
int gate_exit_code(Verdict verdict);
// One readable line: the verdict in capitals, the difference, interval,
// margin, method and n; or the diverged run.
std::string gate_verdict_line(const GateResult& result);
// Everything, for --json: verdict, exit_code, line, metric, unit, method,
// n_baseline, n_candidate, means, difference, standard_error, df (null when
// infinite), ci_level, ci_lower, ci_upper, p_lower, p_upper, margin, alpha,
// seeds_needed, reason, notes, paired_seeds, the per-run values, and (loss)
// the tail and the envelope.
nlohmann::ordered_json gate_json(const GateResult& result);

}  // namespace mpverify::metrics
