#include "swamping/census_json.h"

namespace mpverify::experiments {

using nlohmann::ordered_json;

const char* to_string(WeightClass c) {
  switch (c) {
    case WeightClass::zero: return "zero";
    case WeightClass::subnormal: return "subnormal";
    case WeightClass::normal: return "normal";
  }
  return "?";
}

const char* to_string(RatioRegion r) {
  switch (r) {
    case RatioRegion::below: return "below 2^p";
    case RatioRegion::between: return "2^p to 2^(p+1)";
    case RatioRegion::above: return "above 2^(p+1)";
  }
  return "?";
}

namespace {

ordered_json count_json(const CensusCount& c) { return {{"updates", c.updates}, {"lost", c.lost}}; }

ordered_json optional_json(const std::optional<std::uint64_t>& v) { return v ? ordered_json(*v) : ordered_json(); }

}  // namespace

ordered_json census_json(const UpdateCensus& census) {
  ordered_json j;
  j["format"] = census.format().name;
  j["precision"] = census.format().precision();
  j["total"] = count_json(census.total());
  ordered_json steps = ordered_json::array();
  for (const CensusStep& s : census.steps())
    steps.push_back({{"step", s.step},
                     {"updates", s.all.updates},
                     {"lost", s.all.lost},
                     {"ratio_at_least", s.ratio_at_least},
                     {"ratio_above", s.ratio_above},
                     {"ratio_above_twice", s.ratio_above_twice},
                     {"lost_grad_zero", s.lost_grad_zero},
                     {"lost_grad_underflowed", s.lost_grad_underflowed},
                     {"lost_grad_nonzero", s.lost_grad_nonzero},
                     {"unchanged", optional_json(s.unchanged)},
                     {"unchanged_but_counted_kept", optional_json(s.unchanged_but_counted_kept)},
                     {"changed_but_counted_lost", optional_json(s.changed_but_counted_lost)}});
  j["steps"] = steps;
  ordered_json regions = ordered_json::array();
  for (int c = 0; c < 3; ++c)
    for (int r = 0; r < 3; ++r) {
      const CensusCount& n = census.regions()[static_cast<std::size_t>(c)][static_cast<std::size_t>(r)];
      regions.push_back({{"weight", to_string(static_cast<WeightClass>(c))},
                         {"ratio", to_string(static_cast<RatioRegion>(r))},
                         {"updates", n.updates},
                         {"lost", n.lost}});
    }
  j["regions"] = regions;
  ordered_json profile = ordered_json::array();
  for (std::size_t part = 0; part < census.profile().bins.size(); ++part) {
    ordered_json bins = ordered_json::array();
    for (const CensusCount& b : census.profile().bins[part]) bins.push_back({b.updates, b.lost});
    profile.push_back(bins);
  }
  j["ratio_profile"] = {{"first_log2", census.profile().first_log2},
                        {"bins_per_octave", kBinsPerOctave},
                        {"binade_parts", kBinadeParts},
                        {"bins", profile}};
  ordered_json parameters = ordered_json::object();
  for (const auto& [name, p] : census.parameters())
    parameters[name] = {{"updates", p.count.updates},
                        {"lost", p.count.lost},
                        {"lost_grad_zero", p.lost_grad_zero},
                        {"lost_grad_underflowed", p.lost_grad_underflowed}};
  j["parameters"] = parameters;
  return j;
}

}  // namespace mpverify::experiments
