// An UpdateCensus as JSON (census.json next to each run of the swamping
// experiment, and its --json output): the per-step counts, the weight class x
// ratio region table, the ratio profile and the per-parameter counts.
#pragma once

#include <nlohmann/json.hpp>

#include "swamping/update_census.h"

namespace mpverify::experiments {

nlohmann::ordered_json census_json(const UpdateCensus& census);

const char* to_string(WeightClass c);   // "zero", "subnormal", "normal"
const char* to_string(RatioRegion r);   // "below 2^p", "2^p to 2^(p+1)", "above 2^(p+1)"

}  // namespace mpverify::experiments
