// Sweep plans (sweep/sweep_plan.h): the runs a plan expands to, written out by hand here (names, order,
// `mpverify train` arguments), and every refusal naming its key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sweep/sweep_plan.h"

namespace {

using mpverify::sweep::parse_sweep_plan;
using mpverify::sweep::SweepPlan;
using nlohmann::json;
using Args = std::vector<std::string>;

// The plan the command line's documentation shows.
const char* kDocumentedPlan = R"({"train": {"model": "mlp", "data": "synthetic", "backend": "emu", "steps": 40},
  "axes": {"recipe": ["fp32", "o2"], "scaler": ["torch"], "seed": [1, 2, 3]},
  "gate": {"baseline": {"recipe": "fp32"}, "metric": "accuracy", "margin": 1}})";

std::string refusal(const std::string& plan) {
  try {
    parse_sweep_plan(json::parse(plan));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(SweepPlan, TheDocumentedPlanIsTwoEnsemblesOfThreeSeeds) {
  const SweepPlan p = parse_sweep_plan(json::parse(kDocumentedPlan));
  ASSERT_EQ(p.candidates.size(), 2u);
  EXPECT_EQ(p.candidates[0].name, "recipe-fp32_scaler-torch");
  EXPECT_EQ(p.candidates[1].name, "recipe-o2_scaler-torch");
  // Options in name order (JSON objects are ordered by key): backend, data, model, recipe, scaler, steps.
  EXPECT_EQ(p.candidates[1].arguments, (Args{"--backend", "emu", "--data", "synthetic", "--model", "mlp", "--recipe",
                                             "o2", "--scaler", "torch", "--steps", "40"}));
  EXPECT_EQ(p.seeds, (std::vector<std::uint64_t>{1, 2, 3}));
  ASSERT_EQ(p.runs.size(), 6u);
  EXPECT_EQ(p.runs[4].candidate, 1u);
  EXPECT_EQ(p.runs[4].seed, 2u);
  EXPECT_EQ(p.runs[4].dir, "recipe-o2_scaler-torch/seed-2");
  const Args args = mpverify::sweep::run_arguments(p, p.runs[4]);
  EXPECT_EQ(Args(args.end() - 2, args.end()), (Args{"--seed", "2"}));
  ASSERT_TRUE(p.gate.has_value());
  EXPECT_EQ(p.gate->baseline, 0u);
  EXPECT_EQ(p.gate->options.margin, 1.0);
  EXPECT_EQ(p.gate->options.metric, mpverify::metrics::GateMetric::accuracy);
}

TEST(SweepPlan, TheFirstAxisByNameVariesSlowest) {
  const SweepPlan p = parse_sweep_plan(
      json::parse(R"({"axes": {"scaler": ["torch", "static"], "recipe": ["o1", "o2", "bf16"], "seed": "4-5"}})"));
  const std::vector<std::string> expected = {"recipe-o1_scaler-torch",   "recipe-o1_scaler-static",
                                             "recipe-o2_scaler-torch",   "recipe-o2_scaler-static",
                                             "recipe-bf16_scaler-torch", "recipe-bf16_scaler-static"};
  ASSERT_EQ(p.candidates.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(p.candidates[i].name, expected[i]) << i;
  EXPECT_EQ(p.seeds, (std::vector<std::uint64_t>{4, 5}));
  EXPECT_FALSE(p.gate.has_value());
  EXPECT_EQ(p.runs[3].dir, "recipe-o1_scaler-static/seed-5");  // candidate 1, its second seed
}

TEST(SweepPlan, ValuesBecomeArgumentsAsTrainTakesThem) {
  const SweepPlan p = parse_sweep_plan(json::parse(
      R"({"train": {"lr": 0.05, "nesterov": true, "no-histograms": false, "scaler-opt": ["init=1024", "interval=50"]},
          "axes": {"seed": [7]}})"));
  ASSERT_EQ(p.candidates.size(), 1u);
  EXPECT_EQ(p.candidates[0].name, "runs");
  EXPECT_EQ(p.candidates[0].arguments,
            (Args{"--lr", "0.05", "--nesterov", "--scaler-opt", "init=1024", "--scaler-opt", "interval=50"}));
}

TEST(SweepPlan, OverridesApplyToTheCombinationsTheyMatch) {
  const SweepPlan p = parse_sweep_plan(json::parse(
      R"({"train": {"steps": 10}, "axes": {"recipe": ["fp32", "o2"], "seed": [1]},
          "overrides": [{"match": {"recipe": "o2"}, "train": {"steps": 20, "scaler": "torch"}}]})"));
  EXPECT_EQ(p.candidates[0].arguments, (Args{"--recipe", "fp32", "--steps", "10"}));
  EXPECT_EQ(p.candidates[1].arguments, (Args{"--recipe", "o2", "--scaler", "torch", "--steps", "20"}));
}

TEST(SweepPlan, NumbersAndUnsafeCharactersMakeDirectoryNames) {
  const SweepPlan p = parse_sweep_plan(json::parse(R"({"axes": {"lr": [0.01, 1], "recipe": ["o2:low=e5m7"], "seed": [1]}})"));
  EXPECT_EQ(p.candidates[0].name, "lr-0.01_recipe-o2_low_e5m7");
  EXPECT_EQ(p.candidates[1].name, "lr-1_recipe-o2_low_e5m7");
}

TEST(SweepPlan, RefusalsNameTheKeyAndTheFix) {
  EXPECT_NE(refusal(R"({"train": {}})").find("\"axes\": missing"), std::string::npos);
  EXPECT_NE(refusal(R"({"axes": {"recipe": ["o2"]}})").find("add \"seed\""), std::string::npos);
  EXPECT_NE(refusal(R"({"axes": {"seed": [1, 1]}})").find("axes \"seed\""), std::string::npos);
  EXPECT_NE(refusal(R"({"axes": {"seed": [-1]}})").find("not a whole number"), std::string::npos);
  EXPECT_NE(refusal(R"({"axes": {"seed": [1]}, "trian": {}})").find("\"trian\": unknown key"), std::string::npos);
  EXPECT_NE(refusal(R"({"train": {"out": "x"}, "axes": {"seed": [1]}})").find("the sweep sets it"), std::string::npos);
  EXPECT_NE(refusal(R"({"train": {"seed": 3}, "axes": {"seed": [1]}})").find("the sweep sets it"), std::string::npos);
  EXPECT_NE(refusal(R"({"train": {"--steps": 3}, "axes": {"seed": [1]}})").find("without dashes"), std::string::npos);
  EXPECT_NE(refusal(R"({"train": {"steps": null}, "axes": {"seed": [1]}})").find("a string or a number"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"axes": {"recipe": [], "seed": [1]}})").find("axes \"recipe\": write a non-empty list"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"axes": {"recipe": ["o2", "o2"], "seed": [1]}})").find("appears twice"), std::string::npos);
  EXPECT_NE(refusal(R"({"axes": {"recipe": ["a b", "a_b"], "seed": [1]}})").find("same directory name"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"axes": {"recipe": ["o2"], "seed": [1]},
                        "overrides": [{"match": {"recipe": "o1"}, "train": {"steps": 2}}]})")
                .find("overrides[0]: its match"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"axes": {"recipe": ["o1", "o2"], "scaler": ["a", "b"], "seed": [1]},
                        "gate": {"baseline": {"recipe": "o1"}, "margin": 1}})")
                .find("matches 2 combinations"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"axes": {"recipe": ["o1"], "seed": [1]}, "gate": {"baseline": {"recipe": "o1"}}})")
                .find("gate \"margin\""),
            std::string::npos);
  EXPECT_NE(refusal(R"({"axes": {"recipe": ["o1"], "seed": [1]},
                        "gate": {"baseline": {"recipe": "o1"}, "margin": 1, "metric": "bleu"}})")
                .find("gate \"metric\""),
            std::string::npos);
  EXPECT_NE(refusal(R"({"axes": {"recipe": ["o1"], "seed": [1]},
                        "gate": {"baseline": {"recipe": "o1"}, "margin": 1, "method": "sideways"}})")
                .find("gate \"method\""),
            std::string::npos);
}

TEST(SweepPlan, AGateInRoundsTakesItsLooksAndSpending) {
  const SweepPlan p = parse_sweep_plan(json::parse(R"({"axes": {"recipe": ["o1", "o2"], "seed": [1, 2]},
      "gate": {"baseline": {"recipe": "o1"}, "margin": 1, "sequential": [2, 4], "spending": "pocock"}})"));
  ASSERT_TRUE(p.gate && p.gate->options.sequential);
  EXPECT_EQ(p.gate->options.sequential->looks, (std::vector<std::size_t>{2, 4}));
  EXPECT_EQ(p.gate->options.sequential->spending, mpverify::metrics::Spending::pocock);
  const std::string gate = R"({"axes": {"recipe": ["o1", "o2"], "seed": [1, 2]}, "gate": {"baseline": {"recipe": "o1"}, "margin": 1, )";
  for (const char* bad : {R"("sequential": [4, 2]})", R"("sequential": [1, 4]})", R"("sequential": "2,4"})",
                          R"("sequential": [2, -4]})", R"("sequential": []})"})
    EXPECT_NE(refusal(gate + bad + "}").find("gate \"sequential\""), std::string::npos) << refusal(gate + bad + "}");
  EXPECT_NE(refusal(gate + R"("sequential": [2, 4], "spending": "linear"}})").find("gate \"spending\""),
            std::string::npos);
  EXPECT_NE(refusal(gate + R"("spending": "pocock"}})").find("add \"sequential\""), std::string::npos);
}

TEST(SweepPlan, TooManyRunsAreRefusedBeforeAnyIsMade) {
  // 400 x 1000 seeds = 400,000 runs > kMaxSweepRuns.
  json plan = {{"axes", {{"seed", "1-1000"}, {"lr", json::array()}}}};
  for (int i = 0; i < 400; ++i) plan["axes"]["lr"].push_back(i);
  EXPECT_NE(refusal(plan.dump()).find("at most 10000"), std::string::npos);
}

TEST(SweepPlan, AxesPastTwoToTheSixtyFourRunsAreCountedNotBuilt) {
  // 20 axes of 10 values: 10^20 combinations, more than 2^64 (about 1.8e19), so a product in 64 bits wraps;
  // built one by one they exhaust memory (std::bad_alloc) before any count is checked.
  json plan = {{"axes", {{"seed", json::array({1})}}}};
  for (int a = 0; a < 20; ++a)
    for (int v = 0; v < 10; ++v) plan["axes"]["a" + std::to_string(a)].push_back(v);
  EXPECT_NE(refusal(plan.dump()).find("at most 10000"), std::string::npos);
}

TEST(SweepPlan, AxisNamesNeverLeaveTheSweepsDirectory) {
  // Names that would climb out of --out or start at the root stay one path component each.
  const SweepPlan p =
      parse_sweep_plan(json::parse(R"({"axes": {"../../victim2/x": [false], "/abs/y": ["../z"], "seed": [1]}})"));
  ASSERT_EQ(p.candidates.size(), 1u);
  EXPECT_EQ(p.candidates[0].name, ".._.._victim2_x-false__abs_y-.._z");  // "." sorts before "/"
  for (const auto& run : p.runs) {
    EXPECT_TRUE(run.dir.is_relative()) << run.dir;
    for (const auto& part : run.dir) EXPECT_NE(part, "..") << run.dir;
    EXPECT_EQ(std::distance(run.dir.begin(), run.dir.end()), 2) << run.dir;  // <candidate>/seed-<s>
  }
}

}  // namespace
