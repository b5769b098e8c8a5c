#include "formats/rounding.h"

namespace mpverify::formats {

std::string_view to_string(Rounding r) {
  switch (r) {
    case Rounding::nearest_even: return "rne";
    case Rounding::toward_zero: return "rtz";
    case Rounding::up: return "up";
    case Rounding::down: return "down";
    case Rounding::nearest_away: return "rna";
    case Rounding::odd: return "odd";
    case Rounding::stochastic: return "stochastic";
  }
  return "?";
}

std::optional<Rounding> parse_rounding(std::string_view name) {
  for (Rounding r : all_roundings) {
    if (to_string(r) == name) return r;
  }
  return std::nullopt;
}

}  // namespace mpverify::formats
