// mpverify gate --baseline DIR|FILE --candidate DIR|FILE --metric NAME
//               --margin X [--alpha A] [--method auto|paired|welch]
//               [--higher-is-better | --lower-is-better] [--accept-single-run]
//               [--junit FILE] [--json] [--loss-key KEY] [--loss-tail F]
//               [--fid-reference REAL.npz] [--sequential 4,8,12,16 [--spending obrien-fleming|pocock]]
// The CI parity gate: is the candidate recipe's training equivalent to the
// baseline's within ±margin? The decision is metrics::evaluate_gate
// (metrics/parity_gate.h defines it), value files metrics/value_file.h, the
// JUnit report report::gate_junit_suite, FIDs from statistics files
// metrics/fid_statistics_gate.h; this file reads the inputs and prints.
// Exit codes: 0 equivalent, 1 not equivalent (or a diverged run), 2 bad input
// (no verdict, no report written, nothing on stdout), 3 inconclusive (one run
// per side included).
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "metrics/curve_gate.h"
#include "metrics/ensemble.h"
#include "metrics/fid_statistics_gate.h"
#include "metrics/parity_gate.h"
#include "metrics/value_file.h"
#include "report/gate_junit.h"

namespace mpverify::cli {

namespace {

struct GateArguments {
  std::string baseline, candidate, metric, method = "auto", junit, loss_key, mode = "tost", fid_reference;
  std::string sequential, spending = "obrien-fleming";
  double margin = 0, alpha = 0.05, loss_tail = 0.1, rtol = 0, target = NAN;
  bool json = false, higher = false, lower = false, accept_single_run = false;
};

// --sequential LOOKS [--spending NAME]: the design (metrics/sequential_design.h).
metrics::SequentialDesign sequential_design(const GateArguments& o) {
  metrics::SequentialDesign design;
  try {
    design.looks = metrics::parse_looks(o.sequential);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--sequential '") + o.sequential + "': " + e.what());
  }
  const auto spending = metrics::parse_spending(o.spending);
  if (!spending) throw UsageError("--spending must be obrien-fleming (obf) or pocock, not '" + o.spending + "'");
  design.spending = *spending;
  if (o.accept_single_run)
    throw UsageError("--accept-single-run tests one run per side; --sequential takes runs in rounds of seeds: drop one");
  if (o.mode != "tost") throw UsageError("--sequential gates one value per run: --mode tost only");
  return design;
}

metrics::GateOptions gate_options(const GateArguments& o) {
  metrics::GateOptions options;
  if (const auto metric = metrics::parse_gate_metric(o.metric)) {
    options.metric = *metric;
  } else if (!o.metric.empty()) {  // a value file's column, or a figure of the runs' evaluation
    options.metric = metrics::GateMetric::custom;
    options.metric_name = o.metric;
  } else {
    throw UsageError("--metric is empty: name accuracy, fid, kid, loss or a figure of the runs' evaluation");
  }
  options.margin = o.margin;
  options.alpha = o.alpha;
  options.loss_tail_fraction = o.loss_tail;
  options.loss_key = o.loss_key;
  options.accept_single_run = o.accept_single_run;
  if (o.higher) options.direction = metrics::Direction::higher_is_better;
  if (o.lower) options.direction = metrics::Direction::lower_is_better;
  if (o.method == "auto") options.pairing = metrics::Pairing::automatic;
  else if (o.method == "paired") options.pairing = metrics::Pairing::paired;
  else if (o.method == "welch") options.pairing = metrics::Pairing::welch;
  else throw UsageError("--method must be auto, paired or welch, not '" + o.method + "'");
  if (!o.sequential.empty()) options.sequential = sequential_design(o);
  return options;
}

// --mode curve / mlperf: the curves read and checked (curve_gate.h).
metrics::GateResult evaluate_curves(const GateArguments& o, const metrics::GateOptions& options,
                                    metrics::GateMode mode, bool files) {
  std::string key;
  const auto [b, c] = files ? metrics::read_curves(metrics::read_value_file(o.baseline),
                                                   metrics::read_value_file(o.candidate))
                            : metrics::read_curves(metrics::read_ensemble(o.baseline, true),
                                                   metrics::read_ensemble(o.candidate, true), options, key);
  metrics::CurveGateOptions curve;
  curve.rtol = o.rtol;
  curve.target = o.target;
  curve.alpha = o.alpha;
  curve.direction = options.direction != metrics::Direction::unspecified ? options.direction
                                                                         : metrics::natural_direction(options.metric);
  metrics::GateResult g = mode == metrics::GateMode::curve ? metrics::golden_values_gate(b, c, options, curve)
                                                           : metrics::mlperf_gate(b, c, options, curve);
  if (!key.empty()) g.unit = g.loss_key = key;
  return g;
}

// --fid-reference: each side a directory of per-run statistics, seed-<s>.npz.
metrics::GateResult evaluate_statistics(const GateArguments& o) {
  if (o.metric != "fid")
    throw UsageError("--fid-reference computes each run's FID from statistics files: give --metric fid, not '" +
                     o.metric + "'");
  if (o.mode != "tost") throw UsageError("--fid-reference gates one FID per run: --mode tost only");
  for (const std::string& side : {o.baseline, o.candidate})
    if (metrics::is_value_file(side))
      throw UsageError("--fid-reference: '" + side + "' is a value file; with --fid-reference each side is a "
                       "directory of per-run FID statistics, seed-<s>.npz (value files already hold FIDs: drop "
                       "--fid-reference)");
  std::error_code same_error;
  if (std::filesystem::equivalent(o.baseline, o.candidate, same_error))
    throw UsageError("--baseline and --candidate name the same directory (" + o.candidate +
                     "): a run compared with itself shows no spread and proves nothing; give the candidate recipe's "
                     "statistics");
  try {
    return metrics::evaluate_fid_statistics_gate(o.baseline, o.candidate, o.fid_reference, gate_options(o));
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
}

// Both sides read and decided; every failure before the verdict is the
// input's: exit 2, never main's 1, which would read as "not equivalent".
metrics::GateResult evaluate(const GateArguments& o) {
  if (!o.fid_reference.empty()) return evaluate_statistics(o);
  const bool file_b = metrics::is_value_file(o.baseline), file_c = metrics::is_value_file(o.candidate);
  if (file_b != file_c)
    throw UsageError("--baseline is " + std::string(file_b ? "a value file" : "a directory") + " but --candidate " +
                     (file_c ? "a value file" : "a directory") +
                     ": give both sides the same way (run directories carry the configs the gate compares)");
  const metrics::GateOptions options = gate_options(o);
  std::error_code same_error;
  if (std::filesystem::equivalent(o.baseline, o.candidate, same_error))
    throw UsageError("--baseline and --candidate name the same " + std::string(file_b ? "file" : "directory") + " (" +
                     o.candidate + "): a run compared with itself shows no spread and proves nothing; give the "
                     "candidate recipe's runs");
  const auto mode = metrics::parse_gate_mode(o.mode);
  if (!mode) throw UsageError("--mode must be tost, curve or mlperf, not '" + o.mode + "'");
  if (*mode != metrics::GateMode::tost && !file_b && options.metric != metrics::GateMetric::loss)
    throw UsageError("--mode " + o.mode + " on run directories reads their training-loss curves: give --metric loss "
                     "(other curves: curve files, seed,step,value)");
  try {
    if (*mode != metrics::GateMode::tost) return evaluate_curves(o, options, *mode, file_b);
    if (file_b)
      return metrics::evaluate_gate(metrics::read_value_file(o.baseline), metrics::read_value_file(o.candidate),
                                    options);
    const bool steps = options.metric == metrics::GateMetric::loss;
    return metrics::evaluate_gate(metrics::read_ensemble(o.baseline, steps), metrics::read_ensemble(o.candidate, steps),
                                  options);
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
}

int run_gate(const GateArguments& o) {
  const auto start = std::chrono::steady_clock::now();
  const metrics::GateResult result = evaluate(o);
  if (!o.junit.empty()) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    try {
      report::write_junit(o.junit, report::gate_junit_suite(result, seconds));
    } catch (const std::exception& e) {
      std::string m = "--junit: cannot write the report: ";
      m += e.what();
      throw UsageError(m);
    }
  }
  if (o.json) std::cout << metrics::gate_json(result).dump(2) << "\n";
  else std::cout << metrics::gate_verdict_line(result) << "\n";
  return metrics::gate_exit_code(result.verdict);
}

}  // namespace

void add_gate_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<GateArguments>();
  auto* app = root.add_subcommand(
      "gate",
      "The parity gate for CI: is the candidate (e.g. a mixed-precision recipe) equivalent to the baseline (FP32)\n"
      "within ±margin? Two one-sided tests at level alpha on the (1 - 2 alpha) interval of candidate - baseline:\n"
      "equivalent when it lies inside ±margin, not equivalent when entirely outside, else inconclusive.\n"
      "Paired on seeds when both sides ran the same seeds, else Welch. A diverged run never passes.\n"
      "Each side is a run or ensemble directory (`mpverify train [--seeds ...] --out DIR`: --metric accuracy,\n"
      "fid, kid or loss) or a value file from any framework (--metric any name: bleu, f1, top1, ...):\n"
      "  CSV  (.csv):  a header `seed,value`, then one run per line: `1,95.2`; optional columns `stderr` and\n"
      "                `replicates` (a value's own standard error and its replicate count, for --accept-single-run)\n"
      "  JSON (.json): [{\"seed\": 1, \"value\": 95.2}, ...] (same optional keys)\n"
      "  curve files (--mode curve|mlperf) add a `step` column / key: one value per seed and step\n"
      "  seeds are distinct integers (the same seeds on both sides pair the runs); a value nan, inf (CSV), NaN,\n"
      "  Infinity or null (JSON, as Python's json.dump writes them) is a run that diverged: exit 1.\n"
      "Fewer than 2 runs on a side is inconclusive (exit 3), unless --accept-single-run with one run per side.\n"
      "--mode curve (golden values, --rtol) and --mode mlperf (steps to --target) gate per-step curves instead.\n"
      "--fid-reference REAL.npz (--metric fid): each side is a directory of per-run FID statistics seed-<s>.npz\n"
      "  (mu, sigma: pytorch-fid --save-stats, clean-fid), each run's FID computed against REAL.npz's statistics.\n"
      "--sequential 4,8,12,16: in rounds. Runs are taken in seed order; at each planned look (runs per side) the\n"
      "  TOST runs at that look's share of alpha (Lan-DeMets spending, --spending): it decides, or exits 3 naming\n"
      "  the seeds the next look needs; the last look decides. Gate again with more runs: the false-pass rate\n"
      "  over all looks stays <= alpha.\n"
      "Exit code: 0 equivalent, 1 not equivalent or a run diverged, 2 bad input (no verdict), 3 inconclusive.\n"
      "Example: mpverify gate --baseline runs/fp32 --candidate runs/o2 --metric accuracy --margin 1 --junit gate.xml\n"
      "         mpverify gate --baseline fp32.csv --candidate bf16.csv --metric bleu --margin 0.3");
  app->add_option("--baseline", o->baseline,
                  "The reference side (FP32): a run or ensemble directory, or a value file (.csv, .json)")
      ->required()
      ->type_name("DIR|FILE");
  app->add_option("--candidate", o->candidate,
                  "The side tested (e.g. o2): the same kind of input as --baseline")
      ->required()
      ->type_name("DIR|FILE");
  app->add_option("--metric", o->metric,
                  "Directories: accuracy (summary evaluation.test_accuracy, in percentage points), fid "
                  "(evaluation.fid), kid (evaluation.kid), loss (mean training loss over the last --loss-tail of "
                  "the steps), or any other figure of the runs' evaluation by its name (test_loss, perplexity, ...: "
                  "evaluation.NAME in its own unit; its direction is known for common names, else say it with "
                  "--higher-is-better or --lower-is-better). Value files: any name (the values' unit)")
      ->required()
      ->type_name("NAME");
  auto* higher = app->add_flag("--higher-is-better", o->higher,
                               "The metric improves upward (accuracy, BLEU, F1): the verdict names the worse side");
  auto* lower = app->add_flag("--lower-is-better", o->lower, "The metric improves downward (loss, FID, perplexity)");
  higher->excludes(lower);
  app->add_flag("--accept-single-run", o->accept_single_run,
                "With one run per side, test on each value's own standard error (FID's bootstrap error, or a value "
                "file's stderr and replicates; t with min(replicates) - 1 degrees of freedom) instead of calling it "
                "inconclusive. Seed-to-seed variance is then not covered");
  app->add_option("--margin", o->margin,
                  "Equivalence margin in the metric's unit (--mode tost, required there): accuracy points "
                  "(recommended 1 with 10+ seeds per side; see docs/parity-gate.md), FID units, loss units")
      ->type_name("X");
  app->add_option("--mode", o->mode,
                  "tost (default): the equivalence test on one value per run. curve: golden values, the candidate's "
                  "curve within --rtol of the baseline's at every step (Megatron-LM's functional tests). mlperf: "
                  "steps to reach --target, fastest and slowest run per side dropped, one-sided pooled t-test at "
                  "--alpha that the candidate is slower (MLPerf's convergence check). Curves: run directories' "
                  "training loss (--metric loss), or curve files with a step column (seed,step,value)")
      ->type_name("tost|curve|mlperf");
  app->add_option("--rtol", o->rtol, "--mode curve: the relative tolerance per step, |c - g| <= R |g| (e.g. 0.01)")
      ->type_name("R");
  app->add_option("--target", o->target,
                  "--mode mlperf: the value a run must reach (<= T for lower-is-better, >= T for higher-is-better)")
      ->type_name("T");
  app->add_option("--alpha", o->alpha, "Level of each one-sided test; the interval has level 1 - 2 alpha (default 0.05)")
      ->type_name("A");
  app->add_option("--method", o->method,
                  "auto (paired when both sides ran the same seeds, else Welch), paired, or welch (default auto)")
      ->type_name("auto|paired|welch");
  app->add_option("--junit", o->junit, "Also write a JUnit XML report to FILE (atomically; not on bad input)")
      ->type_name("FILE");
  app->add_flag("--json", o->json, "Print the whole result as JSON instead of the verdict line");
  app->add_option("--fid-reference", o->fid_reference,
                  "--metric fid from statistics: the reference FID statistics (.npz with mu [d], sigma [d, d], e.g. "
                  "the real images'); each side is then a directory of per-run statistics seed-<s>.npz, and each "
                  "run's FID is computed against this file (statistics do not record N: make them at equal N)")
      ->type_name("REAL.npz");
  app->add_option("--sequential", o->sequential,
                  "Gate in rounds: the planned looks, runs per side (pairs when paired) in seed order, e.g. 4,8,12,16. "
                  "Each look tests at its spent share of --alpha; undecided before the last look: exit 3 with the "
                  "next look's count; the last look decides (not shown equivalent: exit 1). docs/parity-gate.md")
      ->type_name("N1,N2,...");
  app->add_option("--spending", o->spending,
                  "--sequential: how alpha is spent over the looks (Lan-DeMets): obrien-fleming (default: little "
                  "early, most at the last look) or pocock (about evenly)")
      ->type_name("obrien-fleming|pocock");
  app->add_option("--loss-key", o->loss_key, "loss: the steps' key compared (default loss, or loss_g)")
      ->type_name("KEY");
  app->add_option("--loss-tail", o->loss_tail,
                  "loss: the fraction of the last steps whose mean loss is compared, in (0, 1] (default 0.1)")
      ->type_name("F");

  commands.push_back({app, [o] { return run_gate(*o); }});
}

}  // namespace mpverify::cli
