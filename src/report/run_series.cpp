#include "report/run_series.h"

#include <algorithm>
#include <cmath>

#include "record/histogram_json.h"

namespace mpverify::report {

using nlohmann::json;

std::vector<double> step_values(const std::vector<json>& steps, std::string_view key) {
  std::vector<double> values;
  values.reserve(steps.size());
  for (const json& s : steps) {
    const auto it = s.find(key);
    values.push_back(it != s.end() && it->is_number() ? it->get<double>() : std::nan(""));
  }
  return values;
}

LineSeries series_of(const std::string& label, const std::vector<double>& values, bool dashed) {
  LineSeries s{label, {}, dashed};
  for (std::size_t i = 0; i < values.size(); ++i) s.points.emplace_back(static_cast<double>(i), values[i]);
  return s;
}

double finite_mean(const std::vector<double>& values) {
  double sum = 0;
  std::size_t n = 0;
  for (const double x : values)
    if (std::isfinite(x)) {
      sum += x;
      ++n;
    }
  return n ? sum / static_cast<double>(n) : std::nan("");
}

emu::ExponentHistogram step_histogram(const std::vector<json>& histogram_lines, std::size_t step,
                                      std::initializer_list<std::string_view> roles) {
  emu::ExponentHistogram h;
  for (const json& line : histogram_lines) {
    if (line.value("step", std::size_t{0}) != step) continue;
    const std::string role = line.value("role", "");
    if (std::find(roles.begin(), roles.end(), role) == roles.end()) continue;
    h += record::histogram_from_json(line);
  }
  return h;
}

}  // namespace mpverify::report
