#include "report/run_summary_report.h"

#include <algorithm>
#include <map>
#include <string>

#include "formats/format.h"
#include "report/html_page.h"
#include "report/output_files.h"
#include "report/svg_histogram.h"
#include "report/text_format.h"

namespace mpverify::report {

// Named, not anonymous: the module compiles in unity batches beside the other reports' helpers.
namespace run_summary_report_impl {

namespace fs = std::filesystem;
using analysis::RunSummary;
using analysis::TensorKindSummary;

std::string percent_of(std::uint64_t k, std::uint64_t n) {
  if (n == 0) return "-";
  if (k == 0) return "0";
  return general(100.0 * static_cast<double>(k) / static_cast<double>(n)) + "%";
}

std::string scale_of(double v) { return power_of_two_text(v); }

std::string kind_label(const TensorKindSummary& k) { return k.layer + " " + k.tensor; }

std::string run_bullets(const RunSummary& s) {
  std::string md = "- " + std::to_string(s.steps) + " steps (" + std::to_string(s.recorded_steps) + " recorded), " +
                   std::to_string(s.skipped_steps) + " skipped";
  if (s.first_scale)
    md += "; loss scale " + scale_of(*s.first_scale) + " at the first step, " + scale_of(*s.last_scale) +
          " at the last (" + scale_of(*s.min_scale) + " to " + scale_of(*s.max_scale) + ")";
  md += ".\n";
  if (s.lost_update_rate_mean) {
    md += "- Lost updates (w + u == w, u ≠ 0): " + general(100 * *s.lost_update_rate_mean) +
          "% of the updates on average, " + general(100 * *s.lost_update_rate_max) + "% at most";
    if (s.lost_update_rate_without_master_mean)
      md += "; " + general(100 * *s.lost_update_rate_without_master_mean) +
            "% on average if the weights were stored in their own format";
    md += ".\n";
  }
  if (s.nonfinite_steps == 0) md += "- Non-finite values: none.\n";
  for (std::size_t i = 0; i < s.first_nonfinite.size(); ++i) {
    const analysis::NonfiniteEvent& e = s.first_nonfinite[i];
    md += (i == 0 ? "- Non-finite values at " + std::to_string(s.nonfinite_steps) + " step(s); the first: "
                  : "  then: ") +
          "step " + std::to_string(e.step) + ", `" + e.layer + "` " + e.tensor + " (" + e.pass +
          (e.count ? ", " + std::to_string(*e.count) + " values" : std::string()) +
          (e.after ? ", " + analysis::made_after_text(e) : std::string()) + ")" +
          (i + 1 == s.first_nonfinite.size() ? ".\n" : ";\n");
  }
  return md;
}

std::string kind_table(const RunSummary& s) {
  std::string md = "| layer | tensor | role | format | recorded steps | underflow to zero | subnormal | overflow | "
                   "smallest headroom (log2) | step of most underflow |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|\n";
  for (const TensorKindSummary& k : s.kinds)
    md += "| `" + k.layer + "` | " + k.tensor + " | " + k.role + " | " + k.format + " | " +
          std::to_string(k.recorded_steps) + " | " + percent_of(k.underflow, k.nonzero) + " | " +
          percent_of(k.subnormal, k.nonzero) + " | " + percent_of(k.overflow, k.nonzero) + " | " +
          (k.min_headroom_log2 ? fixed(*k.min_headroom_log2, 2) : std::string("-")) + " | " +
          (k.worst_step ? std::to_string(*k.worst_step) : std::string("-")) + " |\n";
  return md;
}

std::string bounds(std::uint64_t certain, std::uint64_t possible, std::uint64_t of) {
  return certain == possible ? percent_of(certain, of)
                             : "[" + percent_of(certain, of) + ", " + percent_of(possible, of) + "]";
}

std::string what_if_section(const RunSummary& s) {
  if (s.what_if_log2.empty()) return "";
  std::string md = "\n## At other loss scales (what-if)\n\n";
  if (!s.what_if_note.empty()) return md + "Not computed: " + s.what_if_note + ".\n";
  md += "The loss-scaled tensors' recorded values moved to each scale by whole binades (histograms.jsonl); a "
        "rate in brackets is [certain, possible]: the binade just below the smallest subnormal and the top "
        "binade are known only to lie near their thresholds.\n\n"
        "| layer | tensor | scale | underflow to zero | overflow |\n|---|---|---|---:|---:|\n";
  for (const TensorKindSummary& k : s.kinds)
    for (const analysis::WhatIfBounds& b : k.what_if)
      md += "| `" + k.layer + "` | " + k.tensor + " | 2^" + std::to_string(b.scale_log2) + " | " +
            bounds(b.underflow_certain, b.underflow_possible, b.of) + " | " +
            bounds(b.overflow_certain, b.overflow_possible, b.of) + " |\n";
  return md;
}

// Every recorded step, in order, grouped into at most kMaxHeatMapColumns columns of equal size.
std::vector<HeatMapColumn> heat_columns(const RunSummary& s, std::map<std::int64_t, std::size_t>& column_of) {
  std::vector<std::int64_t> steps;
  for (const TensorKindSummary& k : s.kinds)
    for (const analysis::StepCounts& c : k.steps) steps.push_back(c.step);
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  const std::size_t per = (steps.size() + kMaxHeatMapColumns - 1) / kMaxHeatMapColumns;
  std::vector<HeatMapColumn> columns;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (i % per == 0) columns.push_back({steps[i], steps[i]});
    columns.back().last_step = steps[i];
    column_of[steps[i]] = columns.size() - 1;
  }
  return columns;
}

std::string histograms_figure(const RunSummary& s) {
  std::vector<HistogramSeries> series;
  std::string format;
  for (const TensorKindSummary& k : s.kinds)
    if (k.loss_scaled && k.histogram) {
      series.push_back({kind_label(k) + " (" + k.role + ")", *k.histogram});
      if (format.empty()) format = k.format;
    }
  if (series.empty()) return "";
  const emu::FormatThresholds t = emu::format_thresholds(formats::parse_format(format));
  return svg_histogram("Gradients as recorded (at each step's scale), summed over the recorded steps; " + format +
                           "'s limits",
                       series,
                       {{"min subnormal 2^" + std::to_string(t.min_subnormal_exponent), t.min_subnormal_exponent},
                        {"min normal 2^" + std::to_string(t.min_normal_exponent), t.min_normal_exponent},
                        {"max finite", t.max_finite_exponent + 1}},
                       "log2 |value| (binade)", true);
}

}  // namespace run_summary_report_impl

HeatMap underflow_heat_map(const analysis::RunSummary& s) {
  namespace impl = run_summary_report_impl;
  HeatMap map;
  map.title = "Underflow to zero per step: the fraction of each tensor's non-zero values that became 0";
  map.value_name = "underflow rate";
  std::map<std::int64_t, std::size_t> column_of;
  map.columns = impl::heat_columns(s, column_of);
  for (const analysis::TensorKindSummary& k : s.kinds) {
    std::vector<std::uint64_t> lost(map.columns.size(), 0), of(map.columns.size(), 0);
    std::vector<bool> seen(map.columns.size(), false);
    for (const analysis::StepCounts& c : k.steps) {
      const std::size_t col = column_of.at(c.step);
      lost[col] += c.underflow;
      of[col] += c.nonzero;
      seen[col] = true;
    }
    HeatMapRow row{impl::kind_label(k), {}};
    for (std::size_t col = 0; col < map.columns.size(); ++col)
      row.values.push_back(seen[col] && of[col] ? std::optional<double>(static_cast<double>(lost[col]) /
                                                                        static_cast<double>(of[col]))
                                                : std::nullopt);
    map.rows.push_back(row);
  }
  return map;
}

std::vector<std::filesystem::path> write_run_summary_report(const analysis::RunSummary& s,
                                                            const std::filesystem::path& report) {
  namespace impl = run_summary_report_impl;
  std::vector<std::filesystem::path> written;
  const std::filesystem::path heat = figure_path(report, "underflow"), hist = figure_path(report, "histograms");
  write_output(heat, svg_heat_map(underflow_heat_map(s)), written);
  const std::string histograms = impl::histograms_figure(s);
  if (!histograms.empty()) write_output(hist, histograms, written);
  std::string md = "# Run summary: " + s.name + "\n\nWritten by `mpverify summarize` from the run's steps.jsonl, "
                   "tensors.jsonl and histograms.jsonl; every rate pools the recorded steps (definitions: "
                   "`src/analysis/run_summary.h`).\n\n" + impl::run_bullets(s) +
                   "\n## Per layer and tensor\n\nFractions of the non-zero finite values; gradients at their step's "
                   "loss scale, the other tensors at 1.\n\n" + impl::kind_table(s) +
                   "\n## Underflow over the steps\n\n![Underflow per layer and step](" + heat.filename().string() + ")\n";
  if (!histograms.empty())
    md += "\n## The gradients' exponents\n\n![Exponent histograms of the gradients](" + hist.filename().string() +
          ")\n\nCounts on a log axis: left of the first dashed line a value becomes zero, between the first two "
          "it is subnormal, right of the last it overflows.\n";
  md += impl::what_if_section(s);
  write_output(report, md, written);
  write_output(report.parent_path() / (report.stem().string() + ".html"),
               html_page("Run summary: " + s.name, {report}), written);
  return written;
}

}  // namespace mpverify::report
