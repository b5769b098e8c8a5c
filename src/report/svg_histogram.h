// Exponent histograms drawn as a standalone SVG: one panel per series (e.g.
// one per loss scale), bars of the fraction of the series' values in each
// binade [2^e, 2^(e+1)), on a shared exponent axis, with vertical marks (a
// format's smallest subnormal, smallest normal, largest finite; or 2^p for
// swamping). Values outside the bins (zeros, NaN, infinities, out of range)
// are listed in each panel's caption, not drawn. The output depends only on
// the inputs (no clock, no randomness), so the same data gives the same file.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "emu/exponent_histogram.h"

namespace mpverify::report {

struct HistogramSeries {
  std::string label;
  emu::ExponentHistogram histogram;
};

struct AxisMark {
  std::string label;
  int exponent = 0;  // drawn at the left edge of this binade
};

// Layout: the plot spans x in [kHistogramLeft, kHistogramLeft +
// kHistogramPlotWidth], one equal-width bin per binade. The marks' labels
// (in the first panel) lie inside that span: right of their mark where there
// is room, else left of it, a row lower when they would overlap. The
// exponent ticks are multiples of a power of two chosen so that neighbouring
// tick labels are at least one label's width apart, widths estimated by
// histogram_text_width.
inline constexpr double kHistogramLeft = 70, kHistogramPlotWidth = 810, kHistogramWidth = 900;
inline constexpr double kHistogramPanelHeight = 140, kHistogramFontSize = 11;

// The estimated width of a label of that many characters (0.6 x font size each).
double histogram_text_width(std::size_t characters);

// log_counts: bar heights on a log scale of the counts (a bar of one value still shows), so a tail of a
// few values next to millions (the values lost to underflow) stays visible; the panel's top is labelled
// with the largest count instead of its fraction.
std::string svg_histogram(const std::string& title, const std::vector<HistogramSeries>& series,
                          const std::vector<AxisMark>& marks, const std::string& x_label = "log2 |value| (binade)",
                          bool log_counts = false);

}  // namespace mpverify::report
