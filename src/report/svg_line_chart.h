// Line charts drawn as a standalone SVG: several named series of (x, y)
// points (e.g. a loss per step for each run) on shared axes, with ticks, axis
// labels and a legend, and optionally a log2 y axis (for the loss scale,
// which moves by factors of two). The output depends only on the inputs (no
// clock, no randomness), so the same data gives the same file; text is
// escaped.
//
// Geometry (so that a reader can recompute where a point is drawn): the plot
// area's left edge is at x = kLeft, its top at y = kTop, it is kPlotWidth by
// kPlotHeight pixels. The axes span exactly the data: [x_min, x_max] of all
// finite points, and [y_min, y_max] of their finite y (of log2 y on a log2
// axis or log10 y on a log10 axis, where y <= 0 cannot be drawn); a range of zero width is widened to
// [v - 1, v + 1] (log2: v +- 1 binade). A point is drawn at
//   px = kLeft + (x - x_min) / (x_max - x_min) * kPlotWidth
//   py = kTop + kPlotHeight - (Y - y_min) / (y_max - y_min) * kPlotHeight,  Y = y, log2(y) or log10(y)
// written with two decimals. A point that cannot be drawn (non-finite, or
// y <= 0 on a log axis) breaks its series' line: each unbroken run of points
// is one <polyline> (a single point a small circle). The legend lists the
// series below the plot, in the order given.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mpverify::report {

struct LineSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), in the order to connect them
  bool dashed = false;
};

struct LineChart {
  std::string title, x_label, y_label;
  bool log2_y = false;   // ticks at powers of two, labelled 2^k
  std::vector<LineSeries> series;
  bool log10_y = false;  // ticks at powers of ten, labelled 1e-k (for rates spanning decades); not with log2_y
};

inline constexpr double kLineChartLeft = 80, kLineChartTop = 40;
inline constexpr double kLineChartPlotWidth = 780, kLineChartPlotHeight = 240;

std::string svg_line_chart(const LineChart& chart);

}  // namespace mpverify::report
