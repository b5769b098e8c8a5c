// `mpverify train` and `mpverify compare-runs` end to end: a run directory
// with the issue's files and fields, refusals with exit code 2 and no output,
// and the comparison of an fp32 run with an o2 run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "record/run_log.h"
#include "support/run_command.h"

namespace {

namespace fs = std::filesystem;
using mpverify::test::run_command;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("mpverify-train-cli-" + name);
  fs::remove_all(dir);
  return dir;
}

std::string train(const std::string& args) {
  return std::string(MPVERIFY_BIN) + " train --model mlp --train-size 256 --batch-size 32 --steps 6 --quiet " + args;
}

TEST(TrainCli, WritesARunDirectoryWithTheIssuesFields) {
  const fs::path dir = fresh_dir("o2");
  const auto r = run_command(train("--recipe o2 --scaler torch --backend emu --seed 3 --out " + dir.string()), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* file : {"steps.jsonl", "tensors.jsonl", "histograms.jsonl", "summary.json"})
    EXPECT_TRUE(fs::exists(dir / file)) << file;
  for (const char* tmp : {"steps.jsonl.tmp", "summary.json.tmp"}) EXPECT_FALSE(fs::exists(dir / tmp)) << tmp;
  const auto steps = mpverify::record::read_steps(dir);
  ASSERT_EQ(steps.size(), 6u);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i]["step"].get<std::size_t>(), i);
    for (const char* key : {"loss", "scale", "underflow_rate", "lost_update_rate"})
      EXPECT_TRUE(steps[i][key].is_number()) << key;
    EXPECT_TRUE(steps[i]["skipped"].is_boolean());
  }
  EXPECT_EQ(steps[0]["scale"].get<double>(), 65536.0);  // torch's initial scale
  const auto summary = nlohmann::json::parse(std::ifstream(dir / "summary.json"));
  EXPECT_EQ(summary["config"]["recipe"], "o2");
  EXPECT_EQ(summary["steps"].get<int>(), 6);
  EXPECT_TRUE(summary["thresholds"].contains("fp16"));
  // A tensor line per stored tensor, weight and update, with its format.
  const auto tensors = mpverify::record::read_json_lines(dir / "tensors.jsonl");
  bool saw_dw = false;
  for (const auto& t : tensors) saw_dw = saw_dw || (t["layer"] == "fc1" && t["tensor"] == "dw" && t["format"] == "fp16");
  EXPECT_TRUE(saw_dw);
}

TEST(TrainCli, TheSameSeedWritesTheSameStepLog) {
  const fs::path a = fresh_dir("seed-a"), b = fresh_dir("seed-b");
  ASSERT_EQ(run_command(train("--recipe o2 --scaler torch --backend emu --out " + a.string()), "").exit_code, 0);
  ASSERT_EQ(run_command(train("--recipe o2 --scaler torch --backend emu --out " + b.string()), "").exit_code, 0);
  std::ifstream fa(a / "steps.jsonl"), fb(b / "steps.jsonl");
  const std::string sa((std::istreambuf_iterator<char>(fa)), {}), sb((std::istreambuf_iterator<char>(fb)), {});
  EXPECT_FALSE(sa.empty());
  EXPECT_EQ(sa, sb);
}

TEST(TrainCli, BadInputExitsWith2AndWritesNothing) {
  const fs::path dir = fresh_dir("bad");
  for (const std::string& args : {std::string("--recipe o7"), std::string("--recipe o2 --backend ref"),
                                  std::string("--scaler sometimes"), std::string("--model resnet"),
                                  std::string("--inject-inf x:fc1.w"), std::string("--backend tpu")}) {
    const auto r = run_command(train(args + " --out " + dir.string()), "", true);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find("error"), std::string::npos) << args;
    EXPECT_FALSE(fs::exists(dir)) << args << " left a directory";
  }
}

TEST(TrainCli, AnExistingRunIsNotReplacedWithoutForce) {
  const fs::path dir = fresh_dir("force");
  ASSERT_EQ(run_command(train("--out " + dir.string()), "").exit_code, 0);
  const auto again = run_command(train("--out " + dir.string()), "", true);
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.out.find("--force"), std::string::npos) << again.out;
  EXPECT_EQ(run_command(train("--force --out " + dir.string()), "").exit_code, 0);
}

TEST(TrainCli, CompareRunsReadsTwoRunDirectories) {
  const fs::path a = fresh_dir("cmp-fp32"), b = fresh_dir("cmp-o2");
  ASSERT_EQ(run_command(train("--recipe fp32 --backend ref --out " + a.string()), "").exit_code, 0);
  ASSERT_EQ(run_command(train("--recipe o2 --scaler torch --backend emu --out " + b.string()), "").exit_code, 0);
  const auto r = run_command(std::string(MPVERIFY_BIN) + " compare-runs " + a.string() + " " + b.string() + " --json", "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NE(j.dump().find("recipe"), std::string::npos);  // the differing configuration is named
}

}  // namespace
