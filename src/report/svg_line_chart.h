// Line charts drawn as a standalone SVG: several named series of (x, y)
// points (e.g. a loss per step for each run) on shared axes, with ticks, axis
// labels and a legend, and optionally a log2 y axis (for the loss scale,
// which moves by factors of two). The output depends only on the inputs (no
// clock, no randomness), so the same data gives the same file; text is
// escaped.
//
// Geometry (so that a reader can recompute where a point is drawn): the plot
// area's left edge is at x = kLeft, its top at y = kTop, it is kPlotWidth by
// kPlotHeight pixels. The data's extent is [x_min, x_max] of all finite
// points, and [y_min, y_max] of their finite y (of log2 y on a log2 axis or
// log10 y on a log10 axis, where y <= 0 cannot be drawn); an extent of zero
// width is widened to [v - 1, v + 1] (log2: v +- 1 binade). The axes span
// that extent padded by kLineChartPad of its width on each side, so that no
// point lies on the frame: [lo, hi] = [min - pad (max - min), max + pad (max - min)].
// A point is drawn at
//   px = kLeft + (x - x_lo) / (x_hi - x_lo) * kPlotWidth
//   py = kTop + kPlotHeight - (Y - y_lo) / (y_hi - y_lo) * kPlotHeight,  Y = y, log2(y) or log10(y)
// written with two decimals. A point that cannot be drawn (non-finite, or
// y <= 0 on a log axis) breaks its series' line: each unbroken run of points
// is one <polyline>. Series differ in colour and in marker shape (circle,
// square, triangle, diamond, ...; element class "marker marker-SHAPE"): a
// series of at most kLineChartAllMarkers drawable points has a marker on
// each, a longer one on about a dozen evenly spaced points (and a point
// standing alone always has one). The legend lists the series below the
// plot, in the order given, each with its line and marker. A series' marked
// points (e.g. skipped steps) are drawn as crosses in its colour (element
// class "mark", a <path> of two strokes centred on the point), whether or not
// they lie on its line; a series without marked points draws none, so charts
// that mark nothing are unchanged.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace mpverify::report {

struct LineSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), in the order to connect them
  bool dashed = false;  // a third cue besides colour and marker (e.g. one side of a comparison)
  std::vector<std::pair<double, double>> marked{};  // (x, y) drawn as crosses; undrawable ones are left out
};

struct LineChart {
  std::string title, x_label, y_label;
  bool log2_y = false;   // ticks at powers of two, labelled 2^k
  std::vector<LineSeries> series;
  bool log10_y = false;  // ticks at powers of ten, labelled 1e-k (for rates spanning decades); not with log2_y
};

inline constexpr double kLineChartLeft = 80, kLineChartTop = 40;
inline constexpr double kLineChartPlotWidth = 780, kLineChartPlotHeight = 240;
inline constexpr double kLineChartPad = 0.05;
inline constexpr std::size_t kLineChartAllMarkers = 15;

std::string svg_line_chart(const LineChart& chart);

}  // namespace mpverify::report
