// A run directory's per-step records (steps.jsonl, histograms.jsonl) turned
// into what figures and tables draw: one value per step, line-chart series,
// summed exponent histograms.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "emu/exponent_histogram.h"
#include "report/svg_line_chart.h"

namespace mpverify::report {

// steps[i][key] for every step, NaN where the key is missing or not a number
// (a recorder that was off, a null rate).
std::vector<double> step_values(const std::vector<nlohmann::json>& steps, std::string_view key);

// A line series with x = the step index.
LineSeries series_of(const std::string& label, const std::vector<double>& values, bool dashed = false);

// The mean of the finite values; NaN when there is none.
double finite_mean(const std::vector<double>& values);

// The exponent histograms of one step (lines of histograms.jsonl) whose
// "role" is one of `roles` ("weight_grad", "activation_grad", "activation",
// "weight", "update"), summed. A line without "step" counts as step 0 and one without "role" matches no
// role. Throws std::invalid_argument naming the line for a line that is not an object, a "step" that is
// not a non-negative integer or a "role" that is not a string, and for a malformed histogram
// (record::histogram_from_json).
emu::ExponentHistogram step_histogram(const std::vector<nlohmann::json>& histogram_lines, std::size_t step,
                                      std::initializer_list<std::string_view> roles);

}  // namespace mpverify::report
