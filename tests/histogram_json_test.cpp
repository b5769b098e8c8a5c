// The JSON of exponent histograms and format thresholds: hand-written
// encodings of hand-filled histograms, round trips through the text form, and
// each malformed input rejected with its reason.
#include "record/histogram_json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>

#include "emu/exponent_histogram.h"
#include "formats/format.h"

namespace {

using namespace mpverify;
using emu::ExponentHistogram;
using nlohmann::json;

// The round trip goes through the text, as histograms.jsonl does.
ExponentHistogram through_text(const ExponentHistogram& h) {
  return record::histogram_from_json(json::parse(record::histogram_to_json(h).dump()));
}

// The reason std::invalid_argument gives, or "" when nothing was thrown.
std::string rejection(const json& j) {
  try {
    record::histogram_from_json(j);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(HistogramJson, EncodesTheSpanOfNonEmptyBins) {
  ExponentHistogram h;
  // 2^-20 and 1.5 * 2^-20 lie in the bin of -20; 2^-18 in -18; nothing in -19.
  h.add(0x1p-20);
  h.add(0x1.8p-20);
  h.add(0x1p-18);
  h.add(0.0);
  h.add(-0.0);
  h.add(std::numeric_limits<double>::quiet_NaN());
  h.add(-std::numeric_limits<double>::infinity());
  h.add(0x1p-160);  // below 2^-149
  h.add(0x1p200);   // above float's range
  h.add(0x1p201);
  const json expected = json::parse(R"({"zeros": 2, "nans": 1, "infinities": 1, "below_range": 1,
                                        "above_range": 2, "first_exponent": -20, "counts": [2, 0, 1]})");
  EXPECT_EQ(record::histogram_to_json(h), expected);
  EXPECT_EQ(record::histogram_from_json(expected), h);
}

TEST(HistogramJson, EmptyHistogramHasNullFirstExponent) {
  ExponentHistogram h;
  h.add(0.0);
  const json j = record::histogram_to_json(h);
  EXPECT_TRUE(j["first_exponent"].is_null());
  EXPECT_EQ(j["counts"], json::array());
  EXPECT_EQ(j["zeros"], 1);
  EXPECT_EQ(through_text(h), h);
  EXPECT_EQ(through_text(ExponentHistogram{}), ExponentHistogram{});
}

TEST(HistogramJson, EdgeBinsAndLargeCountsRoundTrip) {
  ExponentHistogram h;
  h.at(ExponentHistogram::min_exponent) = 1;
  h.at(ExponentHistogram::max_exponent) = std::numeric_limits<std::uint64_t>::max();  // exact as unsigned
  const json j = record::histogram_to_json(h);
  EXPECT_EQ(j["first_exponent"], ExponentHistogram::min_exponent);
  EXPECT_EQ(j["counts"].size(), ExponentHistogram::exponent_bins);
  EXPECT_EQ(through_text(h), h);

  ExponentHistogram single;
  single.at(0) = 7;
  EXPECT_EQ(record::histogram_to_json(single)["counts"], json::array({7}));
  EXPECT_EQ(through_text(single), single);
}

TEST(HistogramJson, RandomHistogramsRoundTrip) {
  std::mt19937_64 rng(20240611);
  std::uniform_int_distribution<int> exponent(ExponentHistogram::min_exponent - 10,
                                              ExponentHistogram::max_exponent + 10);
  std::uniform_int_distribution<int> kind(0, 9);
  for (int trial = 0; trial < 200; ++trial) {
    ExponentHistogram h;
    const int n = trial % 50;
    for (int k = 0; k < n; ++k) {
      switch (kind(rng)) {
        case 0:
          h.add(0.0);
          break;
        case 1:
          h.add(std::numeric_limits<double>::quiet_NaN());
          break;
        case 2:
          h.add(std::numeric_limits<double>::infinity());
          break;
        default:
          h.add(std::ldexp(1.25, exponent(rng)));
          break;  // lands in/below/above the bins
      }
    }
    ASSERT_EQ(through_text(h), h) << record::histogram_to_json(h).dump();
  }
}

TEST(HistogramJson, ZeroCountsAtTheEndsAndExtraKeysAreAccepted) {
  // Not what the writer produces, but unambiguous: bins -3..-1 with counts 0, 4, 0.
  const json j = json::parse(R"({"step": 7, "layer": "fc1", "zeros": 0, "nans": 0, "infinities": 0,
                                 "below_range": 0, "above_range": 0, "first_exponent": -3, "counts": [0, 4, 0]})");
  ExponentHistogram expected;
  expected.at(-2) = 4;
  EXPECT_EQ(record::histogram_from_json(j), expected);
}

TEST(HistogramJson, MalformedInputIsRejectedWithTheReason) {
  const json good = record::histogram_to_json(ExponentHistogram{});
  struct Case {
    const char* change;  // JSON merged into a valid empty histogram
    const char* reason;  // a piece of the message
  } cases[] = {
      {R"({"zeros": -1})", "\"zeros\""},
      {R"({"nans": 1.5})", "\"nans\""},
      {R"({"infinities": "3"})", "\"infinities\""},
      {R"({"counts": [1]})", "must be empty"},  // first_exponent stays null (merge_patch would erase a null)
      {R"({"first_exponent": 0, "counts": []})", "is empty"},
      {R"({"first_exponent": 0.5, "counts": [1]})", "\"first_exponent\""},
      {R"({"first_exponent": -150, "counts": [1]})", "-150..-150 leave [-149, 127]"},
      {R"({"first_exponent": 126, "counts": [1, 2, 3]})", "126..128 leave"},
      {R"({"first_exponent": 0, "counts": [1, -2]})", "\"counts\"[1]"},
      {R"({"first_exponent": 0, "counts": {"0": 1}})", "expected an array"},
  };
  for (const Case& c : cases) {
    json j = good;
    j.merge_patch(json::parse(c.change));
    const std::string why = rejection(j);
    EXPECT_NE(why.find(c.reason), std::string::npos) << c.change << " -> '" << why << "'";
  }
  for (const char* key : {"zeros", "nans", "infinities", "below_range", "above_range", "first_exponent", "counts"}) {
    json j = good;
    j.erase(key);
    EXPECT_NE(rejection(j).find(std::string("missing key \"") + key + "\""), std::string::npos) << key;
  }
  EXPECT_NE(rejection(json::array()).find("expected a JSON object"), std::string::npos);
}

TEST(ThresholdsJson, Fp16ByHand) {
  const auto t = emu::format_thresholds(formats::parse_format("fp16"));
  const json j = json::parse(record::thresholds_to_json(t).dump());
  // fp16: 2^-24, 2^-14, 65504 = (2 - 2^-10) * 2^15.
  EXPECT_EQ(j["min_subnormal"].get<double>(), 0x1p-24);
  EXPECT_EQ(j["min_normal"].get<double>(), 0x1p-14);
  EXPECT_EQ(j["max_finite"].get<double>(), 65504.0);
  EXPECT_EQ(j["min_subnormal_exponent"], -24);
  EXPECT_EQ(j["min_normal_exponent"], -14);
  EXPECT_EQ(j["max_finite_exponent"], 15);
}

TEST(ThresholdsJson, EveryPresetRoundTripsExactly) {
  for (const char* name :
       {"fp16", "bf16", "tf32", "fp8-e4m3", "fp8-e5m2", "fp8-e4m3fnuz", "fp8-e5m2fnuz", "fp32", "e3m2"}) {
    const auto t = emu::format_thresholds(formats::parse_format(name));
    const auto back = record::thresholds_from_json(json::parse(record::thresholds_to_json(t).dump()));
    EXPECT_EQ(back.min_subnormal, t.min_subnormal) << name;
    EXPECT_EQ(back.min_normal, t.min_normal) << name;
    EXPECT_EQ(back.max_finite, t.max_finite) << name;
    EXPECT_EQ(back.min_subnormal_exponent, t.min_subnormal_exponent) << name;
    EXPECT_EQ(back.min_normal_exponent, t.min_normal_exponent) << name;
    EXPECT_EQ(back.max_finite_exponent, t.max_finite_exponent) << name;
  }
}

TEST(ThresholdsJson, MalformedInputIsRejectedWithTheReason) {
  const json good = record::thresholds_to_json(emu::format_thresholds(formats::parse_format("bf16")));
  struct Case {
    const char* change;
    const char* reason;
  } cases[] = {
      {R"({"min_normal": "x"})", "\"min_normal\": expected a number"},
      {R"({"max_finite": -1.0})", "\"max_finite\": expected a finite positive"},
      {R"({"min_subnormal": 0})", "\"min_subnormal\": expected a finite positive"},
      {R"({"min_normal_exponent": 1.5})", "\"min_normal_exponent\": expected an integer"},
      {R"({"max_finite_exponent": 126})",
       "\"max_finite_exponent\": is 126 but its value lies in the bin of exponent 127"},
      {R"({"min_subnormal": 1e300})", "min_subnormal <= min_normal <= max_finite"},
  };
  for (const Case& c : cases) {
    json j = good;
    j.merge_patch(json::parse(c.change));
    std::string why;
    try {
      record::thresholds_from_json(j);
    } catch (const std::invalid_argument& e) {
      why = e.what();
    }
    EXPECT_NE(why.find(c.reason), std::string::npos) << c.change << " -> '" << why << "'";
  }
  json missing = good;
  missing.erase("min_normal");
  EXPECT_THROW(record::thresholds_from_json(missing), std::invalid_argument);
}

}  // namespace
