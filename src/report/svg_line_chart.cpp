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
// Marker shapes, so that series stay apart in grey print and for readers who
// cannot tell the colours apart. Each polygon is centred on the point (its
// vertices' mean is the point).
enum class Marker { circle, square, triangle, diamond, triangle_down, pentagon, plus };
constexpr Marker kMarkers[] = {Marker::circle,        Marker::square,   Marker::triangle, Marker::diamond,
                               Marker::triangle_down, Marker::pentagon, Marker::plus};
constexpr double kMarkerRadius = 4;

const char* marker_name(Marker m) {
  switch (m) {
    case Marker::circle: return "circle";
    case Marker::square: return "square";
    case Marker::triangle: return "triangle";
    case Marker::diamond: return "diamond";
    case Marker::triangle_down: return "triangle-down";
    case Marker::pentagon: return "pentagon";
    case Marker::plus: return "plus";
  }
  return "circle";
}

// Series i's colour and marker: the marker index advances once per round of
// colours, so that the first 49 series are 49 different pairs.
const char* colour_of(std::size_t i) { return kColours[i % std::size(kColours)]; }
Marker marker_of(std::size_t i) {
  return kMarkers[(i + i / std::size(kColours)) % std::size(kMarkers)];
}

// Vertices (dx, dy) of a polygon marker, relative to its centre.
std::vector<std::pair<double, double>> marker_outline(Marker m) {
  const double r = kMarkerRadius;
  const auto regular = [&](int n, double first_angle_deg, double radius) {
    std::vector<std::pair<double, double>> v;
    for (int k = 0; k < n; ++k) {
      const double a = (first_angle_deg + 360.0 * k / n) * std::acos(-1.0) / 180;
      v.emplace_back(radius * std::cos(a), -radius * std::sin(a));
    }
    return v;
  };
  switch (m) {
    case Marker::square: return {{-0.85 * r, -0.85 * r}, {0.85 * r, -0.85 * r}, {0.85 * r, 0.85 * r}, {-0.85 * r, 0.85 * r}};
    case Marker::triangle: return regular(3, 90, 1.2 * r);
    case Marker::triangle_down: return regular(3, 270, 1.2 * r);
    case Marker::diamond: return regular(4, 90, 1.15 * r);
    case Marker::pentagon: return regular(5, 90, 1.05 * r);
    case Marker::plus: {
      const double a = 0.35 * r, b = 1.1 * r;
      return {{-a, -b}, {a, -b}, {a, -a}, {b, -a}, {b, a}, {a, a}, {a, b}, {-a, b}, {-a, a}, {-b, a}, {-b, -a}, {-a, -a}};
    }
    case Marker::circle: break;
  }
  return {};
}

std::string svg_marker(Marker m, double x, double y, const std::string& colour) {
  const std::string cls = std::string(" class=\"marker marker-") + marker_name(m) + "\"";
  const std::string paint = " fill=\"" + colour + "\" stroke=\"none\"";
  if (m == Marker::circle)
    return "<circle" + cls + " cx=\"" + svg_coordinate(x) + "\" cy=\"" + svg_coordinate(y) + "\" r=\"" +
           svg_coordinate(kMarkerRadius) + "\"" + paint + "/>\n";
  std::string points;
  for (const auto& [dx, dy] : marker_outline(m)) {
    if (!points.empty()) points += ' ';
    points += svg_coordinate(x + dx) + "," + svg_coordinate(y + dy);
  }
  return "<polygon" + cls + " points=\"" + points + "\"" + paint + "/>\n";
}

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

// Where the chart's values land: Y (y, log2 y or log10 y) when drawable, and
// the padded axis ranges.
struct Frame {
  const LineChart& chart;
  Range x, y;

  std::optional<double> drawn_y(double v) const {
    if (!std::isfinite(v)) return std::nullopt;
    if (!chart.log2_y && !chart.log10_y) return v;
    if (v <= 0) return std::nullopt;
    return chart.log2_y ? std::log2(v) : std::log10(v);
  }
  double px(double v) const { return kLineChartLeft + (v - x.lo) / (x.hi - x.lo) * kLineChartPlotWidth; }
  double py(double v) const {
    return kLineChartTop + kLineChartPlotHeight - (v - y.lo) / (y.hi - y.lo) * kLineChartPlotHeight;
  }
  // The drawable points of a series as pixels, a run broken where a point cannot be drawn.
  std::vector<std::vector<std::pair<double, double>>> runs(const LineSeries& s) const {
    std::vector<std::vector<std::pair<double, double>>> out(1);
    for (const auto& [vx, vy] : s.points) {
      const std::optional<double> yy = drawn_y(vy);
      if (!std::isfinite(vx) || !yy) {
        if (!out.back().empty()) out.emplace_back();
        continue;
      }
      out.back().emplace_back(px(vx), py(*yy));
    }
    if (out.back().empty()) out.pop_back();
    return out;
  }
};

Range padded(std::optional<Range> r) {
  if (!r) r = Range{0, 1};
  if (r->hi == r->lo) r = Range{r->lo - 1, r->hi + 1};
  const double pad = kLineChartPad * (r->hi - r->lo);
  return Range{r->lo - pad, r->hi + pad};
}

Frame frame_of(const LineChart& chart) {
  Frame f{chart, {}, {}};
  std::optional<Range> xr, yr;
  for (const LineSeries& s : chart.series)
    for (const auto& [x, y] : s.points) {
      const std::optional<double> yy = f.drawn_y(y);
      if (!std::isfinite(x) || !yy) continue;
      if (!xr) xr = Range{x, x};
      if (!yr) yr = Range{*yy, *yy};
      xr->lo = std::min(xr->lo, x);
      xr->hi = std::max(xr->hi, x);
      yr->lo = std::min(yr->lo, *yy);
      yr->hi = std::max(yr->hi, *yy);
    }
  f.x = padded(xr);
  f.y = padded(yr);
  return f;
}

std::string line(double x1, double y1, double x2, double y2, const std::string& rest) {
  return "<line x1=\"" + svg_coordinate(x1) + "\" y1=\"" + svg_coordinate(y1) + "\" x2=\"" + svg_coordinate(x2) +
         "\" y2=\"" + svg_coordinate(y2) + "\"" + rest + "/>\n";
}

std::string text(double x, double y, const std::string& attributes, const std::string& content) {
  return "<text x=\"" + svg_coordinate(x) + "\" y=\"" + svg_coordinate(y) + "\"" + attributes + ">" +
         xml_escape(content) + "</text>\n";
}

// Grid lines, ticks, the frame and the axis labels.
std::string axes(const Frame& f) {
  const double left = kLineChartLeft, top = kLineChartTop, plot_w = kLineChartPlotWidth,
               plot_h = kLineChartPlotHeight;
  const LineChart& chart = f.chart;
  std::string svg;
  const bool log_y = chart.log2_y || chart.log10_y;
  for (const double t : log_y ? log_ticks(f.y) : linear_ticks(f.y)) {
    const double y = f.py(t);
    svg += line(left, y, left + plot_w, y, " stroke=\"#dddddd\"");
    const std::string label = chart.log2_y ? "2^" + tick_label(t) : chart.log10_y ? "1e" + tick_label(t) : tick_label(t);
    svg += text(left - 6, y + 4, " text-anchor=\"end\"", label);
  }
  for (const double t : linear_ticks(f.x)) {
    const double x = f.px(t);
    svg += line(x, top + plot_h, x, top + plot_h + 5, " stroke=\"black\"");
    svg += text(x, top + plot_h + 18, " text-anchor=\"middle\"", tick_label(t));
  }
  svg += "<rect class=\"frame\" x=\"" + svg_coordinate(left) + "\" y=\"" + svg_coordinate(top) + "\" width=\"" +
         svg_coordinate(plot_w) + "\" height=\"" + svg_coordinate(plot_h) + "\" fill=\"none\" stroke=\"black\"/>\n";
  svg += text(left + plot_w / 2, top + plot_h + 36, " text-anchor=\"middle\"", chart.x_label);
  svg += "<text transform=\"translate(16 " + svg_coordinate(top + plot_h / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         xml_escape(chart.y_label) + "</text>\n";
  return svg;
}

// A marked point: an x-shaped cross, 4 pixels each way.
std::string cross(double px, double py) {
  const std::string a = svg_coordinate(px - 4), b = svg_coordinate(px + 4), c = svg_coordinate(py - 4),
                    d = svg_coordinate(py + 4);
  return "<path class=\"mark\" d=\"M" + a + "," + c + " L" + b + "," + d + " M" + a + "," + d + " L" + b + "," + c +
         "\"/>\n";
}

// Series i: its polylines, then its markers (on every point of a short
// series, on about a dozen of a long one, offset per series so that the
// markers of overlapping series do not hide each other).
std::string series_group(const Frame& f, std::size_t i) {
  const LineSeries& s = f.chart.series[i];
  const std::string colour = colour_of(i);
  const std::string dash = s.dashed ? " stroke-dasharray=\"6 4\"" : "";
  std::string svg = "<g class=\"series\" stroke=\"" + colour + "\" fill=\"none\" stroke-width=\"1.5\"" + dash +
                    ">\n<title>" + xml_escape(s.label) + "</title>\n";
  const auto runs = f.runs(s);
  std::size_t drawable = 0;
  for (const auto& run : runs) {
    drawable += run.size();
    if (run.size() < 2) continue;
    svg += "<polyline points=\"";
    for (std::size_t k = 0; k < run.size(); ++k) {
      if (k) svg += ' ';
      svg += svg_coordinate(run[k].first) + "," + svg_coordinate(run[k].second);
    }
    svg += "\"/>\n";
  }
  const std::size_t stride = drawable <= kLineChartAllMarkers ? 1 : (drawable + 11) / 12;
  const std::size_t phase = stride * i / std::max<std::size_t>(1, f.chart.series.size());
  std::size_t index = 0;
  for (const auto& run : runs)
    for (const auto& [x, y] : run) {
      if (run.size() == 1 || index % stride == phase) svg += svg_marker(marker_of(i), x, y, colour);
      ++index;
    }
  for (const auto& [x, y] : s.marked) {
    const std::optional<double> yy = f.drawn_y(y);
    if (!std::isfinite(x) || !yy) continue;
    svg += cross(f.px(x), f.py(*yy));
  }
  return svg + "</g>\n";
}

std::string legend_entry(const LineChart& chart, std::size_t i, double y) {
  const std::string colour = colour_of(i);
  const std::string dash = chart.series[i].dashed ? " stroke-dasharray=\"6 4\"" : "";
  const double left = kLineChartLeft;
  return line(left, y - 4, left + 28, y - 4, " stroke=\"" + colour + "\" stroke-width=\"2\"" + dash) +
         svg_marker(marker_of(i), left + 14, y - 4, colour) + text(left + 36, y, "", chart.series[i].label);
}

}  // namespace

std::string svg_line_chart(const LineChart& chart) {
  if (chart.log2_y && chart.log10_y) throw std::invalid_argument("svg_line_chart: log2_y and log10_y together");
  const Frame f = frame_of(chart);
  const double legend_top = kLineChartTop + kLineChartPlotHeight + 48;
  const double width = kLineChartLeft + kLineChartPlotWidth + 30;
  const double height = legend_top + 18.0 * static_cast<double>(chart.series.size()) + 8;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg_coordinate(width) + "\" height=\"" +
                    svg_coordinate(height) + "\" viewBox=\"0 0 " + svg_coordinate(width) + " " +
                    svg_coordinate(height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += text(kLineChartLeft, 24, " font-size=\"15\"", chart.title);
  svg += axes(f);
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    svg += series_group(f, i);
    svg += legend_entry(chart, i, legend_top + 18.0 * static_cast<double>(i));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace mpverify::report
