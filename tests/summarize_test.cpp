// `mpverify summarize` (analysis/run_summary.h): hand-built records with
// hand-worked pooled rates, lost updates, non-finite events and what-if
// bounds; malformed lines named; then the command on a real run: its pooled
// rates recomputed here from tensors.jsonl, the what-if bounds at the run's
// own scale holding the recorded counts, 100 columns, and bad input exiting 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/run_summary.h"
#include "report/run_summary_report.h"
#include "report/svg_heat_map.h"
#include "support/run_command.h"
#include "support/xml_checker.h"

namespace {

namespace fs = std::filesystem;
using mpverify::analysis::RunSummary;
using mpverify::analysis::RunSummaryInput;
using mpverify::analysis::summarize_run;
using mpverify::test::run_command;
using nlohmann::json;

json line(const std::string& text) { return json::parse(text); }

// Three steps: scale 2^16, 2^16 (skipped: an inf in fc.dw), 2^15; one gradient kind and one weight kind.
RunSummaryInput hand_made_run() {
  RunSummaryInput in;
  in.name = "hand";
  in.steps = {line(R"({"step": 0, "scale": 65536, "skipped": false, "lost_update_rate": 0.1, "nonfinite": null})"),
              line(R"({"step": 1, "scale": 65536, "skipped": true,
                       "nonfinite": {"layer": "fc", "tensor": "dw", "pass": "backward", "count": 3}})"),
              line(R"({"step": 2, "scale": 32768, "skipped": false, "lost_update_rate": 0.3,
                       "lost_update_rate_without_master": 0.5})")};
  const std::string grad = R"("layer": "fc", "tensor": "dw", "pass": "backward", "role": "weight_grad", "format": "fp16")";
  const std::string weight = R"("layer": "fc", "tensor": "value", "pass": "forward", "role": "weight", "format": "fp16")";
  in.tensors = {
      line("{" + grad + R"(, "step": 0, "nonzero_finite": 10, "underflow_to_zero_rate": 0.2, "subnormal_rate": 0.1,
                            "overflow_rate": 0.0, "headroom_log2": 3.5})"),
      line("{" + weight + R"(, "step": 0, "nonzero_finite": 4, "underflow_to_zero_rate": 0, "subnormal_rate": 0,
                              "overflow_rate": 0, "headroom_log2": null})"),
      line("{" + grad + R"(, "step": 2, "nonzero_finite": 30, "underflow_to_zero_rate": 0.1, "subnormal_rate": 0,
                            "overflow_rate": 0.1, "headroom_log2": 2.0})"),
  };
  // Step 0 at 2^16: 4 values in [2^-26, 2^-25), 2 in [2^-25, 2^-24), 1 in [2^14, 2^15), 3 in [2^15, 2^16).
  // Step 2 at 2^15: 5 values in [2^-10, 2^-9).
  in.histograms = std::vector<json>{
      line(R"({"layer": "fc", "tensor": "dw", "role": "weight_grad", "format": "fp16", "step": 0, "zeros": 0,
               "nans": 0, "infinities": 0, "below_range": 0, "above_range": 0, "first_exponent": -26,
               "counts": [4, 2]})"),
      line(R"({"layer": "fc", "tensor": "dw", "role": "weight_grad", "format": "fp16", "step": 0, "zeros": 0,
               "nans": 0, "infinities": 0, "below_range": 0, "above_range": 0, "first_exponent": 14,
               "counts": [1, 3]})"),
      line(R"({"layer": "fc", "tensor": "dw", "role": "weight_grad", "format": "fp16", "step": 2, "zeros": 0,
               "nans": 0, "infinities": 0, "below_range": 0, "above_range": 0, "first_exponent": -10,
               "counts": [5]})")};
  return in;
}

TEST(RunSummary, PooledRatesLostUpdatesAndEventsByHand) {
  const RunSummary s = summarize_run(hand_made_run());
  EXPECT_EQ(s.steps, 3u);
  EXPECT_EQ(s.skipped_steps, 1u);
  EXPECT_EQ(s.recorded_steps, 2u);
  EXPECT_EQ(*s.first_scale, 65536);
  EXPECT_EQ(*s.last_scale, 32768);
  EXPECT_DOUBLE_EQ(*s.lost_update_rate_mean, 0.2);  // (0.1 + 0.3) / 2: step 1 has none
  EXPECT_EQ(*s.lost_update_rate_max, 0.3);
  EXPECT_EQ(*s.lost_update_rate_without_master_mean, 0.5);
  ASSERT_EQ(s.first_nonfinite.size(), 1u);
  EXPECT_EQ(s.first_nonfinite[0].step, 1);
  EXPECT_EQ(s.first_nonfinite[0].layer, "fc");
  EXPECT_EQ(s.first_nonfinite[0].count, 3u);
  ASSERT_EQ(s.kinds.size(), 2u);
  const auto& g = s.kinds[0];
  EXPECT_EQ(g.tensor, "dw");
  EXPECT_TRUE(g.loss_scaled);
  EXPECT_EQ(g.nonzero, 40u);
  EXPECT_EQ(g.underflow, 5u);   // 0.2 x 10 + 0.1 x 30
  EXPECT_EQ(g.subnormal, 1u);
  EXPECT_EQ(g.overflow, 3u);
  EXPECT_EQ(*g.min_headroom_log2, 2.0);
  EXPECT_EQ(*g.worst_step, 0);  // 0.2 > 0.1
  EXPECT_FALSE(s.kinds[1].loss_scaled);
  EXPECT_FALSE(s.kinds[1].min_headroom_log2.has_value());  // null: nothing could overflow
}

// The Monitor's "after" (a value given to a module, or a loss made non-finite outside the modules) is kept,
// and said: a module's name, null for "before any module", absent where the run did not record it.
TEST(RunSummary, WhereAValueWasMadeOutsideTheModulesIsKept) {
  RunSummaryInput in;
  in.name = "after";
  in.steps = {line(R"({"step": 0, "nonfinite": {"layer": "fc2", "tensor": "x", "pass": "forward", "count": 7,
                                                "after": "fc1"}})"),
              line(R"({"step": 1, "nonfinite": {"layer": "fc1", "tensor": "x", "pass": "forward", "count": 2,
                                                "after": null}})"),
              line(R"({"step": 2, "nonfinite": {"layer": "loss", "tensor": "loss", "pass": "forward", "count": 1}})")};
  const RunSummary s = summarize_run(in);
  ASSERT_EQ(s.first_nonfinite.size(), 3u);
  EXPECT_EQ(s.first_nonfinite[0].after, std::optional<std::string>("fc1"));
  EXPECT_EQ(s.first_nonfinite[1].after, std::optional<std::string>(""));
  EXPECT_FALSE(s.first_nonfinite[2].after.has_value());
  EXPECT_EQ(made_after_text(s.first_nonfinite[0]), "made after fc1");
  EXPECT_EQ(made_after_text(s.first_nonfinite[1]), "made before any module");
  EXPECT_EQ(made_after_text(s.first_nonfinite[2]), "");
  const auto events = run_summary_json(s)["first_nonfinite"];
  EXPECT_EQ(events[0]["after"], "fc1");
  EXPECT_TRUE(events[1]["after"].is_null());
  EXPECT_FALSE(events[2].contains("after"));
}

TEST(RunSummary, WhatIfBoundsShiftTheBinades) {
  const RunSummary s = summarize_run(hand_made_run(), {{16, 17, 10}, 5});
  ASSERT_EQ(s.what_if_note, "");
  const auto& w = s.kinds[0].what_if;
  ASSERT_EQ(w.size(), 3u);
  // fp16: smallest subnormal 2^-24 (m = -24), largest finite in binade 15 (M = 15). Certain zero: binade
  // <= -26; possible: binade -25 (only 2^-25 itself, the tie, rounds to 0). Certain overflow: binade >= 16;
  // possible: binade 15. Step 2 ran at 2^15, so its binades move one further up at 2^16.
  // At 2^16: step 0 unshifted (-26, -25, 14, 15), step 2 at -9.
  EXPECT_EQ(w[0].of, 15u);
  EXPECT_EQ(w[0].underflow_certain, 4u);
  EXPECT_EQ(w[0].underflow_possible, 6u);
  EXPECT_EQ(w[0].overflow_certain, 0u);
  EXPECT_EQ(w[0].overflow_possible, 3u);
  // At 2^17: step 0 at -25, -24, 15, 16; step 2 at -8.
  EXPECT_EQ(w[1].underflow_certain, 0u);
  EXPECT_EQ(w[1].underflow_possible, 4u);
  EXPECT_EQ(w[1].overflow_certain, 3u);
  EXPECT_EQ(w[1].overflow_possible, 4u);
  // At 2^10: step 0 at -32, -31, 8, 9; step 2 at -15 (subnormal, kept).
  EXPECT_EQ(w[2].underflow_certain, 6u);
  EXPECT_EQ(w[2].underflow_possible, 6u);
  EXPECT_EQ(w[2].overflow_possible, 0u);
  EXPECT_TRUE(s.kinds[1].what_if.empty());  // weights are not loss-scaled
}

TEST(RunSummary, WhatIfNeedsHistogramsAndPowerOfTwoScales) {
  RunSummaryInput in = hand_made_run();
  in.steps[0]["scale"] = 1000;
  EXPECT_NE(summarize_run(in, {{16}, 5}).what_if_note.find("not a power of two"), std::string::npos);
  in = hand_made_run();
  in.histograms.reset();
  const RunSummary s = summarize_run(in, {{16}, 5});
  EXPECT_NE(s.what_if_note.find("no histograms.jsonl"), std::string::npos);
  EXPECT_TRUE(s.kinds[0].what_if.empty());
}

TEST(RunSummary, MalformedLinesAreNamed) {
  const auto message = [](RunSummaryInput in) {
    try {
      summarize_run(in);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  RunSummaryInput in = hand_made_run();
  in.tensors[2].erase("nonzero_finite");
  EXPECT_EQ(message(in), "hand/tensors.jsonl line 3: \"nonzero_finite\" is missing");
  in = hand_made_run();
  in.tensors[0]["underflow_to_zero_rate"] = 1.5;
  EXPECT_NE(message(in).find("line 1: \"underflow_to_zero_rate\" must be a rate"), std::string::npos);
  in = hand_made_run();
  in.steps[1]["step"] = "one";
  EXPECT_NE(message(in).find("hand/steps.jsonl line 2: \"step\""), std::string::npos);
}

TEST(RunSummaryReport, TheHeatMapHoldsEachStepsRate) {
  const mpverify::report::HeatMap map = mpverify::report::underflow_heat_map(summarize_run(hand_made_run()));
  ASSERT_EQ(map.columns.size(), 2u);  // the recorded steps 0 and 2
  EXPECT_EQ(map.columns[1].first_step, 2);
  ASSERT_EQ(map.rows.size(), 2u);
  EXPECT_EQ(map.rows[0].label, "fc dw");
  EXPECT_EQ(map.rows[0].values[0], 0.2);  // 2 of 10
  EXPECT_EQ(map.rows[0].values[1], 0.1);  // 3 of 30
  EXPECT_EQ(map.rows[1].values[0], 0.0);  // recorded, nothing lost: grey, not blank
  EXPECT_FALSE(map.rows[1].values[1].has_value());  // not recorded at step 2: blank
  // Every drawn cell is a rect with its title; the SVG is well formed.
  const auto svg = mpverify::test::parse_xml(mpverify::report::svg_heat_map(map));
  EXPECT_EQ(svg.name, "svg");
  std::size_t cells = 0;
  for (const auto* r : svg.all("rect")) cells += r->first("title") != nullptr;
  EXPECT_EQ(cells, 3u);
}

TEST(RunSummaryReport, ManyStepsArePooledIntoEqualColumns) {
  RunSummaryInput in;
  in.name = "long";
  for (int step = 0; step < 400; ++step) {
    in.steps.push_back({{"step", step}, {"scale", 1}});
    in.tensors.push_back({{"step", step}, {"layer", "l"}, {"tensor", "dw"}, {"role", "weight_grad"},
                          {"format", "fp16"}, {"pass", "backward"}, {"nonzero_finite", 4},
                          {"underflow_to_zero_rate", step < 3 ? 0.25 : 0.0}, {"subnormal_rate", 0},
                          {"overflow_rate", 0}, {"headroom_log2", 1}});
  }
  const mpverify::report::HeatMap map = mpverify::report::underflow_heat_map(summarize_run(in));
  ASSERT_EQ(map.columns.size(), 134u);  // ceil(400 / 175) = 3 steps a column
  EXPECT_EQ(map.columns[0].last_step, 2);
  EXPECT_EQ(map.columns.back().first_step, 399);
  EXPECT_EQ(map.rows[0].values[0], 0.25);  // 3 of 12
  EXPECT_EQ(map.rows[0].values[1], 0.0);
}

TEST(RunSummaryReport, ColoursRunFromPaleToDarkByDecade) {
  using mpverify::report::heat_colour;
  EXPECT_EQ(heat_colour(1e-9, -6), "#ffffcc");  // at or below the palest decade
  EXPECT_EQ(heat_colour(1e-6, -6), "#ffffcc");
  EXPECT_EQ(heat_colour(1e-3, -6), "#fd8d3c");  // halfway in log10: the middle stop
  EXPECT_EQ(heat_colour(1.0, -6), "#800026");
}

// A real run, summarised by the command.
class SummarizeCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // This process's own: ctest runs the suite's tests as separate processes, several at a time.
    dir_ = fs::temp_directory_path() / ("mpverify-summarize-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    const std::string train = std::string(MPVERIFY_BIN) +
                              " train --model mlp --data synthetic --train-size 256 --test-size 64 --batch-size 32 "
                              "--steps 6 --recipe o2 --scaler static --scaler-opt scale=1024 --backend emu --quiet --out ";
    ASSERT_EQ(run_command(train + (dir_ / "run").string(), "").exit_code, 0);
    ASSERT_EQ(run_command(train + (dir_ / "bare").string() + " --no-recorders", "").exit_code, 0);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static fs::path dir_;
};
fs::path SummarizeCli::dir_;

TEST_F(SummarizeCli, PooledRatesAreTheRecordsOwnAndTheBoundsHoldThem) {
  const auto r = run_command(std::string(MPVERIFY_BIN) + " summarize " + (dir_ / "run").string() +
                                 " --what-if 2^10,2^4 --json",
                             "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json s = json::parse(r.out);
  // Recomputed here: per (layer, tensor, role) the sums of rate x n and of n over tensors.jsonl.
  std::map<std::string, std::pair<double, double>> under;
  std::ifstream tensors(dir_ / "run" / "tensors.jsonl");
  for (std::string text; std::getline(tensors, text);) {
    const json t = json::parse(text);
    auto& [k, n] = under[t["layer"].get<std::string>() + "/" + t["tensor"].get<std::string>() + "/" +
                         t["role"].get<std::string>()];
    k += std::round(t["underflow_to_zero_rate"].get<double>() * t["nonzero_finite"].get<double>());
    n += t["nonzero_finite"].get<double>();
  }
  ASSERT_EQ(s["kinds"].size(), under.size());
  for (const json& k : s["kinds"]) {
    const auto& [count, n] = under.at(k["layer"].get<std::string>() + "/" + k["tensor"].get<std::string>() + "/" +
                                      k["role"].get<std::string>());
    EXPECT_EQ(k["underflow"].get<double>(), count) << k.dump();
    EXPECT_EQ(k["nonzero"].get<double>(), n);
    if (!k["loss_scaled"].get<bool>()) continue;
    // The static scale is 2^10 at every step: at 2^10 the bounds hold what was recorded.
    const json& at_own = k["what_if"][0];
    ASSERT_EQ(at_own["scale_log2"], 10);
    EXPECT_EQ(at_own["of"], k["nonzero"]);
    EXPECT_LE(at_own["underflow_certain"].get<double>(), count);
    EXPECT_GE(at_own["underflow_possible"].get<double>(), count);
    EXPECT_LE(at_own["overflow_certain"], k["overflow"]);
    EXPECT_GE(at_own["overflow_possible"], k["overflow"]);
    // A smaller scale can only lose more to zero.
    EXPECT_GE(k["what_if"][1]["underflow_certain"].get<double>(), at_own["underflow_certain"].get<double>());
  }
  // The text fits 100 columns.
  const auto text = run_command(std::string(MPVERIFY_BIN) + " summarize " + (dir_ / "run").string() +
                                    " --what-if 2^10",
                                "");
  ASSERT_EQ(text.exit_code, 0);
  std::istringstream lines(text.out);
  int n = 0;
  for (std::string l; std::getline(lines, l); ++n) EXPECT_LE(l.size(), 100u) << l;
  EXPECT_GT(n, 5);
}

TEST_F(SummarizeCli, TheReportAndItsPageHoldTheFigures) {
  const fs::path report = dir_ / "reports" / "summary.md";
  const auto r = run_command(std::string(MPVERIFY_BIN) + " summarize " + (dir_ / "run").string() + " --report " +
                                 report.string() + " --what-if 2^10",
                             "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* f : {"summary.md", "summary-underflow.svg", "summary-histograms.svg", "summary.html"})
    EXPECT_NE(r.out.find("wrote " + (dir_ / "reports" / f).string()), std::string::npos) << f << "\n" << r.out;
  std::ifstream md_in(report), html_in(dir_ / "reports" / "summary.html"), hist_in(dir_ / "reports" / "summary-histograms.svg");
  const std::string md((std::istreambuf_iterator<char>(md_in)), {}), html((std::istreambuf_iterator<char>(html_in)), {});
  const std::string hist((std::istreambuf_iterator<char>(hist_in)), {});
  EXPECT_NE(md.find("](summary-underflow.svg)"), std::string::npos);
  EXPECT_NE(md.find("](summary-histograms.svg)"), std::string::npos);
  EXPECT_NE(md.find("| 2^10 |"), std::string::npos);
  EXPECT_EQ(mpverify::test::parse_xml(hist).name, "svg");
  EXPECT_NE(hist.find("(log)"), std::string::npos);  // counts on a log axis
  std::size_t figures = 0;
  for (std::size_t p = html.find("<svg"); p != std::string::npos; p = html.find("<svg", p + 1)) ++figures;
  EXPECT_EQ(figures, 2u);
  // A report name that is not NAME.md is refused before anything is written.
  const auto bad = run_command(std::string(MPVERIFY_BIN) + " summarize " + (dir_ / "run").string() + " --report " +
                                   (dir_ / "other" / "summary.txt").string(),
                               "");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_FALSE(fs::exists(dir_ / "other"));
}

TEST_F(SummarizeCli, BadInputExitsTwoWithNothingOnStdout) {
  for (const auto& [args, fragment] : std::vector<std::pair<std::string, std::string>>{
           {(dir_ / "no-such-run").string(), "not a directory"},
           {(dir_ / "bare").string(), "--no-recorders"},
           {(dir_ / "run").string() + " --what-if 3", "not a power of two"},
           {(dir_ / "run").string() + " --what-if 2^x", "--what-if"}}) {
    const auto err = run_command(std::string(MPVERIFY_BIN) + " summarize " + args, "", true);
    const auto out = run_command(std::string(MPVERIFY_BIN) + " summarize " + args, "");
    EXPECT_EQ(out.exit_code, 2) << args;
    EXPECT_EQ(out.out, "") << args;
    EXPECT_NE(err.out.find(fragment), std::string::npos) << args << ": " << err.out;
  }
}

}  // namespace
