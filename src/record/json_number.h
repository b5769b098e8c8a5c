// A number for the run files: JSON has no inf or NaN, so a non-finite value is written null (the readers
// take null as "not a number" wherever a value may be non-finite).
#pragma once

#include <cmath>

#include <nlohmann/json.hpp>

namespace mpverify::record {

inline nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace mpverify::record
