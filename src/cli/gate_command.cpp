// mpverify gate --baseline DIR --candidate DIR --metric accuracy|fid|loss
//               --margin X [--alpha A] [--method auto|paired|welch]
//               [--junit FILE] [--json] [--loss-key KEY] [--loss-tail F]
// The CI parity gate: is the candidate recipe's training equivalent to the
// baseline's within ±margin? The decision is metrics::evaluate_gate
// (metrics/parity_gate.h defines it), the JUnit report
// report::gate_junit_suite; this file reads the directories and prints.
// Exit codes: 0 equivalent, 1 not equivalent, 2 bad input (no verdict, no
// report written, nothing on stdout), 3 inconclusive.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "metrics/ensemble.h"
#include "metrics/parity_gate.h"
#include "report/gate_junit.h"

namespace mpverify::cli {

void add_gate_command(CLI::App& root, std::vector<Command>& commands) {
  struct Options {
    std::string baseline, candidate, metric, method = "auto", junit, loss_key;
    double margin = 0, alpha = 0.05, loss_tail = 0.1;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  auto* app = root.add_subcommand(
      "gate",
      "The parity gate for CI: is the candidate (e.g. a mixed-precision recipe) equivalent to the baseline (FP32)\n"
      "within ±margin? Each DIR is a run directory or an ensemble directory (`mpverify train --seeds ...`).\n"
      "Two one-sided tests at level alpha on the (1 - 2 alpha) interval of candidate - baseline:\n"
      "equivalent when it lies inside ±margin, not equivalent when entirely outside, else inconclusive.\n"
      "Paired on seeds when both sides ran the same seeds, else Welch. A diverged run never passes.\n"
      "Exit code: 0 equivalent, 1 not equivalent, 2 bad input (no verdict), 3 inconclusive (more seeds needed).\n"
      "Example: mpverify gate --baseline runs/fp32 --candidate runs/o2 --metric accuracy --margin 1 --junit gate.xml");
  app->add_option("--baseline", o->baseline, "The reference side (FP32): a run or ensemble directory")
      ->required()
      ->type_name("DIR");
  app->add_option("--candidate", o->candidate, "The side tested (e.g. o2): a run or ensemble directory")
      ->required()
      ->type_name("DIR");
  app->add_option("--metric", o->metric,
                  "accuracy (summary evaluation.test_accuracy, in percentage points), fid (evaluation.fid), or loss "
                  "(mean training loss over the last --loss-tail of the steps)")
      ->required()
      ->type_name("accuracy|fid|loss");
  app->add_option("--margin", o->margin,
                  "Equivalence margin in the metric's unit: accuracy points (recommended 1 with 10+ seeds per side; "
                  "see docs/parity-gate.md), FID units, loss units")
      ->required()
      ->type_name("X");
  app->add_option("--alpha", o->alpha, "Level of each one-sided test; the interval has level 1 - 2 alpha (default 0.05)")
      ->type_name("A");
  app->add_option("--method", o->method,
                  "auto (paired when both sides ran the same seeds, else Welch), paired, or welch (default auto)")
      ->type_name("auto|paired|welch");
  app->add_option("--junit", o->junit, "Also write a JUnit XML report to FILE (atomically; not on bad input)")
      ->type_name("FILE");
  app->add_flag("--json", o->json, "Print the whole result as JSON instead of the verdict line");
  app->add_option("--loss-key", o->loss_key, "loss: the steps' key compared (default loss, or loss_g)")
      ->type_name("KEY");
  app->add_option("--loss-tail", o->loss_tail,
                  "loss: the fraction of the last steps whose mean loss is compared, in (0, 1] (default 0.1)")
      ->type_name("F");

  commands.push_back({app, [o] {
                        const auto start = std::chrono::steady_clock::now();
                        metrics::GateOptions options;
                        const auto metric = metrics::parse_gate_metric(o->metric);
                        if (!metric) throw UsageError("--metric must be accuracy, fid or loss, not '" + o->metric + "'");
                        options.metric = *metric;
                        options.margin = o->margin;
                        options.alpha = o->alpha;
                        options.loss_tail_fraction = o->loss_tail;
                        options.loss_key = o->loss_key;
                        if (o->method == "auto") options.pairing = metrics::Pairing::automatic;
                        else if (o->method == "paired") options.pairing = metrics::Pairing::paired;
                        else if (o->method == "welch") options.pairing = metrics::Pairing::welch;
                        else throw UsageError("--method must be auto, paired or welch, not '" + o->method + "'");
                        // Every failure before the verdict is the input's: exit 2, never main's 1,
                        // which would read as "not equivalent".
                        {
                          std::error_code same_error;
                          if (std::filesystem::equivalent(o->baseline, o->candidate, same_error))
                            throw UsageError("--baseline and --candidate name the same directory (" + o->candidate +
                                             "): a run compared with itself shows no spread and proves nothing; "
                                             "give the candidate recipe's runs");
                        }
                        metrics::GateResult result;
                        try {
                          const bool steps = options.metric == metrics::GateMetric::loss;
                          const metrics::Ensemble baseline = metrics::read_ensemble(o->baseline, steps);
                          const metrics::Ensemble candidate = metrics::read_ensemble(o->candidate, steps);
                          result = metrics::evaluate_gate(baseline, candidate, options);
                        } catch (const std::exception& e) {
                          throw UsageError(e.what());
                        }
                        if (!o->junit.empty()) {
                          const double seconds =
                              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                          try {
                            report::write_junit(o->junit, report::gate_junit_suite(result, seconds));
                          } catch (const std::exception& e) {
                            std::string m = "--junit: cannot write the report: ";
                            m += e.what();
                            throw UsageError(m);
                          }
                        }
                        if (o->json)
                          std::cout << metrics::gate_json(result).dump(2) << "\n";
                        else
                          std::cout << metrics::gate_verdict_line(result) << "\n";
                        return metrics::gate_exit_code(result.verdict);
                      }});
}

}  // namespace mpverify::cli
