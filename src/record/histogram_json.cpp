#include "record/histogram_json.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace mpverify::record {

namespace {

using Histogram = emu::ExponentHistogram;

[[noreturn]] void malformed(const std::string& what, const std::string& reason) {
  std::string message = what;
  message += ": ";
  message += reason;
  throw std::invalid_argument(message);
}

const nlohmann::json& member(const nlohmann::json& j, const char* what, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) {
    std::string reason = "missing key \"";
    reason += key;
    reason += "\"";
    malformed(what, reason);
  }
  return *it;
}

std::uint64_t count_at(const nlohmann::json& value, const std::string& where) {
  // nlohmann parses a non-negative integer literal as unsigned, a negative one
  // as signed and anything with a point or exponent as a float.
  if (!value.is_number_unsigned()) {
    std::string reason = "expected a count (an integer >= 0), got ";
    reason += value.dump();
    malformed(where, reason);
  }
  return value.get<std::uint64_t>();
}

std::uint64_t count_member(const nlohmann::json& j, const char* key) {
  std::string where = "histogram \"";
  where += key;
  where += "\"";
  return count_at(member(j, "histogram", key), where);
}

int integer_member(const nlohmann::json& j, const char* what, const char* key) {
  const nlohmann::json& value = member(j, what, key);
  std::string where = what;
  where += " \"";
  where += key;
  where += "\"";
  if (!value.is_number_integer()) {
    std::string reason = "expected an integer, got ";
    reason += value.dump();
    malformed(where, reason);
  }
  const std::int64_t v = value.get<std::int64_t>();
  if (v < -100000 || v > 100000) malformed(where, "integer " + std::to_string(v) + " is far outside any exponent");
  return static_cast<int>(v);
}

double positive_member(const nlohmann::json& j, const char* key) {
  const nlohmann::json& value = member(j, "thresholds", key);
  std::string where = "thresholds \"";
  where += key;
  where += "\"";
  if (!value.is_number()) {
    std::string reason = "expected a number, got ";
    reason += value.dump();
    malformed(where, reason);
  }
  const double v = value.get<double>();
  if (!(v > 0) || !std::isfinite(v)) malformed(where, "expected a finite positive number, got " + value.dump());
  return v;
}

}  // namespace

OccupiedBins occupied_bins(const Histogram& h) {
  std::size_t first = h.bins.size(), last = 0;
  for (std::size_t i = 0; i < h.bins.size(); ++i) {
    if (h.bins[i] == 0) continue;
    if (first == h.bins.size()) first = i;
    last = i;
  }
  if (first == h.bins.size()) return {};
  return {std::span<const std::uint64_t>(h.bins.data() + first, last - first + 1),
          static_cast<int>(first) + Histogram::min_exponent};
}

nlohmann::json histogram_to_json(const Histogram& h) {
  const OccupiedBins bins = occupied_bins(h);
  nlohmann::json counts = nlohmann::json::array();
  nlohmann::json first_exponent = nullptr;
  if (!bins.counts.empty()) {
    first_exponent = bins.first_exponent;
    for (const std::uint64_t n : bins.counts) counts.push_back(n);
  }
  return {{"zeros", h.zeros},
          {"nans", h.nans},
          {"infinities", h.infinities},
          {"below_range", h.below_range},
          {"above_range", h.above_range},
          {"first_exponent", std::move(first_exponent)},
          {"counts", std::move(counts)}};
}

Histogram histogram_from_json(const nlohmann::json& j) {
  if (!j.is_object()) malformed("histogram", "expected a JSON object, got " + std::string(j.type_name()));
  Histogram h;
  h.zeros = count_member(j, "zeros");
  h.nans = count_member(j, "nans");
  h.infinities = count_member(j, "infinities");
  h.below_range = count_member(j, "below_range");
  h.above_range = count_member(j, "above_range");

  const nlohmann::json& counts = member(j, "histogram", "counts");
  if (!counts.is_array()) malformed("histogram \"counts\"", "expected an array, got " + counts.dump());
  const nlohmann::json& first = member(j, "histogram", "first_exponent");
  if (first.is_null()) {
    if (!counts.empty())
      malformed("histogram \"counts\"", "must be empty when \"first_exponent\" is null (an empty histogram)");
    return h;
  }
  const int e0 = integer_member(j, "histogram", "first_exponent");
  if (counts.empty()) malformed("histogram \"counts\"", "is empty but \"first_exponent\" is not null (write null)");
  const std::int64_t e1 = e0 + static_cast<std::int64_t>(counts.size()) - 1;
  if (e0 < Histogram::min_exponent || e1 > Histogram::max_exponent) {
    std::string reason = "bins of exponents " + std::to_string(e0) + ".." + std::to_string(e1) + " leave [";
    reason += std::to_string(Histogram::min_exponent) + ", " + std::to_string(Histogram::max_exponent) + "]";
    malformed("histogram \"first_exponent\"", reason);
  }
  for (std::size_t i = 0; i < counts.size(); ++i) {
    std::string where = "histogram \"counts\"[" + std::to_string(i) + "]";
    h.bins[static_cast<std::size_t>(e0 - Histogram::min_exponent) + i] = count_at(counts[i], where);
  }
  return h;
}

nlohmann::json thresholds_to_json(const emu::FormatThresholds& t) {
  return {{"min_subnormal", t.min_subnormal},
          {"min_normal", t.min_normal},
          {"max_finite", t.max_finite},
          {"min_subnormal_exponent", t.min_subnormal_exponent},
          {"min_normal_exponent", t.min_normal_exponent},
          {"max_finite_exponent", t.max_finite_exponent}};
}

emu::FormatThresholds thresholds_from_json(const nlohmann::json& j) {
  if (!j.is_object()) malformed("thresholds", "expected a JSON object, got " + std::string(j.type_name()));
  emu::FormatThresholds t;
  t.min_subnormal = positive_member(j, "min_subnormal");
  t.min_normal = positive_member(j, "min_normal");
  t.max_finite = positive_member(j, "max_finite");
  t.min_subnormal_exponent = integer_member(j, "thresholds", "min_subnormal_exponent");
  t.min_normal_exponent = integer_member(j, "thresholds", "min_normal_exponent");
  t.max_finite_exponent = integer_member(j, "thresholds", "max_finite_exponent");
  if (!(t.min_subnormal <= t.min_normal && t.min_normal <= t.max_finite))
    malformed("thresholds", "expected min_subnormal <= min_normal <= max_finite");
  const struct {
    const char* key;
    double value;
    int exponent;
  } marks[] = {{"min_subnormal_exponent", t.min_subnormal, t.min_subnormal_exponent},
               {"min_normal_exponent", t.min_normal, t.min_normal_exponent},
               {"max_finite_exponent", t.max_finite, t.max_finite_exponent}};
  for (const auto& m : marks)
    if (emu::floor_log2(m.value) != m.exponent) {
      std::string reason = "is " + std::to_string(m.exponent) + " but its value lies in the bin of exponent ";
      reason += std::to_string(emu::floor_log2(m.value));
      malformed(std::string("thresholds \"") + m.key + "\"", reason);
    }
  return t;
}

}  // namespace mpverify::record
