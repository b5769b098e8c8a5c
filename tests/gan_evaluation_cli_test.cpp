// `mpverify train --model dcgan --extractor FILE` end to end: two tiny dcgan
// ensembles (fp32/ref and o2/emu, seeds 1 and 2) evaluated by FID, then
// `mpverify gate --metric fid` on them: a verdict exit code and the gate's
// per-run values equal to each summary.json's evaluation. Also: the
// evaluation's extractor record against coreutils' sha256sum, the gate
// refusing runs evaluated through different extractors, and bad train
// options giving exit 2 with nothing written.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_command.h"

namespace {

namespace fs = std::filesystem;
using mpverify::test::run_command;
using nlohmann::json;

class GanEvaluationCli : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/mpverify-gan-cli-XXXXXX";
    ASSERT_NE(mkdtemp(path), nullptr);
    root_ = path;
    extractor_ = root_ / "fx.safetensors";
    const auto r = run_command(bin() + " feature-extractor --steps 10 --out " + extractor_.string(), "");
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  void TearDown() override { fs::remove_all(root_); }
  static std::string bin() { return MPVERIFY_BIN; }
  // Tiny on purpose (seconds): 3 steps, 32 generated against 48 real test images, 2 bootstrap replicates.
  std::string train(const std::string& out, const std::string& recipe) const {
    return bin() + " train --model dcgan --data mnist --optimizer adam --lr 2e-4 --steps 3 --batch-size 16 " +
           "--train-size 64 --test-size 48 --no-histograms --record-every 0 --quiet --seeds 1,2 " + recipe +
           " --extractor " + extractor_.string() + " --fid-samples 32 --fid-bootstrap 2 --out " + (root_ / out).string();
  }
  json summary(const std::string& ensemble, int seed) const {
    return json::parse(std::ifstream(root_ / ensemble / ("seed-" + std::to_string(seed)) / "summary.json"));
  }
  fs::path root_, extractor_;
};

TEST_F(GanEvaluationCli, TwoDcganEnsemblesThroughTheFidGate) {
  auto r = run_command(train("fp32", "--recipe fp32 --backend ref"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = run_command(train("o2", "--recipe o2 --backend emu --scaler torch"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;

  const std::string sha = run_command("sha256sum " + extractor_.string(), "").out.substr(0, 64);
  for (const char* side : {"fp32", "o2"})
    for (int seed : {1, 2}) {
      const json e = summary(side, seed)["evaluation"];
      EXPECT_TRUE(e["fid"].is_number()) << side << seed;
      EXPECT_TRUE(e["fid_stderr"].is_number());
      EXPECT_EQ(e["fid_interval"].size(), 2u);
      EXPECT_LE(e["fid_interval"][0].get<double>(), e["fid_interval"][1].get<double>());
      EXPECT_TRUE(e["kid"].is_number());
      EXPECT_EQ(e["n"], 32);
      EXPECT_EQ(e["n_real"], 48);
      EXPECT_EQ(e["seed"], seed);
      EXPECT_EQ(e["diverged"], false);
      EXPECT_EQ(e["extractor"]["sha256"], sha);
    }

  const std::string gate = bin() + " gate --baseline " + (root_ / "fp32").string() + " --candidate " +
                           (root_ / "o2").string() + " --metric fid --margin 2 --json";
  r = run_command(gate, "");
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 3) << r.exit_code << r.out;
  const json g = json::parse(r.out);
  EXPECT_EQ(g["exit_code"], r.exit_code);
  EXPECT_EQ(g["metric"], "fid");
  for (const auto& [key, side] : {std::pair{"baseline_runs", "fp32"}, {"candidate_runs", "o2"}}) {
    ASSERT_EQ(g[key].size(), 2u);
    for (const json& run : g[key]) {
      const json e = summary(side, run["seed"].get<int>())["evaluation"];
      EXPECT_EQ(run["value"].get<double>(), e["fid"].get<double>());
      EXPECT_EQ(run["diverged"], false);
    }
  }
  EXPECT_EQ(g["paired_seeds"], json::array({1, 2}));

  // A run evaluated through another extractor (its record's sha256 changed
  // by hand) is not comparable: bad input, exit 2, nothing on stdout.
  json edited = summary("o2", 2);
  edited["evaluation"]["extractor"]["sha256"] = std::string(64, '0');
  std::ofstream(root_ / "o2" / "seed-2" / "summary.json") << edited.dump();
  const auto refused = run_command(gate, "");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_EQ(refused.out, "");
  const auto said = run_command(gate, "", true);
  EXPECT_NE(said.out.find("evaluation.extractor.sha256"), std::string::npos) << said.out;
}

TEST_F(GanEvaluationCli, BadOptionsExitWithTwoAndWriteNothing) {
  const std::string base = bin() + " train --data mnist --steps 1 --batch-size 16 --train-size 32 "
                                   "--test-size 32 --quiet --out " + (root_ / "run").string();
  struct Case {
    std::string args, says;
  };
  for (const Case& c : {Case{" --model dcgan --fid-samples 10", "need --extractor"},
                        Case{" --model dcgan --extractor " + (root_ / "missing.safetensors").string(), "--extractor"},
                        Case{" --model dcgan --extractor " + extractor_.string() + " --fid-samples 1", "at least 2 generated"},
                        Case{" --model dcgan --extractor " + extractor_.string() + " --fid-bootstrap 1", "at least 2 replicates"},
                        Case{" --extractor " + extractor_.string() + " --model cnn", "dcgan"}}) {
    const auto r = run_command(base + c.args, "", true);
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.args << ": " << r.out;
    EXPECT_FALSE(fs::exists(root_ / "run")) << c.args;
  }
}

}  // namespace
