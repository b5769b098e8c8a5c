// A heat map as a standalone SVG: one row per series (e.g. a layer's tensor),
// one column per step (or group of steps), each cell coloured by its value on
// a log scale (a rate: 10^log10_min and below the palest colour, 1 the
// darkest), an exact 0 light grey and a missing value left blank, so that
// "nothing lost" and "not recorded" are told apart from "lost a little".
// Each cell carries a <title> with its step range and value. The output
// depends only on the inputs (no clock), so the same data gives the same file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mpverify::report {

struct HeatMapRow {
  std::string label;
  std::vector<std::optional<double>> values;  // one per column; nullopt: not recorded
};

struct HeatMapColumn {
  std::int64_t first_step = 0, last_step = 0;  // the steps the column pools
};

struct HeatMap {
  std::string title, value_name = "rate";
  std::vector<HeatMapColumn> columns;
  std::vector<HeatMapRow> rows;
  int log10_min = -6;  // the palest decade
};

// std::invalid_argument when a row's values do not match the columns, or a value is negative or not finite.
std::string svg_heat_map(const HeatMap& map);

// The colour of a value v > 0 on the map's scale: "#rrggbb", from the palest (v <= 10^log10_min) to the
// darkest (v >= 1), interpolated in log10 v between fixed stops.
std::string heat_colour(double v, int log10_min);

}  // namespace mpverify::report
