#include "report/svg_histogram.h"

#include "report/svg_number.h"
#include "report/xml_escape.h"

#include <algorithm>
#include <cstdio>

namespace mpverify::report {

namespace {

std::string count_text(std::uint64_t v) { return std::to_string(v); }

}  // namespace

std::string svg_histogram(const std::string& title, const std::vector<HistogramSeries>& series,
                          const std::vector<AxisMark>& marks) {
  using emu::ExponentHistogram;
  // The exponent range: every non-empty bin and every mark, padded by one binade.
  int lo = ExponentHistogram::max_exponent, hi = ExponentHistogram::min_exponent;
  for (const HistogramSeries& s : series)
    for (int e = ExponentHistogram::min_exponent; e <= ExponentHistogram::max_exponent; ++e)
      if (s.histogram.at(e) != 0) { lo = std::min(lo, e); hi = std::max(hi, e); }
  for (const AxisMark& m : marks) { lo = std::min(lo, m.exponent); hi = std::max(hi, m.exponent); }
  if (lo > hi) { lo = -1; hi = 1; }
  lo -= 1;
  hi += 1;
  const int nbins = hi - lo + 1;
  const double left = 70, right = 20, panel_h = 140, gap = 50, top = 50, width = 900;
  const double plot_w = width - left - right, bin_w = plot_w / nbins;
  const double height = top + static_cast<double>(series.size()) * (panel_h + gap) + 20;
  const auto x_of = [&](int e) { return left + (e - lo) * bin_w; };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg_coordinate(width) + "\" height=\"" + svg_coordinate(height) +
                    "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + svg_coordinate(left) + "\" y=\"24\" font-size=\"15\">" + xml_escape(title) + "</text>\n";
  for (std::size_t i = 0; i < series.size(); ++i) {
    const ExponentHistogram& h = series[i].histogram;
    const double y0 = top + static_cast<double>(i) * (panel_h + gap);  // panel top
    const double base = y0 + panel_h;
    std::uint64_t binned = 0, peak = 0;
    for (int e = ExponentHistogram::min_exponent; e <= ExponentHistogram::max_exponent; ++e) {
      binned += h.at(e);
      peak = std::max(peak, h.at(e));
    }
    svg += "<text x=\"" + svg_coordinate(left) + "\" y=\"" + svg_coordinate(y0 - 6) + "\">" + xml_escape(series[i].label) + ": " +
           count_text(binned) + " in bins; zeros " + count_text(h.zeros) + ", below range " +
           count_text(h.below_range) + ", above range " + count_text(h.above_range) + ", inf " +
           count_text(h.infinities) + ", NaN " + count_text(h.nans) + "</text>\n";
    svg += "<line x1=\"" + svg_coordinate(left) + "\" y1=\"" + svg_coordinate(base) + "\" x2=\"" + svg_coordinate(left + plot_w) + "\" y2=\"" +
           svg_coordinate(base) + "\" stroke=\"black\"/>\n";
    svg += "<text x=\"" + svg_coordinate(left - 6) + "\" y=\"" + svg_coordinate(y0 + 10) + "\" text-anchor=\"end\">" +
           (binned ? svg_coordinate(100.0 * static_cast<double>(peak) / static_cast<double>(binned)) : std::string("0")) +
           "%</text>\n";
    for (int e = lo; e <= hi; ++e) {
      if (e < ExponentHistogram::min_exponent || e > ExponentHistogram::max_exponent) continue;
      const std::uint64_t c = h.at(e);
      if (c == 0) continue;
      const double bar = panel_h * static_cast<double>(c) / static_cast<double>(peak);
      svg += "<rect x=\"" + svg_coordinate(x_of(e)) + "\" y=\"" + svg_coordinate(base - bar) + "\" width=\"" + svg_coordinate(std::max(bin_w - 1, 1.0)) +
             "\" height=\"" + svg_coordinate(bar) + "\" fill=\"#4477aa\"><title>2^" + std::to_string(e) + ": " + count_text(c) +
             "</title></rect>\n";
    }
    for (const AxisMark& m : marks) {
      svg += "<line x1=\"" + svg_coordinate(x_of(m.exponent)) + "\" y1=\"" + svg_coordinate(y0) + "\" x2=\"" + svg_coordinate(x_of(m.exponent)) +
             "\" y2=\"" + svg_coordinate(base) + "\" stroke=\"#cc3311\" stroke-dasharray=\"4 3\"/>\n";
      if (i == 0)
        svg += "<text x=\"" + svg_coordinate(x_of(m.exponent) + 3) + "\" y=\"" + svg_coordinate(y0 + 12) + "\" fill=\"#cc3311\">" +
               xml_escape(m.label) + "</text>\n";
    }
    // Exponent ticks every 8 binades (and at the ends).
    for (int e = lo; e <= hi; ++e) {
      if (e % 8 != 0 && e != lo && e != hi) continue;
      svg += "<text x=\"" + svg_coordinate(x_of(e)) + "\" y=\"" + svg_coordinate(base + 14) + "\" text-anchor=\"middle\">" +
             std::to_string(e) + "</text>\n";
    }
  }
  svg += "<text x=\"" + svg_coordinate(left + plot_w / 2) + "\" y=\"" + svg_coordinate(height - 6) +
         "\" text-anchor=\"middle\">log2 |value| (binade)</text>\n";
  svg += "</svg>\n";
  return svg;
}

}  // namespace mpverify::report
