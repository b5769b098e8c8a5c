// `mpverify summarize RUN --report FILE.md`: one run's summary
// (analysis/run_summary.h) as a Markdown report with two figures next to it,
// and the same as one self-contained HTML page:
//  - FILE-underflow.svg: a layers x steps heat map of every tensor kind's
//    underflow-to-zero rate (log colour scale; 0 grey, not recorded blank),
//    at most kMaxHeatMapColumns columns (more recorded steps are pooled,
//    consecutive, into equal groups);
//  - FILE-histograms.svg: the loss-scaled kinds' exponent histograms summed
//    over the recorded steps, counts on a log axis so that the few values
//    below the format's smallest subnormal show, with the format's limits
//    marked (when the run has histograms.jsonl);
//  - FILE.html (report/html_page.h): the report with its figures inlined.
// Every file is written atomically; the content depends only on the run.
#pragma once

#include <cstddef>
#include <filesystem>
#include <vector>

#include "analysis/run_summary.h"
#include "report/svg_heat_map.h"

namespace mpverify::report {

inline constexpr std::size_t kMaxHeatMapColumns = 175;

// The heat map of the summary's kinds (exposed for tests).
HeatMap underflow_heat_map(const analysis::RunSummary& summary);

// Writes the report, its figures and the page; returns the files written.
std::vector<std::filesystem::path> write_run_summary_report(const analysis::RunSummary& summary,
                                                            const std::filesystem::path& report);

}  // namespace mpverify::report
