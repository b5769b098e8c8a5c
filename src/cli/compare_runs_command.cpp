// mpverify compare-runs A B [--json] [--out FILE] [--tolerance-loss X]
//                      [--loss-key KEY] [--all-steps]
// Two run directories written by `mpverify train` (e.g. an fp32 reference run
// and an o2 emulated run of the same model, seed and data), compared step by
// step: the loss difference B - A, scales, skipped steps, underflow and
// lost-update rates; per recorded tensor the underflow, overflow, headroom
// and norm ratio; and which config keys differ. The comparison itself is
// compare::compare_runs (compare/run_comparison.h, which defines every field);
// this file reads the files and prints.
//
// Output: a summary and a table of at most ~20 evenly spaced steps plus the
// step of the largest difference (--all-steps: every step), or with --json
// the whole comparison as one JSON document. --out FILE also writes that JSON
// document to FILE, atomically (never a partial file; none on error).
// Exit codes: 0; 1 when --tolerance-loss is given and some step exceeds it (a
// gate for CI); 2 for unusable input (missing directory or steps.jsonl, a
// malformed line, no common step), with nothing written to --out.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/commands.h"
#include "compare/run_comparison.h"
#include "io/json_text.h"
#include "record/run_log.h"

namespace mpverify::cli {

namespace {

namespace fs = std::filesystem;
using compare::RunComparison;

// The run's name in messages: the directory as given, less trailing slashes.
std::string run_name(std::string dir) {
  while (dir.size() > 1 && dir.ends_with('/')) dir.pop_back();
  return dir;
}

compare::RunRecords read_run(const std::string& dir, const char* which) {
  compare::RunRecords run;
  run.name = run_name(dir);
  const fs::path root(run.name);
  std::error_code ec;
  if (!fs::exists(root, ec)) {
    std::string m = "run ";
    m += which;
    m += ": directory '" + run.name + "' does not exist (give the directory `mpverify train` wrote)";
    throw UsageError(m);
  }
  if (!fs::is_directory(root, ec)) {
    std::string m = "run ";
    m += which;
    m += ": '" + run.name + "' is not a directory (give the run directory, not a file in it)";
    throw UsageError(m);
  }
  if (!fs::exists(root / "steps.jsonl", ec)) {
    std::string m = "run ";
    m += which;
    m += ": '" + (root / "steps.jsonl").string() +
         "' not found: not a run directory, or a run killed before its first step was published";
    throw UsageError(m);
  }
  // read_json_lines names the file and the line of what does not parse.
  run.steps = record::read_json_lines(root / "steps.jsonl");
  if (fs::exists(root / "tensors.jsonl", ec)) run.tensors = record::read_json_lines(root / "tensors.jsonl");
  if (fs::exists(root / "summary.json", ec)) {
    try {
      run.summary = io::read_json_file(root / "summary.json");
    } catch (const std::runtime_error& e) {
      throw UsageError(std::string(e.what()) + " (a run still writing it? rerun)");
    }
  }
  return run;
}

std::string number_text(const std::optional<double>& v, const char* absent = "-") {
  if (!v) return absent;
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", *v);
  return text;
}

std::string step_text(const std::optional<std::int64_t>& step) { return step ? std::to_string(*step) : "-"; }

// The steps the table shows: every one, or about 20 evenly spaced (the first
// and the last among them) plus the step of the largest difference and the
// first step over the tolerance.
std::vector<std::size_t> shown_steps(const RunComparison& c, bool all) {
  const std::size_t n = c.steps.size();
  constexpr std::size_t spaced = 21;
  std::set<std::size_t> shown;
  if (all || n <= spaced) {
    for (std::size_t i = 0; i < n; ++i) shown.insert(i);
  } else {
    for (std::size_t k = 0; k < spaced; ++k) shown.insert(k * (n - 1) / (spaced - 1));
    for (std::size_t i = 0; i < n; ++i)
      if (c.steps[i].step == c.summary.max_abs_loss_difference_step ||
          c.steps[i].step == c.summary.first_step_exceeding_tolerance)
        shown.insert(i);
  }
  return {shown.begin(), shown.end()};
}

std::string summary_text(const RunComparison& c) {
  const auto& s = c.summary;
  std::string out = "A: " + c.name_a + "\nB: " + c.name_b + "\n";
  if (!c.summary_present_a || !c.summary_present_b) {
    out += "config: summary.json not present in";
    out += !c.summary_present_a ? (!c.summary_present_b ? " A and B" : " A") : " B";
    out += "\n";
  } else if (c.config_differences.empty()) {
    out += "config: identical\n";
  } else {
    out += "config differences:";
    for (const auto& d : c.config_differences) out += " " + d.key + " " + d.a.dump() + " -> " + d.b.dump() + ";";
    out.back() = '\n';
  }
  char line[512];
  auto only_in = [](std::size_t n, const std::optional<std::int64_t>& first) {
    std::string t = std::to_string(n);
    if (first) t += " (first step " + std::to_string(*first) + ")";
    return t;
  };
  std::snprintf(line, sizeof line, "steps: %zu in common, %s only in A, %s only in B\n", s.common_steps,
                only_in(s.steps_only_in_a, s.first_step_only_in_a).c_str(),
                only_in(s.steps_only_in_b, s.first_step_only_in_b).c_str());
  out += line;
  std::snprintf(
      line, sizeof line,
      "loss (key \"%s\"): max |B - A| %s at step %s; mean |B - A| over the last %zu common steps (from step %s) "
      "%s\n",
      s.loss_key.c_str(), number_text(s.max_abs_loss_difference).c_str(),
      step_text(s.max_abs_loss_difference_step).c_str(), s.tail_steps, step_text(s.tail_first_step).c_str(),
      number_text(s.mean_abs_loss_difference_tail).c_str());
  out += line;
  std::snprintf(
      line, sizeof line, "non-finite loss (common steps): A %zu, B %zu\nskipped steps: A %zu of %zu, B %zu of %zu\n",
      s.nonfinite_loss_steps_a, s.nonfinite_loss_steps_b, s.skipped_steps_a, s.steps_a, s.skipped_steps_b, s.steps_b);
  out += line;
  if (s.loss_tolerance) {
    if (s.tolerance_exceeded())
      std::snprintf(line, sizeof line, "tolerance %s on |B - A|: EXCEEDED at %zu steps, first at step %s\n",
                    number_text(s.loss_tolerance).c_str(), s.steps_exceeding_tolerance,
                    step_text(s.first_step_exceeding_tolerance).c_str());
    else
      std::snprintf(line, sizeof line, "tolerance %s on |B - A|: not exceeded\n",
                    number_text(s.loss_tolerance).c_str());
    out += line;
  }
  return out;
}

std::string steps_text(const RunComparison& c, bool all) {
  const std::vector<std::size_t> shown = shown_steps(c, all);
  char line[512];
  std::string out = "\n";
  std::snprintf(line, sizeof line, "%8s %11s %11s %11s %11s %11s %11s %4s %11s %11s %11s %11s\n", "step", "loss A",
                "loss B", "B - A", "rel diff", "scale A", "scale B", "skip", "uflow A", "uflow B", "lostupd A",
                "lostupd B");
  out += line;
  for (const std::size_t i : shown) {
    const auto& d = c.steps[i];
    const std::string skip = d.skipped_a ? (d.skipped_b ? "AB" : "A") : (d.skipped_b ? "B" : "-");
    std::string mark;
    if (d.step == c.summary.max_abs_loss_difference_step) mark += " max";
    if (d.exceeds_tolerance) mark += " over";
    std::snprintf(line, sizeof line, "%8lld %11s %11s %11s %11s %11s %11s %4s %11s %11s %11s %11s%s\n",
                  static_cast<long long>(d.step), number_text(d.loss_a, "nonfinite").c_str(),
                  number_text(d.loss_b, "nonfinite").c_str(), number_text(d.loss_difference).c_str(),
                  number_text(d.relative_difference).c_str(), number_text(d.scale_a).c_str(),
                  number_text(d.scale_b).c_str(), skip.c_str(), number_text(d.underflow_rate_a).c_str(),
                  number_text(d.underflow_rate_b).c_str(), number_text(d.lost_update_rate_a).c_str(),
                  number_text(d.lost_update_rate_b).c_str(), mark.c_str());
    out += line;
  }
  if (shown.size() < c.steps.size()) {
    std::snprintf(line, sizeof line,
                  "(%zu of %zu common steps: evenly spaced, and the step of max |B - A|; --all-steps prints all)\n",
                  shown.size(), c.steps.size());
    out += line;
  }
  return out;
}

std::string tensors_text(const RunComparison& c) {
  if (!c.tensors_present_a || !c.tensors_present_b) {
    std::string out = "\ntensors: tensors.jsonl not present in";
    out += !c.tensors_present_a ? (!c.tensors_present_b ? " A and B" : " A") : " B";
    return out + "\n";
  }
  std::size_t layer_width = 5, tensor_width = 6;
  for (const auto& t : c.tensors) {
    layer_width = std::max(layer_width, t.layer.size());
    tensor_width = std::max(tensor_width, t.tensor.size());
  }
  const int lw = static_cast<int>(layer_width), tw = static_cast<int>(tensor_width);
  char line[1024];
  std::string out =
      "\ntensors (over the steps both runs recorded; uflow: mean underflow-to-zero rate, oflow: max\n"
      "overflow rate, headroom: min log2(max_finite / max |scaled x|), '-' = +inf; norm B/A at the last)\n";
  std::snprintf(line, sizeof line, "%-*s %-*s %-9s %5s %10s %10s %10s %10s %10s %10s %10s\n", lw, "layer", tw, "tensor",
                "pass", "steps", "uflow A", "uflow B", "oflow A", "oflow B", "headroom A", "headroom B", "norm B/A");
  out += line;
  for (const auto& t : c.tensors) {
    std::snprintf(line, sizeof line, "%-*s %-*s %-9s %5zu %10s %10s %10s %10s %10s %10s %10s\n", lw, t.layer.c_str(),
                  tw, t.tensor.c_str(), t.pass.c_str(), t.common_steps,
                  number_text(t.mean_underflow_to_zero_rate_a).c_str(),
                  number_text(t.mean_underflow_to_zero_rate_b).c_str(), number_text(t.max_overflow_rate_a).c_str(),
                  number_text(t.max_overflow_rate_b).c_str(), number_text(t.min_headroom_log2_a).c_str(),
                  number_text(t.min_headroom_log2_b).c_str(), number_text(t.norm_ratio).c_str());
    out += line;
  }
  if (c.summary.tensors_only_in_a || c.summary.tensors_only_in_b) {
    std::snprintf(line, sizeof line, "(%zu tensors recorded only in A, %zu only in B, at no common step)\n",
                  c.summary.tensors_only_in_a, c.summary.tensors_only_in_b);
    out += line;
  }
  return out;
}

}  // namespace

void add_compare_runs_command(CLI::App& root, std::vector<Command>& commands) {
  struct Options {
    std::string a, b, out, loss_key;
    std::optional<double> tolerance;
    bool json = false, all_steps = false;
  };
  auto o = std::make_shared<Options>();
  auto* app = root.add_subcommand(
      "compare-runs",
      "Compare two run directories written by `mpverify train` step by step (steps matched by their \"step\"):\n"
      "per step the losses, B - A and (B - A)/|A|, scales, skipped steps, underflow and lost-update rates;\n"
      "per recorded tensor (tensors.jsonl, optional) the mean underflow-to-zero rate, max overflow rate, min\n"
      "headroom and the norm ratio B/A at the last common step; and the summary.json config keys that differ.\n"
      "Exit code 0; 1 when --tolerance-loss is exceeded; 2 for unusable input (nothing written to --out).\n"
      "Example: mpverify compare-runs runs/fp32 runs/o2 --tolerance-loss 0.05 --out cmp.json");
  app->add_option("A", o->a, "The reference run's directory (differences are B - A)")->required()->type_name("DIR");
  app->add_option("B", o->b, "The run compared with it")->required()->type_name("DIR");
  app->add_flag("--json", o->json, "Print the whole comparison as one JSON document instead of the tables");
  app->add_option("--out", o->out, "Also write the JSON document to FILE (atomically; not on error)")
      ->type_name("FILE");
  app->add_option("--tolerance-loss", o->tolerance,
                  "Gate: exit 1 when some common step has |loss B - loss A| > X, or a non-finite loss in one "
                  "run only")
      ->type_name("X");
  app->add_option("--loss-key", o->loss_key,
                  "The steps' key compared (default: loss, or loss_g when the runs have no loss; e.g. loss_d)")
      ->type_name("KEY");
  app->add_flag("--all-steps", o->all_steps, "Print every common step (default: about 20 of them)");

  commands.push_back({app, [o] {
                        if (o->tolerance && !(std::isfinite(*o->tolerance) && *o->tolerance >= 0))
                          throw UsageError("--tolerance-loss must be a finite number >= 0");
                        // Everything is read and compared before anything is written, so bad
                        // input leaves standard output empty and --out not created. Every error
                        // here is the input's, hence UsageError (exit 2, not main's 1, which
                        // would read as the gate's "exceeded").
                        RunComparison c;
                        nlohmann::ordered_json document;
                        try {
                          const compare::RunRecords a = read_run(o->a, "A");
                          const compare::RunRecords b = read_run(o->b, "B");
                          c = compare::compare_runs(a, b, {o->loss_key, o->tolerance});
                          document = compare::run_comparison_json(c);
                        } catch (const UsageError&) {
                          throw;
                        } catch (const std::exception& e) {
                          throw UsageError(e.what());
                        }
                        if (!o->out.empty()) {
                          try {
                            record::write_file_atomically(o->out, document.dump(2) + "\n");
                          } catch (const std::exception& e) {
                            std::string m = "--out: cannot write the JSON document: ";
                            m += e.what();
                            throw UsageError(m);
                          }
                        }
                        if (o->json)
                          std::cout << document.dump(2) << "\n";
                        else
                          std::cout << summary_text(c) << steps_text(c, o->all_steps) << tensors_text(c);
                        return c.summary.tolerance_exceeded() ? 1 : 0;
                      }});
}

}  // namespace mpverify::cli
