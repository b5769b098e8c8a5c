// The parity gate's per-step modes (`mpverify gate --mode curve|mlperf`), on
// training curves: each run's steps.jsonl (the loss key, as --metric loss
// reads it) or a curve file (metrics/value_file.h with a `step` column: one
// value per seed and step).
//
// Golden values (`--mode curve --rtol R`), the check Megatron-LM's functional
// tests run on the loss curve: the baseline's curve is the golden one, and at
// every step it has, the candidate's value must lie within a relative
// tolerance of it, |c - g| <= R |g| (pytest.approx(g, rel=R) in
// tests/functional_tests/python_test_utils/test_ci_pipeline.py). The verdict
// is the largest relative deviation over the matched steps against R:
// equivalent when it is <= R, not equivalent otherwise. No interval and no
// inconclusive: it is a tolerance check, as exact as the runs are
// reproducible (Megatron calibrates R from repeated runs). One run per side
// is compared as it is; several are paired by seed (the same seed set on both
// sides), and the worst pair decides. A step the golden curve has and the
// candidate's lacks, or a non-finite value on either curve, is a diverged run
// (not equivalent, as Megatron's newer checks count a missing step as inf).
//
// MLPerf-style steps to target (`--mode mlperf --target T`), after MLPerf's
// reference-convergence check (mlcommons/logging, rcp_checker.py): each run's
// steps to target is the first step whose value reaches T (value <= T for a
// lower-is-better metric such as a loss, >= T for higher-is-better); a run
// that never reaches it takes +infinity. Per side the runs are sorted and
// the fastest and slowest dropped ("olympic" statistics), then a one-sided
// two-sample t-test with pooled variance (scipy's ttest_ind_from_stats with
// equal_var=True, as MLPerf calls it) asks whether the candidate needs more
// steps: t = (m_c - m_b) / (s_p sqrt(1/n_b + 1/n_c)), df = n_b + n_c - 2 on
// the trimmed sizes, p = P(T >= t). p < alpha: not equivalent (the candidate
// converges slower); else equivalent (no evidence that it does). MLPerf uses
// numpy's std (1/n); this check uses the sample standard deviation (1/(n-1)),
// the one the t-test's derivation assumes. Where MLPerf fails a submission
// that converges too fast (tuned against the reference), a precision gate
// fails the candidate that converges too slowly.
// Needs >= 3 runs per side and >= 7 in all (each side keeps n - 2 runs, and
// the test needs df >= 1); fewer is inconclusive (exit 3). A side with two or
// more runs that never reach the target keeps an infinite value after
// trimming: for the candidate that is not equivalent (MLPerf allows one
// non-converging run), for the baseline bad input (choose a target the
// baseline reaches). A non-finite value anywhere on a curve, or a run whose
// summary says it diverged, is a diverged run: not equivalent.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "metrics/ensemble.h"
#include "metrics/parity_gate.h"
#include "metrics/value_file.h"

namespace mpverify::metrics {

enum class GateMode { tost, curve, mlperf };
const char* to_string(GateMode mode);  // "tost", "curve", "mlperf"
std::optional<GateMode> parse_gate_mode(const std::string& name);

struct CurveRun {
  std::string run;  // the directory, or FILE (seed S)
  std::optional<std::int64_t> seed;
  std::map<std::int64_t, std::optional<double>> values;  // step -> value; nullopt: non-finite
  std::string divergence;  // the run's own summary says it diverged; "" otherwise
};

struct CurveSide {
  std::string name;  // the directory or file as given
  std::vector<CurveRun> runs;
};

// The sides' curves from run directories (read with their steps; configs
// compared as the gate does; the key: options.loss_key, else "loss" or
// "loss_g") or from curve files. InputError for bad input.
std::pair<CurveSide, CurveSide> read_curves(const Ensemble& baseline, const Ensemble& candidate,
                                            const GateOptions& options, std::string& key);
std::pair<CurveSide, CurveSide> read_curves(const ValueFile& baseline, const ValueFile& candidate);

struct CurveGateOptions {
  double rtol = 0;    // golden values: > 0
  double target = 0;  // mlperf: finite
  double alpha = 0.05;
  Direction direction = Direction::unspecified;  // mlperf: which way reaches the target
};

// The verdicts above, as a GateResult (metric_name, unit and the sides'
// names set by the caller's options; golden or mlperf filled in).
GateResult golden_values_gate(const CurveSide& baseline, const CurveSide& candidate, const GateOptions& gate,
                              const CurveGateOptions& options);
GateResult mlperf_gate(const CurveSide& baseline, const CurveSide& candidate, const GateOptions& gate,
                       const CurveGateOptions& options);

// The first step whose value reaches `target` (nullopt: never), steps in order.
std::optional<std::int64_t> steps_to_target(const std::map<std::int64_t, std::optional<double>>& curve,
                                            double target, Direction direction);

}  // namespace mpverify::metrics
