// mpverify summarize RUN [--what-if 2^10,2^20] [--top N] [--json] [--report FILE.md]
// One run directory (`mpverify train`'s, or the Monitor's from mpverify.torch)
// summarised: the run's steps, loss scale, lost updates and first non-finite
// values, then per layer and tensor the underflow, subnormal and overflow
// rates pooled over the recorded steps at the run's own scale, and the
// loss-scaled tensors at what-if scales (analysis/run_summary.h defines every
// figure; this file reads the files and prints, in at most 100 columns).
// --report FILE.md also writes the summary as a Markdown report with a
// layers x steps heat map and the gradients' histograms on a log axis, and
// FILE.html, the same on one page (report/run_summary_report.h).
// Exit codes: 0; 2 for unusable input (no such directory, no steps.jsonl or
// tensors.jsonl, a malformed line, a bad --what-if).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <numeric>

#include "analysis/run_summary.h"
#include "cli/commands.h"
#include "cli/tensor_report_output.h"
#include "record/run_log.h"
#include "report/run_summary_report.h"

namespace mpverify::cli {

// Named, not anonymous: the program compiles in unity batches beside compare-runs' own readers.
namespace summarize_impl {

namespace fs = std::filesystem;

struct SummarizeOptions {
  std::string run, what_if, report;
  std::size_t top = 0;  // 0: every tensor kind
  bool json = false;
};

analysis::RunSummaryInput read_summarized_run(std::string dir) {
  while (dir.size() > 1 && dir.ends_with('/')) dir.pop_back();
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw UsageError("'" + dir + "' is not a directory: give the run directory `mpverify train --out` or the "
                     "Monitor wrote");
  if (!fs::exists(root / "steps.jsonl", ec))
    throw UsageError("'" + (root / "steps.jsonl").string() +
                     "' not found: not a run directory, or a run killed before its first step was published");
  if (!fs::exists(root / "tensors.jsonl", ec))
    throw UsageError("'" + (root / "tensors.jsonl").string() +
                     "' not found: the run recorded no tensors (trained with --no-recorders?)");
  analysis::RunSummaryInput in;
  in.name = dir;
  with_usage_errors([&] {
    in.steps = record::read_json_lines(root / "steps.jsonl");
    in.tensors = record::read_json_lines(root / "tensors.jsonl");
    if (fs::exists(root / "histograms.jsonl", ec)) in.histograms = record::read_json_lines(root / "histograms.jsonl");
  });
  if (in.tensors.empty())
    throw UsageError("'" + (root / "tensors.jsonl").string() +
                     "' holds no tensor: the run recorded none (trained with --no-recorders?), so there is nothing "
                     "per layer to summarise");
  return in;
}

// --what-if: powers of two only (the histograms shift by whole binades).
std::vector<int> what_if_exponents(const std::string& text) {
  std::vector<int> exponents;
  if (text.empty()) return exponents;
  for (double v : parse_scales(text, "--what-if")) {
    int e = 0;
    if (std::frexp(v, &e) != 0.5)
      throw UsageError("--what-if: " + std::to_string(v) + " is not a power of two (give scales like 2^10,2^20)");
    exponents.push_back(e - 1);
  }
  return exponents;
}

std::string rate_text(double rate) {
  if (rate == 0) return "0";
  char t[32];
  std::snprintf(t, sizeof t, "%.3g%%", 100 * rate);
  return t;
}

std::string rate_of(std::uint64_t k, std::uint64_t n) {
  return n ? rate_text(static_cast<double>(k) / static_cast<double>(n)) : std::string("-");
}

std::string scale_name(double v) {
  int e = 0;
  if (std::frexp(v, &e) == 0.5) return "2^" + std::to_string(e - 1);
  char t[32];
  std::snprintf(t, sizeof t, "%g", v);
  return t;
}

// Left- (or right-) aligned in `width` columns, cut with '~' when longer.
std::string cell(std::string text, std::size_t width, bool right = false) {
  if (text.size() > width) text = text.substr(0, width - 1) + "~";
  const std::string pad(width - text.size(), ' ');
  return right ? pad + text : text + pad;
}

void write_run_lines(std::ostream& os, const analysis::RunSummary& s) {
  os << "run: " << s.name << "\n"
     << "steps: " << s.steps << " (" << s.recorded_steps << " recorded), " << s.skipped_steps << " skipped";
  if (s.first_scale)
    os << "; loss scale " << scale_name(*s.first_scale) << " first, " << scale_name(*s.last_scale) << " last ("
       << scale_name(*s.min_scale) << " to " << scale_name(*s.max_scale) << ")";
  os << "\n";
  if (s.lost_update_rate_mean) {
    os << "lost updates: " << rate_text(*s.lost_update_rate_mean) << " of the updates on average (largest "
       << rate_text(*s.lost_update_rate_max) << ")\n";
    if (s.lost_update_rate_without_master_mean)
      os << "  " << rate_text(*s.lost_update_rate_without_master_mean)
         << " on average if the weights were stored in their own format\n";
  }
  if (s.nonfinite_steps == 0) os << "non-finite values: none\n";
  for (std::size_t i = 0; i < s.first_nonfinite.size(); ++i) {
    const analysis::NonfiniteEvent& e = s.first_nonfinite[i];
    os << (i == 0 ? "non-finite values at " + std::to_string(s.nonfinite_steps) + " step(s), first at " : "  then at ")
       << "step " << e.step << ": " << e.layer << " " << e.tensor << " (" << e.pass
       << (e.count ? ", " + std::to_string(*e.count) + " values" : std::string())
       << (e.after ? ", " + analysis::made_after_text(e) : std::string()) << ")\n";
  }
}

// The kinds to show: all in recorded order, or the `top` with the highest underflow rate.
std::vector<const analysis::TensorKindSummary*> shown_kinds(const analysis::RunSummary& s, std::size_t top) {
  std::vector<const analysis::TensorKindSummary*> kinds;
  for (const auto& k : s.kinds) kinds.push_back(&k);
  if (top == 0 || top >= kinds.size()) return kinds;
  const auto rate = [](const analysis::TensorKindSummary* k) {
    return k->nonzero ? static_cast<double>(k->underflow) / static_cast<double>(k->nonzero) : 0.0;
  };
  std::stable_sort(kinds.begin(), kinds.end(), [&](auto* a, auto* b) { return rate(a) > rate(b); });
  kinds.resize(top);
  return kinds;
}

void write_kind_table(std::ostream& os, const analysis::RunSummary& s, std::size_t top) {
  os << "\nper layer and tensor, pooled over the recorded steps (fractions of the non-zero values;\n"
        "gradients at the step's loss scale, the others at 1)"
     << (top ? ", the " + std::to_string(top) + " highest underflow" : std::string()) << ":\n";
  os << cell("layer", 16) << " " << cell("tensor", 8) << " " << cell("role", 15) << " " << cell("format", 8) << " "
     << cell("steps", 6, true) << " " << cell("underflow", 10, true) << " " << cell("subnormal", 10, true) << " "
     << cell("overflow", 10, true) << " " << cell("headroom", 8, true) << "\n";
  for (const analysis::TensorKindSummary* k : shown_kinds(s, top)) {
    char headroom[32] = "-";
    if (k->min_headroom_log2) std::snprintf(headroom, sizeof headroom, "%.2f", *k->min_headroom_log2);
    os << cell(k->layer, 16) << " " << cell(k->tensor, 8) << " " << cell(k->role, 15) << " " << cell(k->format, 8)
       << " " << cell(std::to_string(k->recorded_steps), 6, true) << " " << cell(rate_of(k->underflow, k->nonzero), 10, true)
       << " " << cell(rate_of(k->subnormal, k->nonzero), 10, true) << " "
       << cell(rate_of(k->overflow, k->nonzero), 10, true) << " " << cell(headroom, 8, true) << "\n";
  }
}

std::string bounds_text(std::uint64_t certain, std::uint64_t possible, std::uint64_t of) {
  if (certain == possible) return rate_of(certain, of);
  return "[" + rate_of(certain, of) + ", " + rate_of(possible, of) + "]";
}

void write_what_if(std::ostream& os, const analysis::RunSummary& s) {
  if (s.what_if_log2.empty()) return;
  os << "\nwhat-if: the gradients at other loss scales, [certain, possible] fractions of their non-zero\n"
        "values (from histograms.jsonl's binades: one binade at each end is known only to lie near its\n"
        "threshold):\n";
  if (!s.what_if_note.empty()) {
    os << "  not computed: " << s.what_if_note << "\n";
    return;
  }
  os << cell("layer", 16) << " " << cell("tensor", 8) << " " << cell("scale", 7) << " " << cell("underflow", 24)
     << " overflow\n";
  for (const analysis::TensorKindSummary& k : s.kinds)
    for (const analysis::WhatIfBounds& b : k.what_if)
      os << cell(k.layer, 16) << " " << cell(k.tensor, 8) << " " << cell("2^" + std::to_string(b.scale_log2), 7) << " "
         << cell(bounds_text(b.underflow_certain, b.underflow_possible, b.of), 24) << " "
         << bounds_text(b.overflow_certain, b.overflow_possible, b.of) << "\n";
}

int run_summarize(const SummarizeOptions& o) {
  const std::vector<int> what_if = what_if_exponents(o.what_if);
  const fs::path report(o.report);
  if (!o.report.empty() && (report.extension() != ".md" || report.stem().empty()))
    throw UsageError("--report '" + o.report + "': the report is a Markdown file (NAME.md); NAME.html and the "
                     "figures are written next to it");
  const analysis::RunSummaryInput in = read_summarized_run(o.run);
  analysis::RunSummary s;
  with_usage_errors([&] { s = analysis::summarize_run(in, {what_if, 5}); });
  std::vector<fs::path> files;
  if (!o.report.empty()) files = report::write_run_summary_report(s, report);
  if (o.json) {
    nlohmann::ordered_json j = analysis::run_summary_json(s);
    j["files"] = files;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  write_run_lines(std::cout, s);
  write_kind_table(std::cout, s, o.top);
  write_what_if(std::cout, s);
  for (const fs::path& f : files) std::cout << "wrote " << f.string() << "\n";
  return 0;
}

}  // namespace summarize_impl

void add_summarize_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<summarize_impl::SummarizeOptions>();
  auto* app = root.add_subcommand(
      "summarize",
      "One run directory (mpverify train's, or the Monitor's from mpverify.torch) in one screen: steps, loss\n"
      "scale, lost updates, the first non-finite values with their modules, and per layer and tensor the\n"
      "underflow, subnormal and overflow rates pooled over the recorded steps at the run's own scale; with\n"
      "--what-if, the loss-scaled gradients at other scales as [certain, possible] bounds from the histograms.\n"
      "Exit code: 0, or 2 for an unusable run directory or option (nothing on stdout).\n"
      "--report FILE.md adds a Markdown report with a layers x steps heat map and log-axis histograms, and FILE.html.\n"
      "Example: mpverify summarize runs/o2 --what-if 2^10,2^20 --top 10 --report reports/o2-summary.md");
  app->add_option("run", o->run, "The run directory (steps.jsonl, tensors.jsonl, histograms.jsonl)")
      ->required()
      ->type_name("RUN");
  app->add_option("--what-if", o->what_if, "Other loss scales, powers of two: 2^10,2^20 or 1024,1048576")
      ->type_name("S1,S2,...");
  app->add_option("--top", o->top, "Only the N tensor kinds with the highest underflow rate (default: all)")
      ->type_name("N");
  app->add_flag("--json", o->json, "Print the whole summary as JSON (rates as fractions, counts, bounds)");
  app->add_option("--report", o->report,
                  "Also write FILE.md with a layers x steps heat map of the underflow and the gradients' "
                  "histograms on a log axis (FILE-underflow.svg, FILE-histograms.svg), and FILE.html, one page")
      ->type_name("FILE.md");
  commands.push_back({app, [o] { return summarize_impl::run_summarize(*o); }});
}

}  // namespace mpverify::cli
