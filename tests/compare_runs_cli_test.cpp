// `mpverify compare-runs` as a user runs it on two run directories written
// here: exit codes 0, 1 (the tolerance gate) and 2 (unusable input), the JSON
// and its --out copy, the compact text table, and error messages that name
// the file and line, with nothing on standard output or in --out on error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/run_command.h"

namespace {

namespace fs = std::filesystem;
using mpverify::test::run_command;
using nlohmann::json;

// A fresh directory under /tmp, removed with the test.
class CompareRunsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/mpverify-compare-runs-XXXXXX";
    ASSERT_NE(mkdtemp(path), nullptr);
    root_ = path;
  }
  void TearDown() override { fs::remove_all(root_); }

  // Loss of step s: 1 + s/8 + offset(s); sums of powers of two keep B - A exact.
  fs::path write_run(const std::string& name, int steps, double (*offset)(int), bool tensors = true,
                     const std::string& recipe = "fp32") {
    const fs::path dir = root_ / name;
    fs::create_directories(dir);
    std::ofstream out(dir / "steps.jsonl");
    for (int s = 0; s < steps; ++s)
      out << json{{"step", s},
                  {"loss", 1.0 + s / 8.0 + offset(s)},
                  {"scale", 65536.0},
                  {"skipped", s == 3},
                  {"underflow_rate", 0.25},
                  {"lost_update_rate", 0.0}}
                 .dump()
          << "\n";
    if (tensors) {
      std::ofstream t(dir / "tensors.jsonl");
      for (int s = 0; s < steps; s += 2)
        t << json{{"step", s},
                  {"layer", "fc1"},
                  {"tensor", "dw"},
                  {"role", "weight_grad"},
                  {"pass", "backward"},
                  {"format", "fp16"},
                  {"count", 8},
                  {"zeros_in", 0},
                  {"nonzero_finite", 8},
                  {"underflow_to_zero_rate", offset(s) == 0 ? 0.0 : 0.5},
                  {"subnormal_rate", 0.0},
                  {"overflow_rate", 0.0},
                  {"max_abs", 1.0},
                  {"headroom_log2", nullptr},
                  {"norm", offset(s) == 0 ? 2.0 : 3.0}}
                 .dump()
          << "\n";
    }
    std::ofstream(dir / "summary.json") << json{
        {"config", {{"model", "mlp"}, {"recipe", recipe}, {"seed", 1}}},
        {"steps", steps}}.dump(2);
    return dir;
  }

  std::string compare(const fs::path& a, const fs::path& b, const std::string& options = "") const {
    return std::string(MPVERIFY_BIN) + " compare-runs " + a.string() + " " + b.string() + " " + options;
  }

  fs::path root_;
};

double none(int) { return 0; }
double quarter_after_5(int s) { return s >= 5 ? 0.25 : 0.0; }

TEST_F(CompareRunsCli, JsonOfTwoRuns) {
  const auto a = write_run("a", 10, none);
  const auto b = write_run("b", 12, quarter_after_5, true, "o2");
  const auto r = run_command(compare(a, b, "--json"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["summary"]["common_steps"], 10);
  EXPECT_EQ(j["summary"]["steps_only_in_b"], 2);
  EXPECT_EQ(j["summary"]["first_step_only_in_b"], 10);
  EXPECT_EQ(j["summary"]["max_abs_loss_difference"], 0.25);
  EXPECT_EQ(j["summary"]["max_abs_loss_difference_step"], 5);
  EXPECT_EQ(j["summary"]["skipped_steps_a"], 1);
  ASSERT_EQ(j["steps"].size(), 10u);
  EXPECT_EQ(j["steps"][4]["loss_difference"], 0.0);
  EXPECT_EQ(j["steps"][7]["loss_difference"], 0.25);
  EXPECT_EQ(j["steps"][7]["loss_a"], 1.0 + 7 / 8.0);
  ASSERT_EQ(j["config_differences"].size(), 1u);
  EXPECT_EQ(j["config_differences"][0]["key"], "recipe");
  EXPECT_EQ(j["config_differences"][0]["b"], "o2");
  ASSERT_EQ(j["tensors"].size(), 1u);
  // Recorded at 0, 2, 4, 6, 8; B's underflow rate is 0.5 from step 6: mean (0+0+0+0.5+0.5)/5 = 0.2.
  EXPECT_DOUBLE_EQ(j["tensors"][0]["mean_underflow_to_zero_rate_b"].get<double>(), 0.2);
  EXPECT_EQ(j["tensors"][0]["norm_ratio"], 1.5);                  // 3 / 2 at step 8
  EXPECT_TRUE(j["tensors"][0]["min_headroom_log2_a"].is_null());  // +inf
}

TEST_F(CompareRunsCli, ToleranceGateExitCodes) {
  const auto a = write_run("a", 10, none);
  const auto b = write_run("b", 10, quarter_after_5);
  const auto over = run_command(compare(a, b, "--tolerance-loss 0.125"), "");
  EXPECT_EQ(over.exit_code, 1) << over.out;
  EXPECT_NE(over.out.find("EXCEEDED at 5 steps, first at step 5"), std::string::npos) << over.out;
  const auto within = run_command(compare(a, b, "--tolerance-loss 0.25"), "");
  EXPECT_EQ(within.exit_code, 0) << within.out;
  EXPECT_NE(within.out.find("not exceeded"), std::string::npos) << within.out;
  const auto no_gate = run_command(compare(a, b), "");
  EXPECT_EQ(no_gate.exit_code, 0);
  // The JSON says the same, and --out is written when the gate fails (a result, not an error).
  const fs::path out = root_ / "cmp.json";
  const auto json_over = run_command(compare(a, b, "--json --tolerance-loss 0.125 --out " + out.string()), "");
  EXPECT_EQ(json_over.exit_code, 1);
  EXPECT_EQ(json::parse(json_over.out)["summary"]["first_step_exceeding_tolerance"], 5);
  ASSERT_TRUE(fs::exists(out));
  for (const char* bad : {"-1", "nan", "x"}) {
    const auto r = run_command(compare(a, b, std::string("--tolerance-loss ") + bad), "", true);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.out;
  }
}

TEST_F(CompareRunsCli, OutHoldsTheJsonDocument) {
  const auto a = write_run("a", 10, none);
  const auto b = write_run("b", 10, quarter_after_5);
  const fs::path out = root_ / "cmp.json";
  const auto text = run_command(compare(a, b, "--out " + out.string()), "");
  ASSERT_EQ(text.exit_code, 0) << text.out;
  EXPECT_NE(text.out.find("steps: 10 in common"), std::string::npos) << text.out;  // stdout stays text
  std::ifstream in(out);
  const json written = json::parse(in);
  const auto as_json = run_command(compare(a, b, "--json"), "");
  EXPECT_EQ(written, json::parse(as_json.out));
  EXPECT_FALSE(fs::exists(root_ / "cmp.json.tmp"));
}

TEST_F(CompareRunsCli, TextIsCompactUnlessAllSteps) {
  const auto a = write_run("a", 200, none, false);
  const auto b = write_run(
      "b", 200, [](int s) { return s == 137 ? 0.5 : 0.0; }, false);
  // Table rows: lines whose first field is a step number.
  auto rows = [](const std::string& text) {
    std::vector<long> steps;
    std::size_t at = 0;
    while (at < text.size()) {
      const std::size_t end = text.find('\n', at);
      const std::string line = text.substr(at, end - at);
      char* rest = nullptr;
      const long v = std::strtol(line.c_str(), &rest, 10);
      if (rest != line.c_str() && (*rest == ' ' || *rest == '\0')) steps.push_back(v);
      at = end == std::string::npos ? text.size() : end + 1;
    }
    return steps;
  };
  const auto r = run_command(compare(a, b), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto shown = rows(r.out);
  EXPECT_GE(shown.size(), 15u) << r.out;
  EXPECT_LE(shown.size(), 25u) << r.out;
  EXPECT_EQ(shown.front(), 0);
  EXPECT_EQ(shown.back(), 199);
  EXPECT_NE(std::find(shown.begin(), shown.end(), 137), shown.end()) << r.out;  // the step of max |B - A|
  EXPECT_NE(r.out.find("max |B - A| 0.5 at step 137"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tensors.jsonl not present in A and B"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("config: identical"), std::string::npos) << r.out;
  const auto all = run_command(compare(a, b, "--all-steps"), "");
  EXPECT_EQ(rows(all.out).size(), 200u);
}

TEST_F(CompareRunsCli, OptionalFilesNotPresent) {
  const auto a = write_run("a", 4, none);
  const auto b = write_run("b", 4, none);
  fs::remove(b / "tensors.jsonl");
  fs::remove(b / "summary.json");
  const auto r = run_command(compare(a, b), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("tensors.jsonl not present in B"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("summary.json not present in B"), std::string::npos) << r.out;
  const json j = json::parse(run_command(compare(a, b, "--json"), "").out);
  EXPECT_EQ(j["files"]["tensors.jsonl"]["b"], "not present");
  EXPECT_TRUE(j["tensors"].is_null());
}

TEST_F(CompareRunsCli, UnusableInputExits2WithTheReasonAndNoOutput) {
  const auto a = write_run("a", 4, none);
  const auto b = write_run("b", 4, none);
  const fs::path out = root_ / "cmp.json";
  auto expect_error = [&](const fs::path& x, const fs::path& y, const std::string& message) {
    const std::string command = compare(x, y, "--json --out " + out.string());
    const auto quiet = run_command(command, "");
    EXPECT_EQ(quiet.exit_code, 2) << command;
    EXPECT_EQ(quiet.out, "") << command;  // stdout empty
    EXPECT_FALSE(fs::exists(out)) << command;
    const auto loud = run_command(command, "", true);
    EXPECT_NE(loud.out.find(message), std::string::npos) << command << "\n" << loud.out;
  };
  expect_error(root_ / "missing", b, "run A: directory '" + (root_ / "missing").string() + "' does not exist");
  expect_error(a, a / "steps.jsonl", "is not a directory");
  const fs::path empty = root_ / "empty";
  fs::create_directories(empty);
  expect_error(a, empty, (empty / "steps.jsonl").string() + "' not found");

  const fs::path broken = root_ / "broken";
  fs::create_directories(broken);
  std::ofstream(broken / "steps.jsonl") << json{{"step", 0},        {"loss", 1.0},           {"scale", 1.0},
                                                {"skipped", false}, {"underflow_rate", 0.0}, {"lost_update_rate", 0.0}}
                                               .dump()
                                        << "\n{\"step\": 1, \"loss\": 1.0, \"sc\n";
  expect_error(a, broken, (broken / "steps.jsonl").string() + "' line 2 is not JSON");

  const fs::path wrong = root_ / "wrong";
  fs::create_directories(wrong);
  std::ofstream(wrong / "steps.jsonl") << R"({"step": 0, "loss": 1.0, "scale": "big", "skipped": false, )"
                                       << R"("underflow_rate": 0, "lost_update_rate": 0})"
                                       << "\n";
  expect_error(wrong, b, (wrong / "steps.jsonl").string() + " line 1: \"scale\" must be a number or null, got \"big\"");

  const fs::path later = root_ / "later";
  fs::create_directories(later);
  std::ofstream(later / "steps.jsonl") << R"({"step": 100, "loss": 1.0, "scale": 1, "skipped": false, )"
                                       << R"("underflow_rate": 0, "lost_update_rate": 0})"
                                       << "\n";
  expect_error(a, later, "no step in common");

  const auto bad_summary = write_run("bad_summary", 4, none);
  std::ofstream(bad_summary / "summary.json") << "{\"config\": ";
  expect_error(a, bad_summary, (bad_summary / "summary.json").string() + ": byte 11: not valid JSON");
  // A config nested 22,000 objects deep once overflowed the stack (the comparison flattens configs).
  const auto deep = write_run("deep", 4, none);
  std::string nested;
  for (int i = 0; i < 22000; ++i) nested += "{\"k\":";
  nested += "1" + std::string(22000, '}');
  std::ofstream(deep / "summary.json") << "{\"config\": " << nested << "}";
  expect_error(a, deep, "nested deeper than 64 levels");

  const auto bad_tensors = write_run("bad_tensors", 4, none);
  std::ofstream(bad_tensors / "tensors.jsonl") << R"({"step": 0, "tensor": "dw"})"
                                               << "\n";
  expect_error(a, bad_tensors, (bad_tensors / "tensors.jsonl").string() + " line 1: missing key \"layer\"");

  // An --out that cannot be written: exit 2, naming it.
  const auto r = run_command(compare(a, b, "--out " + (root_ / "no" / "such" / "dir.json").string()), "", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--out"), std::string::npos) << r.out;
  // A missing argument is a usage error too.
  EXPECT_EQ(run_command(std::string(MPVERIFY_BIN) + " compare-runs " + a.string(), "").exit_code, 2);
}

}  // namespace
