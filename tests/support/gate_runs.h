// Crafted run directories for the parity gate's CLI tests (gate_test.cpp,
// gate_values_test.cpp): what `mpverify train` writes, with the values the
// test chooses, and a fixture that runs `mpverify gate` in a fresh directory.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/run_command.h"

namespace mpverify::test {

namespace fs = std::filesystem;
using nlohmann::json;

struct RunSpec {
  std::int64_t seed = 1;
  std::string recipe = "fp32";
  std::optional<double> accuracy = 0.9;  // nullopt writes null
  bool accuracy_key = true;
  std::optional<double> fid;  // written with fid_stderr, its replicates and a KID when set
  double kid = 0.01;
  double fid_stderr = 0.3;
  int fid_replicates = 50;  // evaluation.fid_bootstrap_replicates
  bool aborted = false;
  bool final_loss_null = false;
  std::int64_t steps = 20;
  double loss_offset = 0;  // losses: 2 / (step + 1) + loss_offset
  json config_overrides = json::object();
  int test_size = 1000;
  json extra_evaluation = json::object();  // more figures of the evaluation (perplexity, a user's own)
};

inline json config_for(const RunSpec& r) {
  json c = {{"model", r.fid ? "dcgan" : "mlp"},
            {"data", "synthetic-digits"},
            {"train_size", 4096},
            {"recipe", r.recipe},
            {"scaler", "torch"},
            {"backend", "emu"},
            {"steps", r.steps},
            {"batch_size", 32},
            {"seed", r.seed},
            {"optimizer", "sgd"}};
  for (auto it = r.config_overrides.begin(); it != r.config_overrides.end(); ++it) c[it.key()] = it.value();
  return c;
}

inline void write_run(const fs::path& dir, const RunSpec& r) {
  fs::create_directories(dir);
  json evaluation = json::object();
  if (r.fid) {
    evaluation = {{"fid", *r.fid},
                  {"fid_stderr", r.fid_stderr},
                  {"fid_bootstrap_replicates", r.fid_replicates},
                  {"kid", r.kid},
                  {"kid_stderr", 0.001},
                  {"n", 2000}};
  } else if (r.accuracy_key) {
    evaluation = {{"test_accuracy", r.accuracy ? json(*r.accuracy) : json(nullptr)},
                  {"test_loss", 0.3},
                  {"test_size", r.test_size}};
  }
  for (auto it = r.extra_evaluation.begin(); it != r.extra_evaluation.end(); ++it) evaluation[it.key()] = it.value();
  const json summary = {{"config", config_for(r)},
                        {"steps", r.steps},
                        {"skipped_steps", 0},
                        {"aborted", r.aborted},
                        {"final_loss", r.final_loss_null ? json(nullptr) : json(0.25)},
                        {"evaluation", evaluation}};
  std::ofstream(dir / "summary.json") << summary.dump(2) << "\n";
  std::ofstream steps(dir / "steps.jsonl");
  for (std::int64_t s = 0; s < r.steps; ++s)
    steps << json{{"step", s}, {"loss", 2.0 / static_cast<double>(s + 1) + r.loss_offset}, {"scale", 65536.0}}.dump()
          << "\n";
}

// An ensemble: one run per spec, each in seed-<seed>/.
inline void write_ensemble(const fs::path& dir, const std::vector<RunSpec>& runs) {
  fs::create_directories(dir);
  json seeds = json::array();
  for (const RunSpec& r : runs) {
    seeds.push_back(r.seed);
    write_run(dir / ("seed-" + std::to_string(r.seed)), r);
  }
  std::ofstream(dir / "ensemble.json") << json{{"seeds", seeds}, {"config", config_for(runs.front())}}.dump(2);
}

inline std::vector<RunSpec> accuracies(const std::vector<std::int64_t>& seeds, const std::vector<double>& values,
                                const std::string& recipe) {
  std::vector<RunSpec> runs;
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    RunSpec r;
    r.seed = seeds[i];
    r.recipe = recipe;
    r.accuracy = values[i];
    runs.push_back(r);
  }
  return runs;
}

class GateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/mpverify-gate-XXXXXX";
    ASSERT_NE(mkdtemp(path), nullptr);
    root_ = path;
  }
  void TearDown() override { fs::remove_all(root_); }

  struct Outcome {
    int exit_code;
    std::string out;      // stdout only
    std::string out_err;  // stdout and stderr
  };
  Outcome gate(const std::string& args) {
    const std::string command = std::string(MPVERIFY_BIN) + " gate " + args;
    const auto only_out = run_command("cd " + root_.string() + " && " + command, "");
    const auto both = run_command("cd " + root_.string() + " && " + command, "", true);
    EXPECT_EQ(only_out.exit_code, both.exit_code);
    return {only_out.exit_code, only_out.out, both.out};
  }
  json gate_json(const std::string& args, int expected_exit) {
    const Outcome o = gate(args + " --json");
    EXPECT_EQ(o.exit_code, expected_exit) << o.out_err;
    return json::parse(o.out);
  }
  // Bad input: exit 2, nothing on stdout, no report, and a message holding every fragment.
  void expect_bad_input(const std::string& args, const std::vector<std::string>& fragments) {
    const fs::path report = root_ / "bad-input-report.xml";
    const Outcome o = gate(args + " --junit " + report.string());
    EXPECT_EQ(o.exit_code, 2) << args << "\n" << o.out_err;
    EXPECT_EQ(o.out, "") << args;
    EXPECT_FALSE(fs::exists(report)) << args;
    for (const std::string& f : fragments) EXPECT_NE(o.out_err.find(f), std::string::npos) << f << "\n" << o.out_err;
  }

  void write_file(const std::string& name, const std::string& text) { std::ofstream(root_ / name) << text; }

  fs::path root_;
};

}  // namespace mpverify::test
