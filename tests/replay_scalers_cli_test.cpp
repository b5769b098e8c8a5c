// `mpverify replay-scalers` as a user runs it: the JSON's shape and values,
// options, and bad input (exit 2, nothing on standard output).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>
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
  ASSERT_EQ(r.exit_code, 3) << r.out;  // the run aborted: its own exit status, the output still complete
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["deepspeed"].size(), 2u);
  EXPECT_TRUE(j["deepspeed"][1]["aborted"].get<bool>());
  EXPECT_EQ(j["summary"]["deepspeed"]["aborted_at_step"], 1);
  // fairseq stops the same way at its minimum: 2 -> 1 <= min 1 aborts at step 0.
  const auto f = run_command(replay("--trace - --strategies fairseq,torch --strategy-opt fairseq.init=2 "
                                    "--strategy-opt fairseq.min=1"),
                             "1\n0\n");
  EXPECT_EQ(f.exit_code, 3) << f.out;
  EXPECT_NE(f.out.find("2 ABORT"), std::string::npos) << f.out;
  // No abort: exit 0.
  EXPECT_EQ(run_command(replay("--trace - --strategies fairseq"), "1\n0\n").exit_code, 0);
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

// --- reading real logs, and --check ----------------------------------------------------

std::string temp_dir() {
  char path[] = "/tmp/mpverify-trace-XXXXXX";
  const char* made = mkdtemp(path);
  return made ? std::string(made) : std::string();
}

// torch with init 4, interval 2: 4 (clean), 4 (clean: grows to 8), 8 (inf:
// 4), 4, 4 (grows), 8.
const char* kTorchCsv =
    "step,loss,found_inf,scale\n"
    "0,2.5,0,4\n"
    "1,2.4,0,4\n"
    "2,2.3,1,8\n"
    "3,2.2,0,4\n"
    "4,2.1,0,4\n"
    "5,2.0,0,8\n";

TEST(ReplayScalersCli, CsvWithNamedColumnsReplaysAndChecks) {
  const std::string opts = " --strategy-opt torch.init=4 --strategy-opt torch.interval=2";
  const auto ok = run_command(replay("--trace - --check torch" + opts), kTorchCsv);
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("6 of 6 steps"), std::string::npos) << ok.out;
  // Step 4 recorded at 8: the rule ran it with 4.
  std::string tampered = kTorchCsv;
  tampered.replace(tampered.find("4,2.1,0,4"), 9, "4,2.1,0,8");
  const auto bad = run_command(replay("--trace - --check torch --json" + opts), tampered);
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  const auto j = nlohmann::json::parse(bad.out);
  EXPECT_FALSE(j["agrees"].get<bool>());
  EXPECT_EQ(j["first_difference"]["step"], 4);
  EXPECT_EQ(j["first_difference"]["line"], 6);
  EXPECT_EQ(j["first_difference"]["recorded_scale"].get<double>(), 8.0);
  EXPECT_EQ(j["first_difference"]["rule_scale"].get<double>(), 4.0);
  EXPECT_EQ(j["format"], "csv");
  // The same CSV replays through several strategies from its found_inf column.
  const auto r = run_command(replay("--trace - --strategies torch,megatron --json" + opts), kTorchCsv);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["summary"]["torch"]["skipped_steps"], 1);
}

TEST(ReplayScalersCli, MonitorRunDirectory) {
  const std::string dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  // As the Monitor writes it: the scale each step ran with, found_inf a boolean.
  std::ofstream(dir + "/steps.jsonl") << R"({"step": 0, "loss": 2.5, "scale": 4.0, "skipped": false, "found_inf": false})"
                                      << "\n"
                                      << R"({"step": 1, "loss": 2.4, "scale": 4.0, "skipped": true, "found_inf": true})"
                                      << "\n"
                                      << R"({"step": 2, "loss": 2.3, "scale": 2.0, "skipped": false, "found_inf": false})"
                                      << "\n";
  const auto ok = run_command(replay("--trace " + dir + " --check torch --strategy-opt torch.init=4 --json"), "");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  const auto j = nlohmann::json::parse(ok.out);
  EXPECT_EQ(j["format"], "monitor");
  EXPECT_EQ(j["steps_compared"], 3);
  // keras starts at 2^15: it differs at step 0.
  const auto keras = run_command(replay("--trace " + dir + " --check keras"), "");
  EXPECT_EQ(keras.exit_code, 1) << keras.out;
  EXPECT_NE(keras.out.find("step 0"), std::string::npos) << keras.out;
  std::filesystem::remove_all(dir);
}

// DeepSpeed's log as its engine and DynamicLossScaler print it (steps_per_print=1).
const char* kDeepSpeedLog =
    "[2025-01-01 00:00:00,000] [INFO] [logging.py:128:log_dist] [Rank 0] step=0, skipped=0, lr=[0.001], mom=[(0.9, "
    "0.999)]\n"
    "[2025-01-01 00:00:01,000] [INFO] [loss_scaler.py:190:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
    "Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1\n"
    "[2025-01-01 00:00:01,000] [INFO] [logging.py:128:log_dist] [Rank 0] step=1, skipped=1, lr=[0.001], mom=[(0.9, "
    "0.999)]\n"
    "[2025-01-01 00:00:02,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
    "Attempted loss scale: 65536, reducing to 32768\n"
    "[2025-01-01 00:00:02,000] [INFO] [logging.py:128:log_dist] [Rank 0] step=2, skipped=2, lr=[0.001], mom=[(0.9, "
    "0.999)]\n"
    "[2025-01-01 00:00:03,000] [INFO] [logging.py:128:log_dist] [Rank 0] step=3, skipped=2, lr=[0.001], mom=[(0.9, "
    "0.999)]\n"
    "[2025-01-01 00:00:04,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
    "Attempted loss scale: 32768, reducing to 16384\n"
    "[2025-01-01 00:00:04,000] [INFO] [logging.py:128:log_dist] [Rank 0] step=4, skipped=3, lr=[0.001], mom=[(0.9, "
    "0.999)]\n";

TEST(ReplayScalersCli, DeepSpeedLogIsDetectedAndChecked) {
  // ZeRO's DynamicLossScaler, 2^16, hysteresis 2: the first overflow only
  // takes h to 1, the second halves; h is not restored before the third.
  const auto ok = run_command(replay("--trace - --check deepspeed --json"), kDeepSpeedLog);
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  const auto j = nlohmann::json::parse(ok.out);
  EXPECT_EQ(j["format"], "deepspeed");
  EXPECT_EQ(j["steps"], 4);
  EXPECT_EQ(j["steps_compared"], 3);  // the overflowing steps print their scale
  // With hysteresis 1 the first overflow halves: step 2 would run with 32768.
  const auto h1 = run_command(replay("--trace - --check deepspeed --strategy-opt deepspeed.hysteresis=1"),
                              kDeepSpeedLog);
  EXPECT_EQ(h1.exit_code, 1) << h1.out;
  EXPECT_NE(h1.out.find("step 2 (line 5)"), std::string::npos) << h1.out;
  // Without per-step progress lines there is no trace.
  const auto none = run_command(
      replay("--trace - --strategies deepspeed --log-format deepspeed"),
      "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768\n", true);
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.out.find("steps_per_print=1"), std::string::npos) << none.out;
}

std::string megatron_line(int iteration, const char* scale, int skipped) {
  char line[512];
  std::snprintf(line, sizeof line,
                " [2025-01-01 00:00:00.000000] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration "
                "(ms): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 1.000000E+01 | loss "
                "scale: %s | grad norm: 1.000 | number of skipped iterations: %3d | number of nan iterations:   0 |\n",
                iteration, 100, 16 * iteration, scale, skipped);
  return line;
}

TEST(ReplayScalersCli, MegatronLogIsDetectedAndChecked) {
  // Megatron, 2^32, hysteresis 2: iteration 1 overflows (h 2 -> 1), 2 overflows
  // (halves), 3 is clean. The log prints the scale after each iteration.
  const std::string log = megatron_line(1, "4294967296.0", 1) + megatron_line(2, "2147483648.0", 1) +
                          megatron_line(3, "2147483648.0", 0);
  const auto ok = run_command(replay("--trace - --check megatron --json"), log);
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  const auto j = nlohmann::json::parse(ok.out);
  EXPECT_EQ(j["format"], "megatron");
  EXPECT_EQ(j["steps_compared"], 2);
  // torch (no hysteresis) runs iteration 2 with 2^31, not the recorded 2^32.
  const auto torch = run_command(replay("--trace - --check torch --strategy-opt torch.init=2^32"), log);
  EXPECT_EQ(torch.exit_code, 1) << torch.out;
  EXPECT_NE(torch.out.find("step 2 (line 2)"), std::string::npos) << torch.out;
  // A log every 10 iterations is not a trace.
  const auto gap = run_command(replay("--trace - --strategies megatron"),
                               megatron_line(10, "65536.0", 0) + megatron_line(20, "65536.0", 0), true);
  EXPECT_EQ(gap.exit_code, 2);
  EXPECT_NE(gap.out.find("--log-interval 1"), std::string::npos) << gap.out;
}

TEST(ReplayScalersCli, TraceAndCheckErrorsExit2WithNoOutput) {
  for (const auto& [args, input] : std::vector<std::pair<std::string, std::string>>{
           {"--trace - --strategies torch --log-format yaml", "0\n"},
           {"--trace - --strategies torch --check torch", "0\n"},
           {"--trace -", "0\n"},
           {"--trace - --check torch", "0\n1\n"},                       // no recorded scale
           {"--trace - --strategies delayed", "step,found_inf\n0,1\n"},  // no amax column
           {"--trace - --strategies torch --log-format csv", "step,loss\n0,1\n"},
           {"--trace - --strategies torch", "step,found_inf\n0,maybe\n"}}) {
    const auto r = run_command(replay(args), input);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.out, "") << args;
  }
  const auto named = run_command(replay("--trace - --strategies delayed"), "step,found_inf\n0,1\n", true);
  EXPECT_NE(named.out.find("line 2"), std::string::npos) << named.out;
  EXPECT_NE(named.out.find("amax"), std::string::npos) << named.out;
}

}  // namespace
