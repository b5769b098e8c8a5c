// compare::compare_runs on small hand-built runs: every field against values
// worked out by hand, alignment by step with steps missing on either side,
// non-finite losses, the tolerance gate, tensors, configs, and each malformed
// record rejected with its file, line and key.
//
// Losses are sums of powers of two (1.5, 1.25, ...) so that B - A, and the
// means of such differences, are exact in double: the checks are equalities
// except where a division by a non-power of two (1/6) is involved, where
// EXPECT_DOUBLE_EQ (4 ulps) covers the one rounding of that division.
#include "compare/run_comparison.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace mpverify;
using compare::RunRecords;
using nlohmann::json;

// One steps.jsonl record; `loss` may be null or a string.
json step(std::int64_t s, json loss, double scale = 1.0, bool skipped = false, double underflow = 0, double lost = 0) {
  return {{"step", s},          {"loss", std::move(loss)},     {"scale", scale},
          {"skipped", skipped}, {"underflow_rate", underflow}, {"lost_update_rate", lost}};
}

RunRecords run(std::string name, std::vector<json> steps) { return {std::move(name), std::move(steps), {}, {}}; }

// The message of the std::invalid_argument compare_runs throws, "" if none.
std::string rejection(const RunRecords& a, const RunRecords& b, const compare::RunComparisonOptions& o = {}) {
  try {
    compare::compare_runs(a, b, o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(RunComparison, AlignsByStepAndComputesEveryField) {
  // A has steps 0..3 (out of order in the file), B has 1..5: common 1, 2, 3.
  const RunRecords a =
      run("a", {step(0, 2.0, 1, true), step(2, 1.25, 1, false, 0.0, 0.5), step(1, 1.5, 1, false, 0.125), step(3, 1.0)});
  const RunRecords b = run("b", {step(1, 1.75, 65536, false, 0.25, 0.0625), step(2, 1.0, 32768, true, 0.5, 0.75),
                                 step(3, 1.0, 32768), step(4, 0.5, 32768), step(5, 0.5, 32768, true)});
  const auto c = compare::compare_runs(a, b);
  ASSERT_EQ(c.steps.size(), 3u);
  EXPECT_EQ(c.steps[0].step, 1);
  EXPECT_EQ(c.steps[1].step, 2);
  EXPECT_EQ(c.steps[2].step, 3);

  const auto& s1 = c.steps[0];
  EXPECT_EQ(s1.loss_a, 1.5);
  EXPECT_EQ(s1.loss_b, 1.75);
  EXPECT_EQ(s1.loss_difference, 0.25);
  ASSERT_TRUE(s1.relative_difference);
  EXPECT_DOUBLE_EQ(*s1.relative_difference, 1.0 / 6.0);  // 0.25 / 1.5
  EXPECT_EQ(s1.scale_a, 1.0);
  EXPECT_EQ(s1.scale_b, 65536.0);
  EXPECT_FALSE(s1.skipped_a);
  EXPECT_FALSE(s1.skipped_b);
  EXPECT_EQ(s1.underflow_rate_a, 0.125);
  EXPECT_EQ(s1.underflow_rate_b, 0.25);
  EXPECT_EQ(s1.lost_update_rate_a, 0.0);
  EXPECT_EQ(s1.lost_update_rate_b, 0.0625);
  EXPECT_FALSE(s1.exceeds_tolerance);

  const auto& s2 = c.steps[1];
  EXPECT_EQ(s2.loss_difference, -0.25);
  EXPECT_EQ(s2.relative_difference, -0.2);  // -0.25 / 1.25: the same one rounding of 1/5 on both sides
  EXPECT_TRUE(s2.skipped_b);
  EXPECT_EQ(s2.scale_b, 32768.0);
  EXPECT_EQ(s2.lost_update_rate_a, 0.5);
  EXPECT_EQ(s2.underflow_rate_b, 0.5);
  EXPECT_EQ(c.steps[2].loss_difference, 0.0);
  EXPECT_EQ(c.steps[2].relative_difference, 0.0);

  const auto& s = c.summary;
  EXPECT_EQ(s.loss_key, "loss");
  EXPECT_EQ(s.steps_a, 4u);
  EXPECT_EQ(s.steps_b, 5u);
  EXPECT_EQ(s.common_steps, 3u);
  EXPECT_EQ(s.steps_only_in_a, 1u);
  EXPECT_EQ(s.first_step_only_in_a, 0);
  EXPECT_EQ(s.steps_only_in_b, 2u);
  EXPECT_EQ(s.first_step_only_in_b, 4);
  EXPECT_EQ(s.nonfinite_loss_steps_a, 0u);
  EXPECT_EQ(s.nonfinite_loss_steps_b, 0u);
  EXPECT_EQ(s.steps_with_loss_difference, 3u);
  EXPECT_EQ(s.max_abs_loss_difference, 0.25);  // at steps 1 and 2: the first is reported
  EXPECT_EQ(s.max_abs_loss_difference_step, 1);
  EXPECT_EQ(s.tail_steps, 1u);  // ceil(3 / 10)
  EXPECT_EQ(s.tail_first_step, 3);
  EXPECT_EQ(s.mean_abs_loss_difference_tail, 0.0);
  EXPECT_EQ(s.skipped_steps_a, 1u);  // step 0, which B does not have, counts
  EXPECT_EQ(s.skipped_steps_b, 2u);  // steps 2 and 5
  EXPECT_FALSE(s.loss_tolerance);
  EXPECT_FALSE(s.tolerance_exceeded());
  EXPECT_FALSE(c.tensors_present_a);
  EXPECT_TRUE(c.tensors.empty());
  EXPECT_FALSE(c.summary_present_a);
  EXPECT_TRUE(c.config_differences.empty());
}

TEST(RunComparison, TailIsTheLastTenthRoundedUp) {
  // B - A = step / 8 (exact): with n steps 0..n-1 and a tail of t steps, the
  // tail mean is the mean of (n-t .. n-1) / 8 = (2n - t - 1) / 16.
  const struct {
    int n;
    std::size_t tail;
  } cases[] = {{1, 1}, {9, 1}, {10, 1}, {11, 2}, {20, 2}, {21, 3}, {25, 3}, {100, 10}};
  for (const auto& k : cases) {
    std::vector<json> a, b;
    for (int i = 0; i < k.n; ++i) {
      a.push_back(step(i, 1.0));
      b.push_back(step(i, 1.0 + i / 8.0));
    }
    const auto c = compare::compare_runs(run("a", a), run("b", b));
    EXPECT_EQ(c.summary.tail_steps, k.tail) << k.n;
    EXPECT_EQ(c.summary.tail_first_step, k.n - static_cast<int>(k.tail)) << k.n;
    EXPECT_EQ(c.summary.mean_abs_loss_difference_tail, (2.0 * k.n - static_cast<double>(k.tail) - 1) / 16) << k.n;
    EXPECT_EQ(c.summary.max_abs_loss_difference, (k.n - 1) / 8.0) << k.n;
    EXPECT_EQ(c.summary.max_abs_loss_difference_step, k.n - 1) << k.n;
  }
}

TEST(RunComparison, NonFiniteLossesHaveNoDifferenceAndAreCounted) {
  // null is how the run log writes a non-finite loss; "nan"/"inf" strings too.
  const RunRecords a =
      run("a", {step(0, 1.0), step(1, nullptr), step(2, 1.0), step(3, nullptr), step(4, 1.0), step(5, 2.0)});
  const RunRecords b =
      run("b", {step(0, 1.5), step(1, 1.0), step(2, nullptr), step(3, nullptr), step(4, "nan"), step(5, "inf")});
  const auto c = compare::compare_runs(a, b, {"", 10.0});
  for (int k = 1; k <= 5; ++k) {
    EXPECT_FALSE(c.steps[static_cast<std::size_t>(k)].loss_difference) << k;
    EXPECT_FALSE(c.steps[static_cast<std::size_t>(k)].relative_difference) << k;
  }
  EXPECT_FALSE(c.steps[1].loss_a);
  EXPECT_EQ(c.steps[1].loss_b, 1.0);
  EXPECT_FALSE(c.steps[5].loss_b);
  EXPECT_EQ(c.summary.nonfinite_loss_steps_a, 2u);  // 1, 3
  EXPECT_EQ(c.summary.nonfinite_loss_steps_b, 4u);  // 2, 3, 4, 5
  EXPECT_EQ(c.summary.steps_with_loss_difference, 1u);
  EXPECT_EQ(c.summary.max_abs_loss_difference, 0.5);
  EXPECT_EQ(c.summary.max_abs_loss_difference_step, 0);
  // The tail is step 5 alone, which has no difference.
  EXPECT_FALSE(c.summary.mean_abs_loss_difference_tail);
  // Exactly one non-finite loss exceeds any tolerance (steps 1, 2, 4, 5); two do not (step 3).
  const bool over[] = {false, true, true, false, true, true};
  for (std::size_t k = 0; k < 6; ++k) EXPECT_EQ(c.steps[k].exceeds_tolerance, over[k]) << k;
  EXPECT_EQ(c.summary.steps_exceeding_tolerance, 4u);
  EXPECT_EQ(c.summary.first_step_exceeding_tolerance, 1);
}

TEST(RunComparison, ToleranceGateIsStrictlyGreater) {
  const RunRecords a = run("a", {step(0, 1.0), step(1, 1.0), step(2, 1.0), step(3, 1.0)});
  const RunRecords b =
      run("b", {step(0, 1.125), step(1, 0.75), step(2, 1.5), step(3, 0.5)});  // |B - A| 1/8, 1/4, 1/2, 1/2
  const auto at_quarter = compare::compare_runs(a, b, {"", 0.25});
  EXPECT_TRUE(at_quarter.summary.tolerance_exceeded());
  EXPECT_EQ(at_quarter.summary.first_step_exceeding_tolerance, 2);
  EXPECT_EQ(at_quarter.summary.steps_exceeding_tolerance, 2u);
  EXPECT_FALSE(at_quarter.steps[1].exceeds_tolerance);  // 1/4 is not > 1/4
  EXPECT_EQ(at_quarter.summary.loss_tolerance, 0.25);

  const auto at_half = compare::compare_runs(a, b, {"", 0.5});
  EXPECT_FALSE(at_half.summary.tolerance_exceeded());
  EXPECT_EQ(at_half.summary.steps_exceeding_tolerance, 0u);
  const auto at_zero = compare::compare_runs(a, b, {"", 0.0});
  EXPECT_EQ(at_zero.summary.first_step_exceeding_tolerance, 0);
  EXPECT_EQ(at_zero.summary.steps_exceeding_tolerance, 4u);

  for (double bad : {-0.5, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()})
    EXPECT_NE(rejection(a, b, {"", bad}).find("tolerance must be a finite number >= 0"), std::string::npos) << bad;
}

TEST(RunComparison, RelativeDifferenceAtZeroAndNegativeLosses) {
  const RunRecords a = run("a", {step(0, 0.0), step(1, 0.0), step(2, -2.0)});
  const RunRecords b = run("b", {step(0, 0.0), step(1, 1.0), step(2, -1.0)});
  const auto c = compare::compare_runs(a, b);
  EXPECT_EQ(c.steps[0].relative_difference, 0.0);  // both 0
  EXPECT_FALSE(c.steps[1].relative_difference);    // 1 / 0
  EXPECT_EQ(c.steps[1].loss_difference, 1.0);
  EXPECT_EQ(c.steps[2].loss_difference, 1.0);
  EXPECT_EQ(c.steps[2].relative_difference, 0.5);  // divided by |A| = 2, so the sign is B - A's
}

TEST(RunComparison, LossKey) {
  // A GAN logs loss_d and loss_g: without a key, loss_g is compared.
  auto gan = [](std::int64_t s, double d, double g) {
    json j = step(s, 0.0);
    j.erase("loss");
    j["loss_d"] = d;
    j["loss_g"] = g;
    return j;
  };
  const RunRecords a = run("a", {gan(0, 1.0, 2.0)}), b = run("b", {gan(0, 1.5, 2.25)});
  const auto by_default = compare::compare_runs(a, b);
  EXPECT_EQ(by_default.summary.loss_key, "loss_g");
  EXPECT_EQ(by_default.steps[0].loss_difference, 0.25);
  const auto d = compare::compare_runs(a, b, {"loss_d", {}});
  EXPECT_EQ(d.summary.loss_key, "loss_d");
  EXPECT_EQ(d.steps[0].loss_difference, 0.5);
  // A run without the key named.
  const std::string why = rejection(run("a", {step(0, 1.0)}), b);
  EXPECT_NE(why.find("b/steps.jsonl line 1: missing key \"loss\""), std::string::npos) << why;
  EXPECT_NE(why.find("--loss-key"), std::string::npos) << why;
}

json tensor(std::int64_t s, const std::string& layer, const std::string& name, const std::string& pass, json underflow,
            json overflow, json headroom, json norm) {
  return {{"step", s},
          {"layer", layer},
          {"tensor", name},
          {"role", name == "dw" ? "weight_grad" : "activation"},
          {"pass", pass},
          {"format", "fp16"},
          {"count", 4},
          {"underflow_to_zero_rate", std::move(underflow)},
          {"overflow_rate", std::move(overflow)},
          {"headroom_log2", std::move(headroom)},
          {"norm", std::move(norm)}};
}

TEST(RunComparison, TensorsOverTheirCommonSteps) {
  RunRecords a = run("a", {step(0, 1.0), step(10, 1.0), step(20, 1.0)});
  RunRecords b = run("b", {step(0, 1.0), step(10, 1.0), step(20, 1.0)});
  a.tensors = std::vector<json>{
      // Step 0 is not recorded by B, so its rates (1.0, 0.75) must not count.
      tensor(0, "fc1", "dw", "backward", 1.0, 0.75, -4.0, 9.0),
      tensor(10, "fc1", "dw", "backward", 0.25, 0.0, 3.0, 1.0),
      tensor(20, "fc1", "dw", "backward", 0.5, 0.125, nullptr, 2.0),
      tensor(10, "fc1", "x", "forward", 0.0, 0.0, 5.0, 0.0),    // norm A 0: no ratio
      tensor(0, "fc2", "x", "forward", 0.0, 0.0, 1.0, 1.0),     // B records it at step 10 only
      tensor(10, "fc3", "w", "optimizer", 0.0, 0.0, 1.0, 1.0),  // only A
  };
  b.tensors = std::vector<json>{
      tensor(10, "fc1", "dw", "backward", 0.5, 0.25, nullptr, 1.5),
      tensor(20, "fc1", "dw", "backward", 1.0, nullptr, nullptr, 3.0),
      tensor(30, "fc1", "dw", "backward", 0.0, 1.0, -9.0, 1.0),  // not recorded by A
      tensor(10, "fc1", "x", "forward", 0.0, 0.0, -1.5, 1.0),
      tensor(10, "fc2", "x", "forward", 0.0, 0.0, 1.0, 1.0),
  };
  const auto c = compare::compare_runs(a, b);
  EXPECT_TRUE(c.tensors_present_a);
  EXPECT_TRUE(c.tensors_present_b);
  ASSERT_EQ(c.tensors.size(), 2u);
  const auto& dw = c.tensors[0];  // sorted: (fc1, dw, backward) < (fc1, x, forward)
  EXPECT_EQ(dw.layer, "fc1");
  EXPECT_EQ(dw.tensor, "dw");
  EXPECT_EQ(dw.pass, "backward");
  EXPECT_EQ(dw.role_a, "weight_grad");
  EXPECT_EQ(dw.common_steps, 2u);
  EXPECT_EQ(dw.last_common_step, 20);
  EXPECT_EQ(dw.mean_underflow_to_zero_rate_a, 0.375);  // (0.25 + 0.5) / 2
  EXPECT_EQ(dw.mean_underflow_to_zero_rate_b, 0.75);   // (0.5 + 1) / 2
  EXPECT_EQ(dw.max_overflow_rate_a, 0.125);
  EXPECT_EQ(dw.max_overflow_rate_b, 0.25);  // the null is left out
  EXPECT_EQ(dw.min_headroom_log2_a, 3.0);   // min(3, +inf)
  EXPECT_FALSE(dw.min_headroom_log2_b);     // +inf at both steps
  EXPECT_EQ(dw.norm_a, 2.0);
  EXPECT_EQ(dw.norm_b, 3.0);
  EXPECT_EQ(dw.norm_ratio, 1.5);

  const auto& x = c.tensors[1];
  EXPECT_EQ(x.tensor, "x");
  EXPECT_EQ(x.role_b, "activation");
  EXPECT_EQ(x.common_steps, 1u);
  EXPECT_EQ(x.min_headroom_log2_b, -1.5);  // negative: it overflows
  EXPECT_EQ(x.norm_a, 0.0);
  EXPECT_FALSE(x.norm_ratio);
  EXPECT_EQ(c.summary.tensors_only_in_a, 2u);  // fc2/x (no common step), fc3/w
  EXPECT_EQ(c.summary.tensors_only_in_b, 1u);  // fc2/x

  // Without tensors.jsonl on one side, no tensor is compared.
  b.tensors.reset();
  const auto half = compare::compare_runs(a, b);
  EXPECT_TRUE(half.tensors_present_a);
  EXPECT_FALSE(half.tensors_present_b);
  EXPECT_TRUE(half.tensors.empty());
  EXPECT_TRUE(compare::run_comparison_json(half)["tensors"].is_null());
  EXPECT_EQ(compare::run_comparison_json(half)["files"]["tensors.jsonl"]["b"], "not present");
}

TEST(RunComparison, ConfigDifferencesFlattenNestedKeys) {
  RunRecords a = run("a", {step(0, 1.0)});
  RunRecords b = run("b", {step(0, 1.0)});
  a.summary = json::parse(R"({"config": {"model": "mlp", "recipe": "fp32", "backend": "ref", "seed": 1,
                                         "optimizer": {"lr": 0.1, "momentum": 0.9}, "only_a": true},
                              "steps": 1, "final_loss": 1.0})");
  b.summary = json::parse(R"({"config": {"model": "mlp", "recipe": "o2", "backend": "emu", "seed": 1,
                                         "optimizer": {"lr": 0.1, "momentum": 0.8}, "only_b": [1, 2]},
                              "steps": 1, "final_loss": 2.0})");
  const auto c = compare::compare_runs(a, b);
  ASSERT_EQ(c.config_differences.size(), 5u);
  const std::vector<std::string> keys = {"backend", "only_a", "only_b", "optimizer.momentum", "recipe"};
  for (std::size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(c.config_differences[i].key, keys[i]);
  EXPECT_EQ(c.config_differences[0].a, "ref");
  EXPECT_EQ(c.config_differences[0].b, "emu");
  EXPECT_EQ(c.config_differences[1].a, true);
  EXPECT_TRUE(c.config_differences[1].b.is_null());
  EXPECT_TRUE(c.config_differences[2].a.is_null());
  EXPECT_EQ(c.config_differences[2].b, json::array({1, 2}));
  EXPECT_EQ(c.config_differences[3].a, 0.9);
  EXPECT_EQ(c.config_differences[4].b, "o2");

  b.summary = json::parse(R"({"steps": 1})");  // no config: every key of A's differs
  EXPECT_EQ(compare::compare_runs(a, b).config_differences.size(), 7u);
  b.summary = json::array();
  EXPECT_NE(rejection(a, b).find("b/summary.json: expected a JSON object"), std::string::npos);
  b.summary = json::parse(R"({"config": 3})");
  EXPECT_NE(rejection(a, b).find("b/summary.json: \"config\" must be an object"), std::string::npos);
  b.summary.reset();
  const auto half = compare::compare_runs(a, b);
  EXPECT_TRUE(half.summary_present_a);
  EXPECT_FALSE(half.summary_present_b);
  EXPECT_TRUE(half.config_differences.empty());
  EXPECT_TRUE(compare::run_comparison_json(half)["config_differences"].is_null());
}

TEST(RunComparison, MalformedRecordsNameFileLineAndKey) {
  const RunRecords good = run("b", {step(0, 1.0), step(1, 1.0)});
  auto with = [](json second) { return run("runs/a", {step(0, 1.0), std::move(second)}); };
  json no_step = step(1, 1.0);
  no_step.erase("step");
  json no_scale = step(1, 1.0);
  no_scale.erase("scale");
  json bad_skip = step(1, 1.0);
  bad_skip["skipped"] = "yes";
  json bad_rate = step(1, 1.0);
  bad_rate["underflow_rate"] = json::array();
  const struct {
    json record;
    const char* message;
  } cases[] = {
      {no_step, "runs/a/steps.jsonl line 2: missing key \"step\""},
      {step(-1, 1.0), "runs/a/steps.jsonl line 2: \"step\" must be an integer >= 0, got -1"},
      {json{{"step", 1.5}}, "line 2: \"step\" must be an integer >= 0, got 1.5"},
      {step(1, "1.0"), "runs/a/steps.jsonl line 2: \"loss\" must be a number or null, got \"1.0\""},
      {no_scale, "line 2: missing key \"scale\""},
      {bad_skip, "line 2: \"skipped\" must be true or false, got \"yes\""},
      {bad_rate, "line 2: \"underflow_rate\" must be a number or null, got []"},
      {json::array({1}), "line 2: expected a JSON object, got array"},
      {step(0, 1.0), "line 2: step 0 appears twice (also on line 1)"},
  };
  for (const auto& k : cases) {
    const std::string why = rejection(with(k.record), good);
    EXPECT_NE(why.find(k.message), std::string::npos) << k.record.dump() << " -> '" << why << "'";
  }

  RunRecords a = run("a", {step(0, 1.0)}), b = run("b", {step(0, 1.0)});
  a.tensors = std::vector<json>{};
  b.tensors = std::vector<json>{tensor(0, "fc1", "x", "forward", 0.0, 0.0, 1.0, 1.0)};
  b.tensors->back().erase("layer");
  EXPECT_NE(rejection(a, b).find("b/tensors.jsonl line 1: missing key \"layer\""), std::string::npos);
  b.tensors = std::vector<json>{tensor(0, "fc1", "x", "forward", 0.0, "lots", 1.0, 1.0)};
  EXPECT_NE(rejection(a, b).find("b/tensors.jsonl line 1: \"overflow_rate\" must be a number or null"),
            std::string::npos);
  b.tensors = std::vector<json>{tensor(3, "fc1", "x", "forward", 0.0, 0.0, 1.0, 1.0),
                                tensor(3, "fc1", "x", "forward", 0.0, 0.0, 1.0, 1.0)};
  EXPECT_NE(rejection(a, b).find("b/tensors.jsonl line 2: layer \"fc1\" tensor \"x\" pass \"forward\" at step 3 "
                                 "appears twice (also on line 1)"),
            std::string::npos)
      << rejection(a, b);
}

// The Monitor (mpverify.torch) writes the two rates only on the steps it records (every > 1) and leaves
// lost_update_rate out of a skipped step: such steps compare without them.
TEST(RunComparison, StepsWithoutRatesCompareWithoutThem) {
  json unrecorded = step(1, 1.25);
  unrecorded.erase("underflow_rate");
  unrecorded.erase("lost_update_rate");
  json skipped = step(2, 1.0, 1, true, 0.25);
  skipped.erase("lost_update_rate");
  const RunRecords a = run("a", {step(0, 1.5, 1, false, 0.5, 0.125), unrecorded, skipped});
  const RunRecords b = run("b", {step(0, 1.5), step(1, 1.5), step(2, 1.0)});
  ASSERT_EQ(rejection(a, b), "");
  const auto c = compare::compare_runs(a, b);
  ASSERT_EQ(c.steps.size(), 3u);
  EXPECT_EQ(c.steps[0].underflow_rate_a, 0.5);
  EXPECT_EQ(c.steps[0].lost_update_rate_a, 0.125);
  EXPECT_FALSE(c.steps[1].underflow_rate_a.has_value());
  EXPECT_FALSE(c.steps[1].lost_update_rate_a.has_value());
  EXPECT_EQ(c.steps[1].underflow_rate_b, 0.0);
  EXPECT_EQ(c.steps[1].loss_difference, 0.25);
  EXPECT_EQ(c.steps[2].underflow_rate_a, 0.25);
  EXPECT_FALSE(c.steps[2].lost_update_rate_a.has_value());
}

TEST(RunComparison, NoCommonStepIsAnError) {
  const std::string why = rejection(run("a", {step(0, 1.0), step(1, 1.0)}), run("b", {step(5, 1.0), step(9, 1.0)}));
  EXPECT_NE(why.find("no step in common: a has 2 steps (0..1), b has 2 (5..9)"), std::string::npos) << why;
  EXPECT_NE(rejection(run("a", {}), run("b", {step(0, 1.0)})).find("no step in common: a has 0 steps,"),
            std::string::npos);
}

TEST(RunComparison, JsonDocumentCarriesTheFieldsAndNulls) {
  RunRecords a = run("a", {step(0, 1.0), step(1, 1.0)});
  RunRecords b = run("b", {step(0, 1.25, 8.0, true, 0.5, 0.25), step(1, nullptr)});
  a.tensors = std::vector<json>{tensor(0, "fc1", "x", "forward", 0.0, 0.0, "-inf", 1.0)};
  b.tensors = std::vector<json>{tensor(0, "fc1", "x", "forward", 0.5, 0.0, 2.0, 4.0)};
  const auto j = compare::run_comparison_json(compare::compare_runs(a, b, {"", 0.5}));
  for (const char* key : {"run_a", "run_b", "files", "summary", "config_differences", "tensors", "steps"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["run_b"], "b");
  EXPECT_EQ(j["files"]["summary.json"]["a"], "not present");
  EXPECT_EQ(j["files"]["tensors.jsonl"]["a"], "present");
  ASSERT_EQ(j["steps"].size(), 2u);
  const auto& s0 = j["steps"][0];
  EXPECT_EQ(s0["step"], 0);
  EXPECT_EQ(s0["loss_difference"], 0.25);
  EXPECT_EQ(s0["relative_difference"], 0.25);
  EXPECT_EQ(s0["scale_b"], 8.0);
  EXPECT_EQ(s0["skipped_b"], true);
  EXPECT_EQ(s0["underflow_rate_b"], 0.5);
  EXPECT_EQ(s0["lost_update_rate_b"], 0.25);
  EXPECT_EQ(s0["exceeds_tolerance"], false);
  const auto& s1 = j["steps"][1];
  EXPECT_TRUE(s1["loss_b"].is_null());
  EXPECT_TRUE(s1["loss_difference"].is_null());
  EXPECT_EQ(s1["exceeds_tolerance"], true);
  EXPECT_EQ(j["summary"]["tolerance_exceeded"], true);
  EXPECT_EQ(j["summary"]["first_step_exceeding_tolerance"], 1);
  EXPECT_EQ(j["summary"]["max_abs_loss_difference"], 0.25);
  EXPECT_EQ(j["summary"]["nonfinite_loss_steps_b"], 1);
  EXPECT_TRUE(j["summary"]["first_step_only_in_a"].is_null());
  ASSERT_EQ(j["tensors"].size(), 1u);
  EXPECT_EQ(j["tensors"][0]["min_headroom_log2_a"], "-inf");  // JSON has no infinity
  EXPECT_EQ(j["tensors"][0]["mean_underflow_to_zero_rate_b"], 0.5);
  EXPECT_EQ(j["tensors"][0]["norm_ratio"], 4.0);
  // Without a tolerance, neither the steps nor the summary claim a verdict.
  const auto plain = compare::run_comparison_json(compare::compare_runs(a, b));
  EXPECT_FALSE(plain["steps"][0].contains("exceeds_tolerance"));
  EXPECT_TRUE(plain["summary"]["tolerance_exceeded"].is_null());
  // The text dumps and parses back (no NaN or infinity left in it).
  EXPECT_EQ(nlohmann::ordered_json::parse(j.dump()), j);
}

}  // namespace
