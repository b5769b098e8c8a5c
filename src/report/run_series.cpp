#include "report/run_series.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

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
  for (std::size_t i = 0; i < histogram_lines.size(); ++i) {
    const json& line = histogram_lines[i];
    // Checked before reading: json::value() throws nlohmann's own type_error on a line that is not an
    // object or a key of another type, and converting a step of 1e300 to an integer is undefined.
    const auto bad = [&](const std::string& what) {
      throw std::invalid_argument("histograms line " + std::to_string(i + 1) + ": " + what);
    };
    if (!line.is_object()) bad("expected a JSON object, got " + std::string(line.type_name()));
    const auto s = line.find("step");
    const auto r = line.find("role");
    if (s != line.end() && !s->is_number_unsigned()) bad("\"step\" is not a non-negative integer: " + s->dump());
    if (r != line.end() && !r->is_string()) bad("\"role\" is not a string: " + r->dump());
    if ((s == line.end() ? 0 : s->get<std::size_t>()) != step) continue;
    const std::string role = r == line.end() ? "" : r->get<std::string>();
    if (std::find(roles.begin(), roles.end(), role) == roles.end()) continue;
    h += record::histogram_from_json(line);
  }
  return h;
}

}  // namespace mpverify::report
