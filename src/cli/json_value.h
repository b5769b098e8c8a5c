// JSON for floating-point values: a number, or the strings "inf", "-inf",
// "nan" that JSON itself cannot hold.
#pragma once

#include <cmath>

#include <nlohmann/json.hpp>

namespace mpverify::cli {

inline nlohmann::json json_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

}  // namespace mpverify::cli
