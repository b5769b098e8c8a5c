#include "report/svg_line_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <stdexcept>

#include "report/svg_number.h"
#include "report/xml_escape.h"

namespace mpverify::report {

namespace {

// Paul Tol's "bright" qualitative scheme: distinct for colour-blind readers.
constexpr const char* kColours[] = {"#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#555555"};

struct Range {
  double lo = 0, hi = 0;
};

// Ticks at multiples of 1, 2 or 5 times a power of ten, about five of them.
std::vector<double> linear_ticks(const Range& r) {
  const double raw = (r.hi - r.lo) / 5;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  std::vector<double> ticks;
  for (double k = std::ceil(r.lo / step); k <= std::floor(r.hi / step); k += 1) {
    const double t = k * step;
    ticks.push_back(t == 0 ? 0.0 : t);  // no "-0"
  }
  return ticks;
}

// Integer exponents, at most about eight of them.
std::vector<double> log_ticks(const Range& r) {
  const double first = std::ceil(r.lo), last = std::floor(r.hi);
  const double every = std::max(1.0, std::ceil((last - first + 1) / 8));
  std::vector<double> ticks;
  for (double e = first; e <= last; e += every) ticks.push_back(e);
  return ticks;
}

}  // namespace

std::string svg_line_chart(const LineChart& chart) {
  if (chart.log2_y && chart.log10_y) throw std::invalid_argument("svg_line_chart: log2_y and log10_y together");
  const double left = kLineChartLeft, top = kLineChartTop, plot_w = kLineChartPlotWidth,
               plot_h = kLineChartPlotHeight;
  const auto drawn_y = [&](double y) -> std::optional<double> {
    if (!std::isfinite(y)) return std::nullopt;
    if (!chart.log2_y && !chart.log10_y) return y;
    if (y <= 0) return std::nullopt;
    return chart.log2_y ? std::log2(y) : std::log10(y);
  };
  std::optional<Range> xr, yr;
  for (const LineSeries& s : chart.series)
    for (const auto& [x, y] : s.points) {
      const std::optional<double> yy = drawn_y(y);
      if (!std::isfinite(x) || !yy) continue;
      if (!xr) xr = Range{x, x};
      if (!yr) yr = Range{*yy, *yy};
      xr->lo = std::min(xr->lo, x);
      xr->hi = std::max(xr->hi, x);
      yr->lo = std::min(yr->lo, *yy);
      yr->hi = std::max(yr->hi, *yy);
    }
  if (!xr) xr = Range{0, 1};
  if (!yr) yr = Range{0, 1};
  if (xr->hi == xr->lo) xr = Range{xr->lo - 1, xr->hi + 1};
  if (yr->hi == yr->lo) yr = Range{yr->lo - 1, yr->hi + 1};
  const auto px = [&](double x) { return left + (x - xr->lo) / (xr->hi - xr->lo) * plot_w; };
  const auto py = [&](double y) { return top + plot_h - (y - yr->lo) / (yr->hi - yr->lo) * plot_h; };

  const double legend_top = top + plot_h + 48;
  const double width = left + plot_w + 30;
  const double height = legend_top + 18.0 * static_cast<double>(chart.series.size()) + 8;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg_coordinate(width) + "\" height=\"" + svg_coordinate(height) +
                    "\" viewBox=\"0 0 " + svg_coordinate(width) + " " + svg_coordinate(height) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + svg_coordinate(left) + "\" y=\"24\" font-size=\"15\">" + xml_escape(chart.title) + "</text>\n";
  // Grid and ticks.
  const bool log_y = chart.log2_y || chart.log10_y;
  for (const double t : log_y ? log_ticks(*yr) : linear_ticks(*yr)) {
    const double y = py(t);
    svg += "<line x1=\"" + svg_coordinate(left) + "\" y1=\"" + svg_coordinate(y) + "\" x2=\"" + svg_coordinate(left + plot_w) + "\" y2=\"" + svg_coordinate(y) +
           "\" stroke=\"#dddddd\"/>\n";
    std::string label = chart.log2_y ? "2^" + tick_label(t) : chart.log10_y ? "1e" + tick_label(t) : tick_label(t);
    svg += "<text x=\"" + svg_coordinate(left - 6) + "\" y=\"" + svg_coordinate(y + 4) + "\" text-anchor=\"end\">" + xml_escape(label) +
           "</text>\n";
  }
  for (const double t : linear_ticks(*xr)) {
    const double x = px(t);
    svg += "<line x1=\"" + svg_coordinate(x) + "\" y1=\"" + svg_coordinate(top + plot_h) + "\" x2=\"" + svg_coordinate(x) + "\" y2=\"" +
           svg_coordinate(top + plot_h + 5) + "\" stroke=\"black\"/>\n";
    svg += "<text x=\"" + svg_coordinate(x) + "\" y=\"" + svg_coordinate(top + plot_h + 18) + "\" text-anchor=\"middle\">" +
           xml_escape(tick_label(t)) + "</text>\n";
  }
  svg += "<rect x=\"" + svg_coordinate(left) + "\" y=\"" + svg_coordinate(top) + "\" width=\"" + svg_coordinate(plot_w) + "\" height=\"" + svg_coordinate(plot_h) +
         "\" fill=\"none\" stroke=\"black\"/>\n";
  svg += "<text x=\"" + svg_coordinate(left + plot_w / 2) + "\" y=\"" + svg_coordinate(top + plot_h + 36) + "\" text-anchor=\"middle\">" +
         xml_escape(chart.x_label) + "</text>\n";
  svg += "<text transform=\"translate(16 " + svg_coordinate(top + plot_h / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         xml_escape(chart.y_label) + "</text>\n";
  // The series, each unbroken run of drawable points one polyline.
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    const LineSeries& s = chart.series[i];
    const std::string colour = kColours[i % std::size(kColours)];
    const std::string dash = s.dashed ? " stroke-dasharray=\"6 4\"" : "";
    svg += "<g class=\"series\" stroke=\"" + colour + "\" fill=\"none\" stroke-width=\"1.5\"" + dash + ">\n<title>" +
           xml_escape(s.label) + "</title>\n";
    std::vector<std::pair<double, double>> run;
    const auto flush = [&] {
      if (run.size() == 1) {
        svg += "<circle cx=\"" + svg_coordinate(run[0].first) + "\" cy=\"" + svg_coordinate(run[0].second) + "\" r=\"2\" fill=\"" + colour +
               "\"/>\n";
      } else if (run.size() > 1) {
        svg += "<polyline points=\"";
        for (std::size_t k = 0; k < run.size(); ++k) {
          if (k) svg += ' ';
          svg += svg_coordinate(run[k].first) + "," + svg_coordinate(run[k].second);
        }
        svg += "\"/>\n";
      }
      run.clear();
    };
    for (const auto& [x, y] : s.points) {
      const std::optional<double> yy = drawn_y(y);
      if (!std::isfinite(x) || !yy) {
        flush();
        continue;
      }
      run.emplace_back(px(x), py(*yy));
    }
    flush();
    svg += "</g>\n";
    const double ly = legend_top + 18.0 * static_cast<double>(i);
    svg += "<line x1=\"" + svg_coordinate(left) + "\" y1=\"" + svg_coordinate(ly - 4) + "\" x2=\"" + svg_coordinate(left + 28) + "\" y2=\"" +
           svg_coordinate(ly - 4) + "\" stroke=\"" + colour + "\" stroke-width=\"2\"" + dash + "/>\n";
    svg += "<text x=\"" + svg_coordinate(left + 36) + "\" y=\"" + svg_coordinate(ly) + "\">" + xml_escape(s.label) + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace mpverify::report
