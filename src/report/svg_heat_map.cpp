#include "report/svg_heat_map.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "report/svg_number.h"
#include "report/xml_escape.h"

namespace mpverify::report {

// Named, not anonymous: the module compiles in unity batches beside the other figures' helpers.
namespace heat_map_impl {

constexpr double kLabelWidth = 190, kPlotWidth = 700, kRowHeight = 14, kTop = 40, kFontSize = 11;
constexpr const char* kZeroColour = "#e8e8e8";

// A sequential palette, pale yellow to dark red (ColorBrewer's YlOrRd, 5 stops).
constexpr std::array<std::array<int, 3>, 5> kStops = {{{255, 255, 204}, {254, 217, 118}, {253, 141, 60},
                                                      {227, 26, 28}, {128, 0, 38}}};

std::string value_text(double v) {
  char t[32];
  std::snprintf(t, sizeof t, "%.3g", v);
  return t;
}

std::string step_range(const HeatMapColumn& c) {
  return c.first_step == c.last_step ? "step " + std::to_string(c.first_step)
                                     : "steps " + std::to_string(c.first_step) + "-" + std::to_string(c.last_step);
}

void check(const HeatMap& map) {
  for (const HeatMapRow& row : map.rows) {
    if (row.values.size() != map.columns.size())
      throw std::invalid_argument("heat map row '" + row.label + "': " + std::to_string(row.values.size()) +
                                  " values for " + std::to_string(map.columns.size()) + " columns");
    for (const auto& v : row.values)
      if (v && !(std::isfinite(*v) && *v >= 0))
        throw std::invalid_argument("heat map row '" + row.label + "': a value is negative or not finite");
  }
}

std::string legend(const HeatMap& map, double y) {
  std::string svg = "<text x=\"" + svg_coordinate(kLabelWidth) + "\" y=\"" + svg_coordinate(y + 10) + "\">" +
                    xml_escape(map.value_name) + ":</text>\n";
  double x = kLabelWidth + 90;
  const auto box = [&](const std::string& colour, const std::string& label) {
    svg += "<rect x=\"" + svg_coordinate(x) + "\" y=\"" + svg_coordinate(y) + "\" width=\"12\" height=\"12\" fill=\"" +
           colour + "\" stroke=\"#999999\" stroke-width=\"0.5\"/>\n";
    svg += "<text x=\"" + svg_coordinate(x + 15) + "\" y=\"" + svg_coordinate(y + 10) + "\">" + xml_escape(label) +
           "</text>\n";
    x += 30 + 6.6 * static_cast<double>(label.size());
  };
  box(kZeroColour, "0");
  for (int d = map.log10_min; d <= 0; ++d) box(heat_colour(std::pow(10.0, d), map.log10_min), "1e" + std::to_string(d));
  return svg;
}

}  // namespace heat_map_impl

std::string heat_colour(double v, int log10_min) {
  using heat_map_impl::kStops;
  const double t = std::clamp((std::log10(v) - log10_min) / -static_cast<double>(log10_min), 0.0, 1.0);
  const double at = t * static_cast<double>(kStops.size() - 1);
  const std::size_t i = std::min(static_cast<std::size_t>(at), kStops.size() - 2);
  const double f = at - static_cast<double>(i);
  char colour[8];
  int rgb[3];
  for (int c = 0; c < 3; ++c)
    rgb[c] = static_cast<int>(std::lround(kStops[i][c] + f * (kStops[i + 1][c] - kStops[i][c])));
  std::snprintf(colour, sizeof colour, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return colour;
}

std::string svg_heat_map(const HeatMap& map) {
  using namespace heat_map_impl;
  check(map);
  const double columns = static_cast<double>(std::max<std::size_t>(map.columns.size(), 1));
  const double cell_w = std::min(12.0, kPlotWidth / columns);
  const double plot_h = kRowHeight * static_cast<double>(map.rows.size());
  const double height = kTop + plot_h + 70, width = kLabelWidth + cell_w * columns + 20;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg_coordinate(std::max(width, 900.0)) +
                    "\" height=\"" + svg_coordinate(height) + "\" font-family=\"sans-serif\" font-size=\"" +
                    tick_label(kFontSize) + "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"10\" y=\"24\" font-size=\"15\">" + xml_escape(map.title) + "</text>\n";
  for (std::size_t r = 0; r < map.rows.size(); ++r) {
    const double y = kTop + kRowHeight * static_cast<double>(r);
    svg += "<text x=\"" + svg_coordinate(kLabelWidth - 6) + "\" y=\"" + svg_coordinate(y + kRowHeight - 3) +
           "\" text-anchor=\"end\">" + xml_escape(map.rows[r].label) + "</text>\n";
    for (std::size_t c = 0; c < map.columns.size(); ++c) {
      const auto& v = map.rows[r].values[c];
      if (!v) continue;
      svg += "<rect x=\"" + svg_coordinate(kLabelWidth + cell_w * static_cast<double>(c)) + "\" y=\"" +
             svg_coordinate(y) + "\" width=\"" + svg_coordinate(cell_w) + "\" height=\"" +
             svg_coordinate(kRowHeight - 1) + "\" fill=\"" + (*v == 0 ? std::string(kZeroColour) : heat_colour(*v, map.log10_min)) +
             "\"><title>" + xml_escape(map.rows[r].label + ", " + step_range(map.columns[c]) + ": " + value_text(*v)) +
             "</title></rect>\n";
    }
  }
  const double axis = kTop + plot_h + 14;
  if (!map.columns.empty()) {
    svg += "<text x=\"" + svg_coordinate(kLabelWidth) + "\" y=\"" + svg_coordinate(axis) + "\">step " +
           std::to_string(map.columns.front().first_step) + "</text>\n";
    svg += "<text x=\"" + svg_coordinate(kLabelWidth + cell_w * columns) + "\" y=\"" + svg_coordinate(axis) +
           "\" text-anchor=\"end\">step " + std::to_string(map.columns.back().last_step) + "</text>\n";
  }
  svg += legend(map, axis + 16);
  return svg + "</svg>\n";
}

}  // namespace mpverify::report
