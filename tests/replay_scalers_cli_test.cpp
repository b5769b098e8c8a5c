// `mpverify replay-scalers` as a user runs it: the JSON's shape and values,
// options, and bad input (exit 2, nothing on standard output).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/run_command.h"

namespace {

using mpverify::test::run_command;

std::string replay(const std::string& args) { return std::string(MPVERIFY_BIN) + " replay-scalers " + args; }

TEST(ReplayScalersCli, JsonShape) {
  // torch with interval 2: clean (t=1), clean (t=2: 2^16 -> 2^17), inf (-> 2^16).
  // deepspeed with H=2: the inf only decrements h: 2^16 throughout.
  const auto r = run_command(
      replay("--trace - --strategies torch,deepspeed,delayed --strategy-opt torch.interval=2 --json"),
      "# flags\n0\n0\n\n1\n");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("summary"));
  ASSERT_EQ(j["torch"].size(), 3u);
  const double torch_scales[] = {65536, 65536, 131072};
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(j["torch"][k]["step"], k);
    EXPECT_EQ(j["torch"][k]["scale"].get<double>(), torch_scales[k]);
    EXPECT_EQ(j["torch"][k]["skipped"].get<bool>(), k == 2);
    EXPECT_FALSE(j["torch"][k].contains("aborted"));
    EXPECT_EQ(j["deepspeed"][k]["scale"].get<double>(), 65536.0);
  }
  // delayed reads the flags as amaxes 0, 0, 1: 1 until the amax 1 gives 448.
  EXPECT_EQ(j["delayed"][2]["scale"].get<double>(), 1.0);
  EXPECT_EQ(j["summary"]["delayed"]["final_scale"].get<double>(), 448.0);
  EXPECT_EQ(j["summary"]["torch"]["skipped_steps"], 1);
  EXPECT_EQ(j["summary"]["torch"]["final_scale"].get<double>(), 65536.0);
  EXPECT_EQ(j["summary"]["deepspeed"]["skipped_steps"], 1);
  EXPECT_TRUE(j["summary"]["deepspeed"]["aborted_at_step"].is_null());
}

TEST(ReplayScalersCli, AbortAndConfigFile) {
  char path[] = "/tmp/mpverify-scalers-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::ofstream(path) << R"({"deepspeed": {"init": 2, "hysteresis": 1}})";
  // 2 (inf) -> 1 = min; 1 (inf): abort at step 1; step 2 is not run.
  const auto r =
      run_command(replay(std::string("--trace - --strategies deepspeed --json --config ") + path), "1\n1\n0\n");
  std::remove(path);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["deepspeed"].size(), 2u);
  EXPECT_TRUE(j["deepspeed"][1]["aborted"].get<bool>());
  EXPECT_EQ(j["summary"]["deepspeed"]["aborted_at_step"], 1);
}

TEST(ReplayScalersCli, TextTable) {
  const auto r = run_command(replay("--trace - --strategies torch,megatron"), "0\n1\n");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("65536 S"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4294967296 S"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("summary"), std::string::npos) << r.out;
}

TEST(ReplayScalersCli, MalformedTraceExits2WithTheLineAndNoOutput) {
  const auto r = run_command(replay("--trace - --strategies torch --json"), "0\n# ok\n1\nx1\n0\n", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("line 4"), std::string::npos) << r.out;  // stderr only: stdout empty below
  const auto quiet = run_command(replay("--trace - --strategies torch --json"), "0\n# ok\n1\nx1\n0\n");
  EXPECT_EQ(quiet.out, "");
  // An amax where a found_inf strategy needs a flag.
  const auto amax = run_command(replay("--trace - --strategies current,torch"), "0\n2.5\n", true);
  EXPECT_EQ(amax.exit_code, 2);
  EXPECT_NE(amax.out.find("line 2"), std::string::npos) << amax.out;
}

// A trace with no step (empty, or only comments) is a mistake, not a replay
// of nothing: exit 2 naming it.
TEST(ReplayScalersCli, EmptyTraceExits2) {
  for (const char* input : {"", "# only a comment\n\n"}) {
    const auto quiet = run_command(replay("--trace - --strategies torch --json"), input);
    EXPECT_EQ(quiet.exit_code, 2);
    EXPECT_EQ(quiet.out, "");
    const auto loud = run_command(replay("--trace - --strategies torch"), input, true);
    EXPECT_NE(loud.out.find("no steps"), std::string::npos) << loud.out;
  }
}

TEST(ReplayScalersCli, BadArgumentsExit2WithNoOutput) {
  for (const char* args :
       {"--trace - --strategies tensorflow", "--trace - --strategies torch --strategy-opt torch.bogus=1",
        "--trace - --strategies torch --strategy-opt apex.init=2", "--trace - --strategies torch,torch",
        "--trace - --strategies torch --strategy-opt torch.interval=zero", "--trace /nonexistent --strategies torch",
        "--trace - --strategies static"}) {
    const auto r = run_command(replay(args), "0\n");
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.out, "") << args;
  }
  const auto named = run_command(replay("--trace - --strategies tensorflow"), "0\n", true);
  EXPECT_NE(named.out.find("unknown strategy 'tensorflow'"), std::string::npos) << named.out;
}

}  // namespace
