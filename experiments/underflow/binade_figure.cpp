#include "underflow/binade_figure.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "report/svg_histogram.h"
#include "report/svg_number.h"
#include "report/xml_escape.h"

namespace mpverify::experiments {

namespace {

using report::svg_coordinate;
using report::tick_label;

std::string text(double x, double y, const std::string& s, const char* anchor = "start", const char* fill = "black") {
  std::string t = "<text x=\"";
  t += svg_coordinate(x);
  t += "\" y=\"";
  t += svg_coordinate(y);
  t += "\" text-anchor=\"";
  t += anchor;
  t += "\" fill=\"";
  t += fill;
  t += "\">";
  t += report::xml_escape(s);
  t += "</text>\n";
  return t;
}

std::string rect(double x, double y, double w, double h, const char* fill, const std::string& extra = "") {
  std::string r = "<rect x=\"";
  r += svg_coordinate(x);
  r += "\" y=\"";
  r += svg_coordinate(y);
  r += "\" width=\"";
  r += svg_coordinate(w);
  r += "\" height=\"";
  r += svg_coordinate(h);
  r += "\" fill=\"";
  r += fill;
  r += "\"";
  r += extra;
  r += "/>\n";
  return r;
}

std::string line(double x1, double y1, double x2, double y2, const char* stroke, bool dashed) {
  std::string l = "<line x1=\"";
  l += svg_coordinate(x1);
  l += "\" y1=\"";
  l += svg_coordinate(y1);
  l += "\" x2=\"";
  l += svg_coordinate(x2);
  l += "\" y2=\"";
  l += svg_coordinate(y2);
  l += "\" stroke=\"";
  l += stroke;
  l += dashed ? "\" stroke-dasharray=\"5 3\"/>\n" : "\"/>\n";
  return l;
}

constexpr const char* kZeroFill = "#f4c7c3";       // becomes zero
constexpr const char* kSubnormalFill = "#fce8b2";  // becomes subnormal
constexpr const char* kOverflowFill = "#d9d9d9";   // overflows
constexpr const char* kMarkStroke = "#b3261e";

}  // namespace

int binade_tick_step(int bins) {
  const double w = kBinadePlotWidth / std::max(bins, 1);
  for (int step : {1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50})
    if (step * w >= kMinTickPixels) return step;
  return 50;
}

double binade_axis_top(double peak) {
  if (!(peak > 0)) return 1;
  double decade = std::pow(10.0, std::floor(std::log10(peak)));
  for (;;) {
    for (double m : {1.0, 2.0, 5.0})
      if (m * decade >= peak * (1 - 1e-12)) return std::min(m * decade, 100.0);
    decade *= 10;
  }
}

std::string svg_binade_figure(const BinadeFigure& f) {
  using emu::ExponentHistogram;
  const emu::FormatThresholds& t = f.thresholds;
  // Half the smallest subnormal rounds (ties to even) to zero; everything
  // above it in that binade rounds up to the smallest subnormal.
  const int zero_below = t.min_subnormal_exponent - 1;
  const int overflow_from = t.max_finite_exponent + 1;
  int lo = zero_below, hi = overflow_from;
  double peak = 0;
  for (const BinadePanel& p : f.panels) {
    const auto total = static_cast<double>(p.histogram.total());
    for (int e = ExponentHistogram::min_exponent; e <= ExponentHistogram::max_exponent; ++e) {
      if (p.histogram.at(e) == 0) continue;
      lo = std::min(lo, e);
      hi = std::max(hi, e);
      peak = std::max(peak, 100.0 * static_cast<double>(p.histogram.at(e)) / total);
    }
  }
  lo -= 1;
  hi += 1;
  const int bins = hi - lo + 1;
  const double w = kBinadePlotWidth / bins;
  const double y_top = binade_axis_top(peak);
  const double legend_h = 56, caption_h = 34, axis_h = 30;
  const double panel_block = caption_h + kBinadePanelHeight + axis_h;
  const double width = kBinadeLeft + kBinadePlotWidth + 30;
  const double height = legend_h + static_cast<double>(f.panels.size()) * panel_block + 34;
  const auto x_of = [&](double e) { return kBinadeLeft + (e - lo) * w; };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg_coordinate(width) + "\" height=\"" +
                    svg_coordinate(height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += rect(0, 0, width, height, "white");
  svg += "<text x=\"" + svg_coordinate(kBinadeLeft) + "\" y=\"22\" font-size=\"15\">" + report::xml_escape(f.title) + "</text>\n";
  // The legend: what each shaded range becomes in the format.
  {
    double x = kBinadeLeft;
    const double y = 40;
    const auto key = [&](const char* fill, const std::string& s) {
      svg += rect(x, y - 10, 14, 12, fill);
      svg += text(x + 18, y, s);
      x += 18 + 6.2 * static_cast<double>(s.size()) + 16;
    };
    key(kZeroFill, "becomes 0 in " + f.format_name + " (|v| <= 2^" + std::to_string(zero_below) + ")");
    key(kSubnormalFill, "becomes subnormal");
    key(kOverflowFill, "overflows (> " + tick_label(t.max_finite) + ")");
    svg += line(x, y - 10, x, y + 2, kMarkStroke, true);
    svg += text(x + 6, y, "format limits");
  }
  const double mark_max = t.max_finite_exponent + std::log2(t.max_finite / std::ldexp(1.0, t.max_finite_exponent));
  const struct Mark {
    double e;
    std::string label;
  } marks[] = {{static_cast<double>(t.min_subnormal_exponent), "2^" + std::to_string(t.min_subnormal_exponent)},
               {static_cast<double>(t.min_normal_exponent), "2^" + std::to_string(t.min_normal_exponent)},
               {mark_max, tick_label(t.max_finite)}};
  const int step = binade_tick_step(bins);

  for (std::size_t i = 0; i < f.panels.size(); ++i) {
    const ExponentHistogram& h = f.panels[i].histogram;
    const std::uint64_t total = h.total();
    const double top = legend_h + static_cast<double>(i) * panel_block + caption_h;
    const double base = top + kBinadePanelHeight;
    std::string caption = f.panels[i].label + ": " + std::to_string(total) + " values; zeros ";
    caption += total ? tick_label(std::round(10000.0 * static_cast<double>(h.zeros) / static_cast<double>(total)) / 100.0)
                     : std::string("0");
    caption += "% (not drawn)";
    if (h.nans + h.infinities) caption += ", non-finite " + std::to_string(h.nans + h.infinities);
    svg += text(kBinadeLeft, top - 10, caption);
    // Shaded ranges, then grid, bars, marks.
    svg += rect(x_of(lo), top, x_of(zero_below) - x_of(lo), kBinadePanelHeight, kZeroFill);
    svg += rect(x_of(zero_below), top, x_of(t.min_normal_exponent) - x_of(zero_below), kBinadePanelHeight,
                kSubnormalFill);
    svg += rect(x_of(overflow_from), top, x_of(hi + 1) - x_of(overflow_from), kBinadePanelHeight, kOverflowFill);
    for (double g : {0.0, 0.5, 1.0}) {
      const double y = base - g * kBinadePanelHeight;
      svg += line(kBinadeLeft, y, kBinadeLeft + kBinadePlotWidth, y, g == 0 ? "black" : "#bbbbbb", false);
      svg += text(kBinadeLeft - 6, y + 4, tick_label(g * y_top) + "%", "end");
    }
    for (int e = lo; e <= hi; ++e) {
      if (e < ExponentHistogram::min_exponent || e > ExponentHistogram::max_exponent) continue;
      const std::uint64_t c = h.at(e);
      if (c == 0) continue;
      const double pct = 100.0 * static_cast<double>(c) / static_cast<double>(total);
      const double bar = kBinadePanelHeight * pct / y_top;
      svg += "<rect x=\"" + svg_coordinate(x_of(e) + 0.5) + "\" y=\"" + svg_coordinate(base - bar) + "\" width=\"" +
             svg_coordinate(std::max(w - 1, 1.0)) + "\" height=\"" + svg_coordinate(bar) + "\" fill=\"#3b6ea5\"><title>[2^" +
             std::to_string(e) + ", 2^" + std::to_string(e + 1) + "): " + std::to_string(c) + " values, " +
             tick_label(pct) + "%</title></rect>\n";
    }
    for (const Mark& m : marks) {
      svg += line(x_of(m.e), top, x_of(m.e), base, kMarkStroke, true);
      // The largest finite value's label goes left of its line (the plot ends soon after it).
      const bool left = &m == &marks[2];
      svg += text(x_of(m.e) + (left ? -3 : 3), top + 13, m.label, left ? "end" : "start", kMarkStroke);
    }
    for (int e = lo; e <= hi; ++e) {
      if (e % step != 0) continue;
      svg += line(x_of(e), base, x_of(e), base + 4, "black", false);
      svg += text(x_of(e), base + 16, std::to_string(e), "middle");
    }
  }
  svg += text(kBinadeLeft + kBinadePlotWidth / 2, height - 10, f.x_label, "middle");
  svg += "<text transform=\"translate(16," + svg_coordinate(legend_h + 40) + ") rotate(90)\">% of all values</text>\n";
  svg += "</svg>\n";
  return svg;
}

}  // namespace mpverify::experiments
