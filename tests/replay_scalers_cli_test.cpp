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

// --- the strategies' rules through the command line ------------------------------------

// Transformer Engine's bulk kernel (the default): amaxes 100, 0, 0, 50 with a
// history of 2. The zeros neither roll the history nor change the scale, so
// 100 is still in the window at the last step: 448 / 100 in fp32. The
// per-tensor kernel rolls the zeros in and ends at 448 / 50.
TEST(ReplayScalersCli, DelayedBulkKernelIgnoresZeroAmaxes) {
  const std::string args = "--trace - --strategies delayed --strategy-opt delayed.history=2 --json";
  const auto bulk = run_command(replay(args), "100\n0\n0\n50\n");
  ASSERT_EQ(bulk.exit_code, 0) << bulk.out;
  const auto j = nlohmann::json::parse(bulk.out);
  EXPECT_EQ(j["summary"]["delayed"]["final_scale"].get<double>(), static_cast<double>(448.0f / 100.0f));
  EXPECT_EQ(j["summary"]["delayed"]["final_scale"].get<double>(), static_cast<double>(4.48f));
  const auto per_tensor = run_command(replay(args + " --strategy-opt delayed.kernel=per-tensor"), "100\n0\n0\n50\n");
  ASSERT_EQ(per_tensor.exit_code, 0) << per_tensor.out;
  EXPECT_EQ(nlohmann::json::parse(per_tensor.out)["summary"]["delayed"]["final_scale"].get<double>(),
            static_cast<double>(448.0f / 50.0f));
  const auto bad = run_command(replay(args + " --strategy-opt delayed.kernel=fast"), "1\n");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.out, "");
}

// DeepSpeed's FP16_Optimizer (fp16 without ZeRO), initial 4, window 2: it
// grows when (iteration - last overflow - 1) is > 0 and a multiple of 2, so
// after iterations 2 and 7; the overflow at 4 halves without hysteresis.
TEST(ReplayScalersCli, DeepSpeedFp16OptimizerRule) {
  const auto r = run_command(replay("--trace - --strategies deepspeed --strategy-opt deepspeed.optimizer=fp16 "
                                    "--strategy-opt deepspeed.init=4 --strategy-opt deepspeed.interval=2 --json"),
                             "0\n0\n0\n0\n1\n0\n0\n0\n");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const double scales[] = {4, 4, 4, 8, 8, 4, 4, 4};
  ASSERT_EQ(j["deepspeed"].size(), 8u);
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(j["deepspeed"][k]["scale"].get<double>(), scales[k]) << k;
    EXPECT_EQ(j["deepspeed"][k]["skipped"].get<bool>(), k == 4) << k;
  }
  EXPECT_EQ(j["summary"]["deepspeed"]["final_scale"].get<double>(), 8.0);
  // FP16_Optimizer has no hysteresis: the key is refused, saying why.
  const auto h = run_command(
      replay("--trace - --strategies deepspeed --strategy-opt deepspeed.optimizer=fp16 "
             "--strategy-opt deepspeed.hysteresis=2"),
      "0\n", true);
  EXPECT_EQ(h.exit_code, 2);
  EXPECT_NE(h.out.find("no hysteresis"), std::string::npos) << h.out;
}

}  // namespace
