#include "report/svg_interval_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "report/svg_number.h"
#include "report/xml_escape.h"

namespace mpverify::report {

namespace {

// Ticks at multiples of 1, 2 or 5 times a power of ten, about six of them.
std::vector<double> ticks(double lo, double hi) {
  const double raw = (hi - lo) / 6;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  std::vector<double> out;
  for (double k = std::ceil(lo / step); k <= std::floor(hi / step); k += 1) {
    const double t = k * step;
    out.push_back(t == 0 ? 0.0 : t);  // no "-0"
  }
  return out;
}

}  // namespace

std::string svg_interval_plot(const IntervalPlot& plot) {
  if (plot.groups.empty()) throw std::invalid_argument("svg_interval_plot: no groups");
  if (!(plot.margin > 0) || !std::isfinite(plot.margin))
    throw std::invalid_argument("svg_interval_plot: the margin must be finite and > 0");
  double lo = -plot.margin, hi = plot.margin;
  for (const IntervalGroup& g : plot.groups) {
    const int given = g.estimate.has_value() + g.lower.has_value() + g.upper.has_value();
    if (given != 0 && given != 3)
      throw std::invalid_argument("svg_interval_plot: group '" + g.label + "' gives part of an interval");
    if (given == 3) {
      if (!std::isfinite(*g.lower) || !std::isfinite(*g.upper) || !std::isfinite(*g.estimate) || *g.lower > *g.upper)
        throw std::invalid_argument("svg_interval_plot: group '" + g.label + "' has a bad interval");
      lo = std::min({lo, *g.lower, *g.estimate});
      hi = std::max({hi, *g.upper, *g.estimate});
    }
    for (const double v : g.values)
      if (std::isfinite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
  }
  if (hi == lo) {
    lo -= 1;
    hi += 1;
  }
  // Padded, so that no mark sits on the frame.
  const double pad = kIntervalPlotPad * (hi - lo);
  lo -= pad;
  hi += pad;
  const double left = kIntervalPlotLeft, top = kIntervalPlotTop, plot_w = kIntervalPlotWidth,
               plot_h = kIntervalPlotHeight;
  const auto py = [&](double v) { return top + plot_h - (v - lo) / (hi - lo) * plot_h; };
  const double n = static_cast<double>(plot.groups.size());
  const double w = plot_w / n;

  std::vector<std::string> legend_lines;
  for (std::size_t start = 0; start <= plot.legend.size();) {
    const std::size_t end = std::min(plot.legend.find('\n', start), plot.legend.size());
    if (end > start) legend_lines.push_back(plot.legend.substr(start, end - start));
    start = end + 1;
  }
  const double legend_y = top + plot_h + 50;
  const double width = left + plot_w + kIntervalPlotRight,
               height = legend_y + 16 * static_cast<double>(legend_lines.size());
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg_coordinate(width) + "\" height=\"" + svg_coordinate(height) +
                    "\" viewBox=\"0 0 " + svg_coordinate(width) + " " + svg_coordinate(height) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + svg_coordinate(left) + "\" y=\"24\" font-size=\"15\">" + xml_escape(plot.title) + "</text>\n";
  // The band of equivalence first, so that everything else is drawn over it.
  svg += "<rect class=\"margin-band\" x=\"" + svg_coordinate(left) + "\" y=\"" + svg_coordinate(py(plot.margin)) + "\" width=\"" +
         svg_coordinate(plot_w) + "\" height=\"" + svg_coordinate(py(-plot.margin) - py(plot.margin)) + "\" fill=\"#e3f2e3\"/>\n";
  for (const double t : ticks(lo, hi)) {
    const double y = py(t);
    svg += "<line x1=\"" + svg_coordinate(left) + "\" y1=\"" + svg_coordinate(y) + "\" x2=\"" + svg_coordinate(left + plot_w) + "\" y2=\"" + svg_coordinate(y) +
           "\" stroke=\"#dddddd\"/>\n";
    svg += "<text x=\"" + svg_coordinate(left - 6) + "\" y=\"" + svg_coordinate(y + 4) + "\" text-anchor=\"end\">" + xml_escape(tick_label(t)) +
           "</text>\n";
  }
  svg += "<line class=\"zero\" x1=\"" + svg_coordinate(left) + "\" y1=\"" + svg_coordinate(py(0)) + "\" x2=\"" + svg_coordinate(left + plot_w) +
         "\" y2=\"" + svg_coordinate(py(0)) + "\" stroke=\"#555555\" stroke-dasharray=\"4 3\"/>\n";
  // The band's label outside the plot, on the right, where no mark can hide it.
  svg += "<text x=\"" + svg_coordinate(left + plot_w + 6) + "\" y=\"" + svg_coordinate(py(0) + 4) + "\" fill=\"#2a7a2a\">" +
         xml_escape("±" + tick_label(plot.margin) + " margin") + "</text>\n";
  svg += "<rect x=\"" + svg_coordinate(left) + "\" y=\"" + svg_coordinate(top) + "\" width=\"" + svg_coordinate(plot_w) + "\" height=\"" + svg_coordinate(plot_h) +
         "\" fill=\"none\" stroke=\"black\"/>\n";
  svg += "<text transform=\"translate(16 " + svg_coordinate(top + plot_h / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         xml_escape(plot.y_label) + "</text>\n";

  for (std::size_t i = 0; i < plot.groups.size(); ++i) {
    const IntervalGroup& g = plot.groups[i];
    const double cx = left + (static_cast<double>(i) + 0.5) * w;
    if (i > 0)
      svg += "<line x1=\"" + svg_coordinate(left + static_cast<double>(i) * w) + "\" y1=\"" + svg_coordinate(top) + "\" x2=\"" +
             svg_coordinate(left + static_cast<double>(i) * w) + "\" y2=\"" + svg_coordinate(top + plot_h) + "\" stroke=\"#eeeeee\"/>\n";
    const double m = static_cast<double>(g.values.size());
    const double spacing = std::min(6.0, (w / 3) / std::max(1.0, m));
    std::size_t drawn = 0;
    svg += "<g class=\"values\" fill=\"#4477aa\" fill-opacity=\"0.7\">\n<title>" + xml_escape(g.label) +
           ": individual values</title>\n";
    for (std::size_t k = 0; k < g.values.size(); ++k) {
      if (!std::isfinite(g.values[k])) continue;
      ++drawn;
      const double x = cx - w / 6 + (static_cast<double>(k) - (m - 1) / 2) * spacing;
      svg += "<circle cx=\"" + svg_coordinate(x) + "\" cy=\"" + svg_coordinate(py(g.values[k])) + "\" r=\"3\"/>\n";
    }
    svg += "</g>\n";
    if (g.estimate) {
      const double x = cx + w / 6;
      svg += "<g class=\"interval\" stroke=\"#ee6677\" stroke-width=\"2.5\">\n<title>" + xml_escape(g.label) +
             ": estimate and interval</title>\n";
      svg += "<line x1=\"" + svg_coordinate(x) + "\" y1=\"" + svg_coordinate(py(*g.upper)) + "\" x2=\"" + svg_coordinate(x) + "\" y2=\"" +
             svg_coordinate(py(*g.lower)) + "\"/>\n";
      for (const double end : {*g.lower, *g.upper})
        svg += "<line x1=\"" + svg_coordinate(x - 6) + "\" y1=\"" + svg_coordinate(py(end)) + "\" x2=\"" + svg_coordinate(x + 6) + "\" y2=\"" +
               svg_coordinate(py(end)) + "\"/>\n";
      svg += "<rect x=\"" + svg_coordinate(x - 4) + "\" y=\"" + svg_coordinate(py(*g.estimate) - 4) +
             "\" width=\"8.00\" height=\"8.00\" fill=\"#ee6677\" stroke=\"none\"/>\n</g>\n";
    }
    std::string label = g.label;
    if (drawn < g.values.size()) {
      label += " (";
      label += std::to_string(drawn);
      label += " of ";
      label += std::to_string(g.values.size());
      label += " drawn)";
    }
    svg += "<text x=\"" + svg_coordinate(cx) + "\" y=\"" + svg_coordinate(top + plot_h + 20) + "\" text-anchor=\"middle\">" +
           xml_escape(label) + "</text>\n";
  }
  for (std::size_t k = 0; k < legend_lines.size(); ++k)
    svg += "<text x=\"" + svg_coordinate(left) + "\" y=\"" + svg_coordinate(legend_y + 16 * static_cast<double>(k)) + "\">" +
           xml_escape(legend_lines[k]) + "</text>\n";
  svg += "</svg>\n";
  return svg;
}

}  // namespace mpverify::report
