// A dot-and-interval plot drawn as a standalone SVG: one column per group
// (e.g. one precision recipe), its individual values as dots (e.g. the
// per-seed accuracy differences against FP32), and its estimate with an
// interval (e.g. the mean difference and the gate's 90% interval), over a
// shaded band [-margin, +margin] and a line at zero: the picture of an
// equivalence test, where "equivalent" means the interval lies inside the
// band. The output depends only on the inputs (no clock, no randomness), so
// the same data gives the same file; text is escaped.
//
// Geometry (so that a test can recompute where everything is drawn): the plot
// area's left edge is at x = kIntervalPlotLeft, its top at y = kIntervalPlotTop,
// it is kIntervalPlotWidth by kIntervalPlotHeight pixels. The y axis spans
// [y_min, y_max] = [lo - pad (hi - lo), hi + pad (hi - lo)], pad =
// kIntervalPlotPad, where lo and hi are the smallest and largest of every
// finite value, interval end and estimate, and -margin and +margin (a range
// of zero width is widened to [v - 1, v + 1] first): no mark sits on the
// frame. With n groups, column i (0-based) has width
// w = kIntervalPlotWidth / n and centre cx_i = kIntervalPlotLeft + (i + 0.5) w.
// Value k (0-based) of m values in a group is a circle at
//   x = cx_i - w/6 + (k - (m - 1)/2) * min(6, (w/3) / m),
//   y = kIntervalPlotTop + kIntervalPlotHeight - (v - y_min) / (y_max - y_min) * kIntervalPlotHeight,
// the interval a vertical line at x = cx_i + w/6 from its lower to its upper
// end, the estimate a square centred on that line; coordinates are written
// with two decimals. A non-finite value is not drawn (a diverged run); the
// group's label says how many of its values were drawn when some were not.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mpverify::report {

struct IntervalGroup {
  std::string label;            // under the column
  std::vector<double> values;   // the dots, in order
  std::optional<double> estimate, lower, upper;  // the square and the bar (all three, or none)
};

struct IntervalPlot {
  std::string title, y_label;
  double margin = 0;  // > 0: the band [-margin, margin]
  std::vector<IntervalGroup> groups;
  std::string legend;  // under the plot, saying what the marks are; '\n' starts a new line
};

inline constexpr double kIntervalPlotLeft = 80, kIntervalPlotTop = 40;
inline constexpr double kIntervalPlotWidth = 780, kIntervalPlotHeight = 300;
inline constexpr double kIntervalPlotRight = 100;
inline constexpr double kIntervalPlotPad = 0.05;  // room right of the plot for the band's label

// Throws std::invalid_argument for no groups, a margin that is not finite and
// > 0, or an interval given partly or with lower > upper or non-finite ends.
std::string svg_interval_plot(const IntervalPlot& plot);

}  // namespace mpverify::report
