// The compact JSON of an exponent histogram and of a format's thresholds, as
// histograms.jsonl holds them.
//
// A histogram has 277 exponent bins, almost all empty for any one tensor, so
// only the span from the lowest to the highest non-empty bin is written:
//   {"zeros": 3, "nans": 0, "infinities": 0, "below_range": 0, "above_range": 0,
//    "first_exponent": -20, "counts": [5, 0, 7]}
// means 5 values in [2^-20, 2^-19), none in [2^-19, 2^-18), 7 in [2^-18, 2^-17).
// An empty histogram (no value in any bin) has "first_exponent": null and
// "counts": []. Counts are JSON unsigned integers (exact up to 2^64 - 1 in
// nlohmann::json; a reader in a language with double-only numbers loses
// exactness above 2^53, far beyond any tensor here).
//
// The thresholds are the marks to draw on that axis:
//   {"min_subnormal": 5.960464477539063e-08, "min_normal": 6.103515625e-05, "max_finite": 65504.0,
//    "min_subnormal_exponent": -24, "min_normal_exponent": -14, "max_finite_exponent": 15}
// Doubles are written with 17 significant digits, so they read back exactly.
//
// The readers ignore keys they do not know, so a histograms.jsonl line can
// hold a histogram's keys next to its own ("step", "layer", ...). Malformed
// input throws std::invalid_argument saying which key is wrong and why.
#pragma once

#include <cstdint>
#include <span>

#include <nlohmann/json.hpp>

#include "emu/exponent_histogram.h"

namespace mpverify::record {

// The bins from the first to the last non-zero one, and the exponent of the first (counts empty, exponent 0
// when every bin is zero): what histograms.jsonl's "counts" and "first_exponent" hold.
struct OccupiedBins {
  std::span<const std::uint64_t> counts;
  int first_exponent = 0;
};
OccupiedBins occupied_bins(const emu::ExponentHistogram& h);

nlohmann::json histogram_to_json(const emu::ExponentHistogram& histogram);
// Accepts zero counts at either end of "counts" (a non-canonical but
// unambiguous encoding); rejects exponents outside the histogram's range.
emu::ExponentHistogram histogram_from_json(const nlohmann::json& j);

nlohmann::json thresholds_to_json(const emu::FormatThresholds& thresholds);
// Checks what format_thresholds guarantees: finite positive values in
// increasing order (min_subnormal <= min_normal <= max_finite), each exponent
// the floor(log2) of its value.
emu::FormatThresholds thresholds_from_json(const nlohmann::json& j);

}  // namespace mpverify::record
