#include "report/svg_histogram.h"

#include "report/svg_number.h"
#include "report/xml_escape.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace mpverify::report {

namespace {

using emu::ExponentHistogram;

std::string count_text(std::uint64_t v) { return std::to_string(v); }

// The figure's layout: panels stacked under the title, one binade per bin.
struct Layout {
  int lo = 0, hi = 0;  // the first and last binade drawn
  double bin_w = 0;
  double x_of(int e) const { return kHistogramLeft + (e - lo) * bin_w; }
  double plot_right() const { return kHistogramLeft + kHistogramPlotWidth; }
};

// The exponent range: every non-empty bin and every mark, padded by one binade.
Layout layout_of(const std::vector<HistogramSeries>& series, const std::vector<AxisMark>& marks) {
  int lo = ExponentHistogram::max_exponent, hi = ExponentHistogram::min_exponent;
  for (const HistogramSeries& s : series)
    for (int e = ExponentHistogram::min_exponent; e <= ExponentHistogram::max_exponent; ++e)
      if (s.histogram.at(e) != 0) {
        lo = std::min(lo, e);
        hi = std::max(hi, e);
      }
  for (const AxisMark& m : marks) {
    lo = std::min(lo, m.exponent);
    hi = std::max(hi, m.exponent);
  }
  if (lo > hi) {
    lo = -1;
    hi = 1;
  }
  Layout l{lo - 1, hi + 1, 0};
  l.bin_w = kHistogramPlotWidth / (l.hi - l.lo + 1);
  return l;
}

// Tick exponents: multiples of the smallest power of two that leaves at least
// one label's width between neighbouring labels.
std::vector<int> tick_exponents(const Layout& l) {
  const std::size_t chars = std::max(std::to_string(l.lo).size(), std::to_string(l.hi).size());
  const double width = histogram_text_width(chars);
  int step = 1;
  while (step * l.bin_w < 2 * width) step *= 2;
  std::vector<int> ticks;
  for (int e = l.lo; e <= l.hi; ++e)
    if (e % step == 0) ticks.push_back(e);
  return ticks;
}

// The marks' labels, inside the plot: right of the mark where there is room,
// else left of it; a label that would overlap one before it goes a row lower.
// A white outline keeps them readable over the bars.
std::string mark_labels(const Layout& l, const std::vector<AxisMark>& marks, double panel_top) {
  std::vector<std::vector<std::pair<double, double>>> rows;  // the extents taken in each row
  std::string svg;
  for (const AxisMark& m : marks) {
    const double x = l.x_of(m.exponent), w = histogram_text_width(m.label.size());
    const bool right = x + 3 + w <= l.plot_right();
    const double from = right ? x + 3 : x - 3 - w, to = from + w;
    std::size_t row = 0;
    const auto clear = [&](const std::pair<double, double>& s) { return to + 4 <= s.first || from >= s.second + 4; };
    while (row < rows.size() && !std::all_of(rows[row].begin(), rows[row].end(), clear)) ++row;
    if (row == rows.size()) rows.emplace_back();
    rows[row].emplace_back(from, to);
    svg += "<text class=\"mark-label\" x=\"" + svg_coordinate(right ? from : to) + "\" y=\"" +
           svg_coordinate(panel_top + 12 + 12 * static_cast<double>(row)) + "\"" +
           (right ? "" : " text-anchor=\"end\"") +
           " fill=\"#cc3311\" stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\">" + xml_escape(m.label) + "</text>\n";
  }
  return svg;
}

// A bar's height: linear in the count, or (log_counts) in log10(count) + 1 so that one value is a tenth of a
// decade high rather than nothing.
double bar_height(std::uint64_t count, std::uint64_t peak, bool log_counts) {
  if (!log_counts) return kHistogramPanelHeight * static_cast<double>(count) / static_cast<double>(peak);
  return kHistogramPanelHeight * (std::log10(static_cast<double>(count)) + 1) /
         (std::log10(static_cast<double>(peak)) + 1);
}

std::string panel(const Layout& l, const HistogramSeries& s, const std::vector<AxisMark>& marks, double y0,
                  bool first, bool log_counts) {
  const ExponentHistogram& h = s.histogram;
  const double base = y0 + kHistogramPanelHeight;
  std::uint64_t binned = 0, peak = 0;
  for (int e = ExponentHistogram::min_exponent; e <= ExponentHistogram::max_exponent; ++e) {
    binned += h.at(e);
    peak = std::max(peak, h.at(e));
  }
  const double left = kHistogramLeft;
  std::string svg = "<text x=\"" + svg_coordinate(left) + "\" y=\"" + svg_coordinate(y0 - 6) + "\">" +
                    xml_escape(s.label) + ": " + count_text(binned) + " in bins; zeros " + count_text(h.zeros) +
                    ", below range " + count_text(h.below_range) + ", above range " + count_text(h.above_range) +
                    ", inf " + count_text(h.infinities) + ", NaN " + count_text(h.nans) + "</text>\n";
  svg += "<line x1=\"" + svg_coordinate(left) + "\" y1=\"" + svg_coordinate(base) + "\" x2=\"" +
         svg_coordinate(l.plot_right()) + "\" y2=\"" + svg_coordinate(base) + "\" stroke=\"black\"/>\n";
  svg += "<text x=\"" + svg_coordinate(left - 6) + "\" y=\"" + svg_coordinate(y0 + 10) + "\" text-anchor=\"end\">" +
         (log_counts ? count_text(peak) + " (log)"
          : (binned ? svg_coordinate(100.0 * static_cast<double>(peak) / static_cast<double>(binned)) : std::string("0")) +
                "%") +
         "</text>\n";
  for (int e = std::max(l.lo, ExponentHistogram::min_exponent); e <= std::min(l.hi, ExponentHistogram::max_exponent);
       ++e) {
    const std::uint64_t c = h.at(e);
    if (c == 0) continue;
    const double bar = bar_height(c, peak, log_counts);
    svg += "<rect x=\"" + svg_coordinate(l.x_of(e)) + "\" y=\"" + svg_coordinate(base - bar) + "\" width=\"" +
           svg_coordinate(std::max(l.bin_w - 1, 1.0)) + "\" height=\"" + svg_coordinate(bar) +
           "\" fill=\"#4477aa\"><title>2^" + std::to_string(e) + ": " + count_text(c) + "</title></rect>\n";
  }
  for (const AxisMark& m : marks)
    svg += "<line x1=\"" + svg_coordinate(l.x_of(m.exponent)) + "\" y1=\"" + svg_coordinate(y0) + "\" x2=\"" +
           svg_coordinate(l.x_of(m.exponent)) + "\" y2=\"" + svg_coordinate(base) +
           "\" stroke=\"#cc3311\" stroke-dasharray=\"4 3\"/>\n";
  if (first) svg += mark_labels(l, marks, y0);
  for (const int e : tick_exponents(l)) {
    svg += "<line x1=\"" + svg_coordinate(l.x_of(e)) + "\" y1=\"" + svg_coordinate(base) + "\" x2=\"" +
           svg_coordinate(l.x_of(e)) + "\" y2=\"" + svg_coordinate(base + 3) + "\" stroke=\"black\"/>\n";
    svg += "<text class=\"tick\" x=\"" + svg_coordinate(l.x_of(e)) + "\" y=\"" + svg_coordinate(base + 14) +
           "\" text-anchor=\"middle\">" + std::to_string(e) + "</text>\n";
  }
  return svg;
}

}  // namespace

double histogram_text_width(std::size_t characters) {
  return 0.6 * kHistogramFontSize * static_cast<double>(characters);
}

std::string svg_histogram(const std::string& title, const std::vector<HistogramSeries>& series,
                          const std::vector<AxisMark>& marks, const std::string& x_label, bool log_counts) {
  const Layout l = layout_of(series, marks);
  const double top = 50, gap = 50;
  const double height = top + static_cast<double>(series.size()) * (kHistogramPanelHeight + gap) + 20;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg_coordinate(kHistogramWidth) +
                    "\" height=\"" + svg_coordinate(height) + "\" font-family=\"sans-serif\" font-size=\"" +
                    tick_label(kHistogramFontSize) + "\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + svg_coordinate(kHistogramLeft) + "\" y=\"24\" font-size=\"15\">" + xml_escape(title) +
         "</text>\n";
  for (std::size_t i = 0; i < series.size(); ++i)
    svg += panel(l, series[i], marks, top + static_cast<double>(i) * (kHistogramPanelHeight + gap), i == 0, log_counts);
  svg += "<text class=\"x-label\" x=\"" + svg_coordinate(kHistogramLeft + kHistogramPlotWidth / 2) + "\" y=\"" +
         svg_coordinate(height - 6) + "\" text-anchor=\"middle\">" + xml_escape(x_label) + "</text>\n";
  svg += "</svg>\n";
  return svg;
}

}  // namespace mpverify::report
