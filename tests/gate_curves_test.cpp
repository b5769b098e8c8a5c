// The parity gate's per-step modes (metrics/curve_gate.h) through
// `mpverify gate`: golden values (--mode curve) against relative deviations
// worked out here from the curves the test writes, and the MLPerf-style
// steps-to-target check (--mode mlperf) against t statistics computed by hand
// and bracketed by the published t table; divergence, too few runs and bad
// input.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/gate_runs.h"

namespace {

using mpverify::test::GateCli;
using mpverify::test::RunSpec;
using mpverify::test::write_ensemble;
using mpverify::test::write_run;
using nlohmann::json;

// ------------------------------------------------------------ golden values
//
// Upstream rule: Megatron-LM, tests/functional_tests/python_test_utils/
// test_ci_pipeline.py at commit 1df56dcbb858728d89292f0dae5ef4d035a95e97,
// line 36: `assert actual_val == pytest.approx(expected=expected_val,
// rel=self.margin_loss)` at every golden step, i.e. |a - g| <= rel |g|; the
// gate reports the largest |a - g| / |g| and passes when it is <= --rtol.

// write_run's losses are 2/(s + 1) + offset over 20 steps. A candidate
// offset d against the baseline's 0 deviates by d (s + 1) / 2 at step s,
// largest at step 19: 10 d.
TEST_F(GateCli, GoldenValuesOnSingleRuns) {
  RunSpec b, c;
  c.recipe = "o2";
  c.loss_offset = 0.0005;  // largest deviation 0.005 at step 19
  write_run(root_ / "fp32", b);
  write_run(root_ / "o2", c);
  const std::string args = "--baseline fp32 --candidate o2 --metric loss --mode curve";
  const json pass = gate_json(args + " --rtol 0.01", 0);
  EXPECT_EQ(pass["verdict"], "equivalent");
  EXPECT_EQ(pass["mode"], "curve");
  EXPECT_NEAR(pass["golden"]["max_relative_deviation"].get<double>(), 0.005, 1e-12);
  EXPECT_EQ(pass["golden"]["worst_step"], 19);
  EXPECT_EQ(pass["golden"]["steps_compared"], 20);
  EXPECT_EQ(pass["golden"]["steps_outside"], 0);
  // rtol 0.0041: 0.0005 (s + 1) / 2 > 0.0041 for s + 1 > 16.4, the steps 16..19 (no step near the boundary).
  const Outcome fail = gate(args + " --rtol 0.0041");
  EXPECT_EQ(fail.exit_code, 1) << fail.out_err;
  EXPECT_EQ(fail.out.rfind("NOT EQUIVALENT (loss, curve)", 0), 0u) << fail.out;
  EXPECT_EQ(gate_json(args + " --rtol 0.0041", 1)["golden"]["steps_outside"], 4);
  // One run per side is what the golden check compares: no inconclusive.
  expect_bad_input(args, {"--rtol"});
  expect_bad_input("--baseline fp32 --candidate o2 --metric accuracy --mode curve --rtol 0.01", {"--metric loss"});
}

// Seeds pair the runs; the worst pair decides.
TEST_F(GateCli, GoldenValuesOnEnsemblesPairBySeed) {
  std::vector<RunSpec> b(3), c(3);
  const double offsets[] = {0.0001, -0.0008, 0.0003};  // largest |10 d| = 0.008, seed 2
  for (int i = 0; i < 3; ++i) {
    b[i].seed = c[i].seed = i + 1;
    c[i].recipe = "o2";
    c[i].loss_offset = offsets[i];
  }
  write_ensemble(root_ / "fp32", b);
  write_ensemble(root_ / "o2", c);
  const json j = gate_json("--baseline fp32 --candidate o2 --metric loss --mode curve --rtol 0.01", 0);
  EXPECT_NEAR(j["golden"]["max_relative_deviation"].get<double>(), 0.008, 1e-12);
  EXPECT_EQ(j["golden"]["worst_seed"], 2);
  EXPECT_EQ(j["golden"]["pairs"], 3);
  EXPECT_EQ(j["golden"]["steps_compared"], 60);
  EXPECT_NEAR(j["candidate_runs"][1]["value"].get<double>(), 0.008, 1e-12);
  EXPECT_EQ(gate("--baseline fp32 --candidate o2 --metric loss --mode curve --rtol 0.0079").exit_code, 1);
  // Different seed sets cannot be paired.
  c[2].seed = 9;
  write_ensemble(root_ / "o2-other", c);
  expect_bad_input("--baseline fp32 --candidate o2-other --metric loss --mode curve --rtol 0.01", {"same set"});
}

std::string curve_csv(const std::vector<std::vector<std::string>>& values) {  // values[seed - 1][step]
  std::string t = "seed,step,value\n";
  for (std::size_t k = 0; k < values.size(); ++k)
    for (std::size_t s = 0; s < values[k].size(); ++s)
      t += std::to_string(k + 1) + "," + std::to_string(s) + "," + values[k][s] + "\n";
  return t;
}

TEST_F(GateCli, GoldenValuesOnCurveFiles) {
  write_file("golden.csv", curve_csv({{"4.0", "2.0", "1.0", "0.5"}}));
  // Deviations 0.1/4, 0.04/2, 0.03/1, 0.01/0.5 = 0.025, 0.02, 0.03, 0.02: the largest 0.03 at step 2.
  write_file("run.csv", curve_csv({{"4.1", "1.96", "1.03", "0.51", "0.4"}}));  // step 4: not in the golden curve
  const std::string args = "--baseline golden.csv --candidate run.csv --metric lm-loss --mode curve";
  const json j = gate_json(args + " --rtol 0.0301", 0);  // 0.03 up to rounding (1.03 - 1 is not exactly 0.03)
  EXPECT_NEAR(j["golden"]["max_relative_deviation"].get<double>(), 0.03, 1e-12);
  EXPECT_EQ(j["golden"]["worst_step"], 2);
  EXPECT_EQ(j["golden"]["steps_compared"], 4);
  EXPECT_EQ(gate(args + " --rtol 0.029").exit_code, 1);
  // A missing step and a NaN are divergences: exit 1, never bad input.
  write_file("short.csv", curve_csv({{"4.0", "2.0", "1.0"}}));
  const Outcome missing = gate("--baseline golden.csv --candidate short.csv --metric lm-loss --mode curve --rtol 1");
  EXPECT_EQ(missing.exit_code, 1) << missing.out_err;
  EXPECT_NE(missing.out.find("no value at step 3"), std::string::npos) << missing.out;
  write_file("nan.csv", curve_csv({{"4.0", "nan", "1.0", "0.5"}}));
  const Outcome nan = gate("--baseline golden.csv --candidate nan.csv --metric lm-loss --mode curve --rtol 1");
  EXPECT_EQ(nan.exit_code, 1);
  EXPECT_NE(nan.out.find("non-finite at step 1"), std::string::npos) << nan.out;
  EXPECT_EQ(gate("--baseline nan.csv --candidate golden.csv --metric lm-loss --mode curve --rtol 1").exit_code, 1);
  // A value file without steps in a per-step mode, and a curve file in the TOST mode.
  write_file("values.csv", "seed,value\n1,2.0\n");
  expect_bad_input("--baseline values.csv --candidate run.csv --metric lm-loss --mode curve --rtol 1", {"no step"});
  expect_bad_input("--baseline golden.csv --candidate run.csv --metric lm-loss --margin 1", {"is a curve"});
  expect_bad_input("--baseline golden.csv --candidate run.csv --metric lm-loss --mode golden --rtol 1", {"--mode"});
}

// ---------------------------------------------------- MLPerf steps to target
//
// Upstream rule: mlcommons/logging, mlperf_logging/rcp_checker/rcp_checker.py
// at commit 7bbf792686936919201796120b970dd820331099: lines 302-303 and
// 481-483 sort the epochs to converge and drop the fastest and slowest
// (samples_rejected = 1) before the mean; lines 385-394 run
// scipy.stats.ttest_ind_from_stats(..., equal_var=True) and halve its
// two-sided p into a one-sided one; line 147 marks a run that did not
// converge as infinite, and line 189 gives no result when more than one did.

// A curve that is 1 before step k and 0 from k on reaches "<= 0.5" at step k;
// k = -1: never (every value 1).
std::string step_curves(const std::vector<int>& ks, int steps = 60) {
  std::string t = "seed,step,value\n";
  for (std::size_t i = 0; i < ks.size(); ++i)
    for (int s = 0; s < steps; ++s)
      t += std::to_string(i + 1) + "," + std::to_string(s) + "," + (ks[i] >= 0 && s >= ks[i] ? "0" : "1") + "\n";
  return t;
}

// Baseline steps {5, 10, 12, 14, 40}: trimmed {10, 12, 14}, mean 12, sample
// variance 4. Candidate trimmed {12, 14, 16} + delta: mean 14 + delta,
// variance 4. Pooled variance 4, se = sqrt(4 (1/3 + 1/3)) = sqrt(8/3), df 4,
// t = (2 + delta) / sqrt(8/3). The table's t(0.90, 4) = 1.533,
// t(0.95, 4) = 2.132, t(0.975, 4) = 2.776 bracket the one-sided p.
TEST_F(GateCli, MlperfStepsToTargetOneSidedTTest) {
  write_file("fp32.csv", step_curves({5, 10, 12, 14, 40}));
  const std::string args = "--baseline fp32.csv --candidate o2.csv --metric loss --mode mlperf --target 0.5";
  // delta 1: t = 3 / 1.633 = 1.837, between 1.533 and 2.132: p in (0.05, 0.10), equivalent.
  write_file("o2.csv", step_curves({3, 13, 15, 17, -1}));  // the slowest never reaches the target: dropped
  const json pass = gate_json(args, 0);
  EXPECT_EQ(pass["mode"], "mlperf");
  EXPECT_EQ(pass["mlperf"]["baseline_trimmed"], json({10, 12, 14}));
  EXPECT_EQ(pass["mlperf"]["candidate_trimmed"], json({13, 15, 17}));
  EXPECT_EQ(pass["mlperf"]["mean_baseline"], 12.0);
  EXPECT_EQ(pass["mlperf"]["mean_candidate"], 15.0);
  EXPECT_NEAR(pass["mlperf"]["sd_baseline"].get<double>(), 2.0, 1e-12);
  EXPECT_EQ(pass["mlperf"]["df"], 4.0);
  EXPECT_NEAR(pass["mlperf"]["t"].get<double>(), 3 / std::sqrt(8.0 / 3.0), 1e-12);
  EXPECT_GT(pass["mlperf"]["p_slower"].get<double>(), 0.05);
  EXPECT_LT(pass["mlperf"]["p_slower"].get<double>(), 0.10);
  EXPECT_EQ(pass["candidate_runs"][4]["value"], nullptr);  // never reached
  EXPECT_EQ(pass["baseline_runs"][0]["value"], 5.0);
  // delta 2: t = 4 / 1.633 = 2.449, between 2.132 and 2.776: p in (0.025, 0.05), not equivalent.
  write_file("o2.csv", step_curves({3, 14, 16, 18, 50}));
  const Outcome slow = gate(args);
  EXPECT_EQ(slow.exit_code, 1) << slow.out_err;
  EXPECT_EQ(slow.out.rfind("NOT EQUIVALENT (loss, mlperf)", 0), 0u) << slow.out;
  EXPECT_NE(slow.out.find("converges slower"), std::string::npos);
  const json j = gate_json(args, 1);
  EXPECT_NEAR(j["mlperf"]["t"].get<double>(), 4 / std::sqrt(8.0 / 3.0), 1e-12);
  EXPECT_GT(j["mlperf"]["p_slower"].get<double>(), 0.025);
  EXPECT_LT(j["mlperf"]["p_slower"].get<double>(), 0.05);
  // ... and equivalent at alpha 0.025.
  EXPECT_EQ(gate(args + " --alpha 0.025").exit_code, 0);
  // Faster is never a failure here (MLPerf's own check fails the too-fast submission instead).
  write_file("o2.csv", step_curves({1, 2, 3, 4, 5}));
  EXPECT_EQ(gate(args).exit_code, 0);
}

TEST_F(GateCli, MlperfNonConvergingAndTooFewRuns) {
  write_file("fp32.csv", step_curves({5, 10, 12, 14, 40}));
  const std::string args = "--baseline fp32.csv --candidate o2.csv --metric loss --mode mlperf --target 0.5";
  write_file("o2.csv", step_curves({3, 13, 15, -1, -1}));
  const Outcome two = gate(args);
  EXPECT_EQ(two.exit_code, 1) << two.out_err;
  EXPECT_NE(two.out.find("more than one candidate run never reaches"), std::string::npos) << two.out;
  write_file("o2.csv", step_curves({3, 13, 15}));  // 5 + 3 = 8 runs: enough
  EXPECT_EQ(gate(args).exit_code, 0);
  write_file("b3.csv", step_curves({10, 12, 14}));
  const Outcome few = gate("--baseline b3.csv --candidate o2.csv --metric loss --mode mlperf --target 0.5");
  EXPECT_EQ(few.exit_code, 3) << few.out_err;  // 3 + 3 < 7
  EXPECT_NE(few.out.find("need more seeds"), std::string::npos) << few.out;
  write_file("never.csv", step_curves({10, -1, -1, 12, 14}));
  expect_bad_input("--baseline never.csv --candidate o2.csv --metric loss --mode mlperf --target 0.5",
                   {"never.csv", "baseline reaches"});
  // A NaN anywhere on a curve is a diverged run.
  std::string text = step_curves({3, 13, 15, 17, 20});
  text += "1,60,nan\n";
  write_file("o2-nan.csv", text);
  EXPECT_EQ(gate("--baseline fp32.csv --candidate o2-nan.csv --metric loss --mode mlperf --target 0.5").exit_code, 1);
  // A custom metric needs its direction; higher-is-better reaches ">= T".
  expect_bad_input("--baseline fp32.csv --candidate o2.csv --metric wer --mode mlperf --target 0.5",
                   {"--higher-is-better or --lower-is-better"});
  // As accuracy (1 before k, 0 after) the curves reach ">= 0.5" at step 0 already.
  const json acc = gate_json("--baseline fp32.csv --candidate o2.csv --metric top1 --mode mlperf --target 0.5 "
                             "--higher-is-better",
                             0);
  EXPECT_EQ(acc["mlperf"]["reached"], ">= 0.5");
  EXPECT_EQ(acc["mlperf"]["mean_candidate"], 0.0);
  expect_bad_input(args + " --target nan", {"--target"});
}

// Run directories: the training loss 2/(s + 1) + offset reaches 0.205 at the
// first s with s + 1 >= 2 / (0.205 - offset): offsets 0, 0.01, 0.02, 0.03,
// 0.04 give steps 9, 10, 10, 11, 12 (2/0.205 = 9.76, 2/0.195 = 10.26,
// 2/0.185 = 10.81, 2/0.175 = 11.43, 2/0.165 = 12.12; none on a boundary).
TEST_F(GateCli, MlperfOnRunDirectoriesReadsTheLossCurves) {
  std::vector<RunSpec> b(5), c(5);
  for (int i = 0; i < 5; ++i) {
    b[i].seed = c[i].seed = i + 1;
    b[i].loss_offset = c[i].loss_offset = 0.01 * i;
    c[i].recipe = "o2";
  }
  write_ensemble(root_ / "fp32", b);
  write_ensemble(root_ / "o2", c);
  const json j = gate_json("--baseline fp32 --candidate o2 --metric loss --mode mlperf --target 0.205", 0);
  const double expected[] = {9, 10, 10, 11, 12};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(j["baseline_runs"][i]["value"], expected[i]) << i;
  EXPECT_EQ(j["mlperf"]["baseline_trimmed"], json({10, 10, 11}));
  EXPECT_EQ(j["mlperf"]["t"], 0.0);  // the same steps on both sides
  EXPECT_EQ(j["unit"], "loss");
}

}  // namespace
