// `mpverify replay-scalers` as a user runs it: the JSON's shape and values,
// options, and bad input (exit 2, nothing on standard output).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>
#include <utility>
#include <vector>
#include <string>

#include <nlohmann/json.hpp>

#include "support/address_sanitizer.h"
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
           {"--trace - --strategies torch", "step,found_inf\n0,maybe\n"},
           // A logged NaN or inf scale is a damaged log, not a scale that differs (it read as exit 1).
           {"--trace - --check megatron",
            megatron_line(1, "65536.0", 0) + megatron_line(2, "nan", 0) + megatron_line(3, "65536.0", 0)},
           {"--trace - --check torch", "step,found_inf,scale\n0,0,65536\n1,0,nan\n"},
           {"--trace - --check torch", "step,found_inf,scale\n0,0,65536\n1,0,inf\n"}}) {
    const auto r = run_command(replay(args), input);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.out, "") << args;
  }
  const auto nan_scale = run_command(replay("--trace - --check megatron"),
                                    megatron_line(1, "65536.0", 0) + megatron_line(2, "nan", 0), true);
  EXPECT_NE(nan_scale.out.find("line 2: loss scale: nan is not a loss scale"), std::string::npos) << nan_scale.out;
  const auto named = run_command(replay("--trace - --strategies delayed"), "step,found_inf\n0,1\n", true);
  EXPECT_NE(named.out.find("line 2"), std::string::npos) << named.out;
  EXPECT_NE(named.out.find("amax"), std::string::npos) << named.out;
}

// --- amax-decided overflow, FP8 counts, optimizers, saved states, --plot ------------------

std::string temp_file(const std::string& content) {
  char path[] = "/tmp/mpverify-replay-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "";
  close(fd);
  std::ofstream(path) << content;
  return path;
}

// amax 0.5 every step, fp16: 0.5 x 2^18 = 131072 and 0.5 x 2^17 = 65536 are
// at or above 65520 (they round past 65504), 0.5 x 2^16 = 32768 fits. torch
// from 2^18 skips steps 0 and 1; static 2^16 (skip=true) skips nothing; in
// bf16 nothing overflows. Step 3's inf amax overflows at every scale.
TEST(ReplayScalersCli, AmaxColumnDecidesOverflowAtEachStrategysScale) {
  const std::string csv = "step,amax\n0,0.5\n1,0.5\n2,0.5\n3,inf\n";
  const std::string args = "--trace - --strategies torch,static --strategy-opt torch.init=2^18 "
                           "--strategy-opt static.scale=2^16 --strategy-opt static.skip=true --json";
  const auto r = run_command(replay(args), csv);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["overflow_from"], "amax");
  EXPECT_EQ(j["grad_format"], "fp16");
  const double torch_scales[] = {0x1p18, 0x1p17, 0x1p16, 0x1p16};
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(j["torch"][k]["scale"].get<double>(), torch_scales[k]) << k;
    EXPECT_EQ(j["torch"][k]["skipped"].get<bool>(), k != 2) << k;
    EXPECT_EQ(j["static"][k]["skipped"].get<bool>(), k == 3) << k;
  }
  EXPECT_EQ(j["summary"]["torch"]["overflow_steps"], 3);
  EXPECT_EQ(j["summary"]["static"]["overflow_steps"], 1);
  EXPECT_EQ(j["summary"]["torch"]["overflow_format"], "fp16");
  const auto bf16 = nlohmann::json::parse(run_command(replay(args + " --grad-format bf16"), csv).out);
  EXPECT_EQ(bf16["grad_format"], "bf16");
  EXPECT_EQ(bf16["summary"]["torch"]["skipped_steps"], 1);  // only the inf
  // The text says which mode it used.
  const auto text = run_command(replay("--trace - --strategies torch"), csv);
  EXPECT_NE(text.out.find("gradient amax"), std::string::npos) << text.out;
  // Bare lines are recorded flags.
  const auto flags = nlohmann::json::parse(run_command(replay("--trace - --strategies torch --json"), "0\n1\n").out);
  EXPECT_EQ(flags["overflow_from"], "found_inf");
  EXPECT_TRUE(flags["grad_format"].is_null());
  EXPECT_EQ(run_command(replay("--trace - --strategies torch"), "0\n1\n").out.find("gradient amax"),
            std::string::npos);
  // --overflow-from found_inf needs the column; bad values are refused.
  for (const char* bad : {" --overflow-from found_inf", " --grad-format fp8", " --overflow-from max"}) {
    const auto e = run_command(replay(args + bad), csv);
    EXPECT_EQ(e.exit_code, 2) << bad;
    EXPECT_EQ(e.out, "") << bad;
  }
}

// delayed, history 16: amaxes 1 1 1 1 100 1 1 1. The scale becomes 448 after
// step 0; step 4 runs with it: 100 x 448 = 44800 overflows E4M3 (max 448).
// From an amin column: current scaling at amax 448 runs with s = 1, and an
// amin of 2^-12 rounds to 0 in E4M3 (below 2^-10, half its smallest subnormal).
TEST(ReplayScalersCli, Fp8OverflowAndUnderflowCounts) {
  const auto r = run_command(replay("--trace - --strategies delayed,current --strategy-opt delayed.history=16 --json"),
                             "1\n1\n1\n1\n100\n1\n1\n1\n");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["summary"]["delayed"]["overflow_steps"], 1);
  EXPECT_TRUE(j["delayed"][4]["overflow"].get<bool>());
  EXPECT_EQ(j["summary"]["delayed"]["overflow_format"], "fp8-e4m3");
  EXPECT_EQ(j["summary"]["current"]["overflow_steps"], 0);
  EXPECT_TRUE(j["summary"]["current"]["underflow_steps"].is_null());  // no amin column
  const auto e5m2 = nlohmann::json::parse(
      run_command(replay("--trace - --strategies delayed --strategy-opt delayed.fp8=e5m2 --json"), "1\n100\n").out);
  // 100 x 57344 = 5734400 overflows E5M2 too.
  EXPECT_EQ(e5m2["summary"]["delayed"]["overflow_steps"], 1);
  EXPECT_EQ(e5m2["summary"]["delayed"]["overflow_format"], "fp8-e5m2");
  const auto amin = run_command(replay("--trace - --strategies current --json"),
                                "amax,amin\n448,0.000244140625\n448,0.001953125\n");
  const auto a = nlohmann::json::parse(amin.out);
  EXPECT_EQ(a["summary"]["current"]["underflow_steps"], 1);
  EXPECT_TRUE(a["current"][0]["underflow"].get<bool>());
  EXPECT_FALSE(a["current"][1]["underflow"].get<bool>());
  const auto text = run_command(replay("--trace - --strategies delayed --strategy-opt delayed.history=16"),
                                "1\n1\n1\n1\n100\n");
  EXPECT_NE(text.out.find("fp8-e4m3"), std::string::npos) << text.out;
}

// A GAN's two optimizers, one torch scaler each (init 4, interval 2). D: 0 1
// 0 -> 4, 4 (skipped, to 2), 2. G: 0 0 0 -> 4, 4 (grows after), 8.
TEST(ReplayScalersCli, OneScalerPerOptimizer) {
  const std::string csv = "step,optimizer,found_inf\n0,D,0\n0,G,0\n1,D,1\n1,G,0\n2,D,0\n2,G,0\n";
  const std::string opts = " --strategy-opt torch.init=4 --strategy-opt torch.interval=2";
  const auto r = run_command(replay("--trace - --strategies torch,none --json" + opts), csv);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["optimizers"], nlohmann::json::array({"D", "G"}));
  const double d[] = {4, 4, 2}, g[] = {4, 4, 8};
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(j["torch"]["D"][k]["scale"].get<double>(), d[k]) << k;
    EXPECT_EQ(j["torch"]["G"][k]["scale"].get<double>(), g[k]) << k;
    EXPECT_EQ(j["torch"]["D"][k]["skipped"].get<bool>(), k == 1) << k;
    EXPECT_EQ(j["torch"]["D"][k]["trace_step"], k);
  }
  EXPECT_EQ(j["summary"]["torch"]["G"]["final_scale"].get<double>(), 8.0);
  EXPECT_EQ(j["summary"]["torch"]["D"]["skipped_steps"], 1);
  EXPECT_EQ(j["summary"]["none"]["D"]["overflow_steps"], 1);
  const auto text = run_command(replay("--trace - --strategies torch" + opts), csv);
  EXPECT_NE(text.out.find("torch/G"), std::string::npos) << text.out;
  // --optimizer keeps one; --check needs it.
  const auto only = nlohmann::json::parse(run_command(replay("--trace - --strategies torch --json --optimizer G" + opts), csv).out);
  EXPECT_EQ(only["optimizers"], nlohmann::json::array({"G"}));
  EXPECT_FALSE(only["torch"].contains("D"));
  for (const std::string bad : {"--trace - --check torch", "--trace - --strategies torch --optimizer E"}) {
    const auto e = run_command(replay(bad + opts), csv, true);
    EXPECT_EQ(e.exit_code, 2) << bad;
    EXPECT_NE(e.out.find("D, G"), std::string::npos) << e.out;
  }
  // A row without a name among named ones.
  const auto unnamed = run_command(replay("--trace - --strategies torch"), "optimizer,found_inf\nD,0\n,1\n", true);
  EXPECT_EQ(unnamed.exit_code, 2);
  EXPECT_NE(unnamed.out.find("line 3"), std::string::npos) << unnamed.out;
}

struct Lane {
  std::vector<double> scales;
  std::vector<bool> skipped;
};

Lane lane_of(const std::string& out, const std::string& strategy) {
  Lane l;
  const auto j = nlohmann::json::parse(out);
  for (const auto& step : j[strategy]) {
    l.scales.push_back(step["scale"].get<double>());
    l.skipped.push_back(step["skipped"].get<bool>());
  }
  return l;
}

// A replay from the saved state after `prefix` steps equals the tail of the
// replay from the start, and the hand-worked scales below.
void expect_tail(const std::string& strategy, const std::string& opts, const std::string& flags, std::size_t prefix,
                 const std::string& state, const std::vector<double>& tail_scales) {
  std::string tail_flags;
  std::size_t line = 0;
  for (std::size_t i = 0; i < flags.size(); ++i) {
    if (line >= prefix) tail_flags += flags[i];
    if (flags[i] == '\n') ++line;
  }
  const auto full = run_command(replay("--trace - --json --strategies " + strategy + opts), flags);
  ASSERT_EQ(full.exit_code, 0) << full.out;
  const std::string path = temp_file(state);
  const auto tail = run_command(replay("--trace - --json --strategies " + strategy + " --initial-state " + path + opts),
                                tail_flags);
  std::remove(path.c_str());
  ASSERT_EQ(tail.exit_code, 0) << tail.out;
  const Lane f = lane_of(full.out, strategy), t = lane_of(tail.out, strategy);
  ASSERT_EQ(t.scales.size() + prefix, f.scales.size());
  for (std::size_t k = 0; k < t.scales.size(); ++k) {
    EXPECT_EQ(t.scales[k], f.scales[prefix + k]) << strategy << " tail step " << k;
    EXPECT_EQ(t.skipped[k], f.skipped[prefix + k]) << strategy << " tail step " << k;
    EXPECT_EQ(t.scales[k], tail_scales[k]) << strategy << " tail step " << k;
  }
}

// torch (ATen's _amp_update_scale_), interval 3, from 4: flags 0 0 1 0 0 |
// 0 0 0 1 0. After the prefix: scale 2 (backed off at step 2), tracker 2
// (steps 3, 4). Step 5 makes it 3 = interval: the scale grows to 4. Without
// the tracker the growth would wait until step 7.
TEST(ReplayScalersCli, InitialStateTorchEqualsTheTailOfALongerReplay) {
  expect_tail("torch", " --strategy-opt torch.init=4 --strategy-opt torch.interval=3",
              "0\n0\n1\n0\n0\n0\n0\n0\n1\n0\n", 5,
              R"({"torch": {"scale": 2.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3,
                  "_growth_tracker": 2}})",
              {2, 4, 4, 4, 2});
}

// Megatron (grad_scaler.py update()), init 16, interval 2, hysteresis 2:
// flags 1 0 1 0 0 1 | 1 0 0 1. Step 0 takes h to 1, step 2 to 0 (scale 8),
// steps 3-4 grow it back to 16 (h = 2), step 5 takes h to 1. From that state
// step 6 backs off to 8; steps 7-8 grow to 16; step 9 takes h to 1.
TEST(ReplayScalersCli, InitialStateMegatronEqualsTheTailOfALongerReplay) {
  expect_tail("megatron",
              " --strategy-opt megatron.init=16 --strategy-opt megatron.interval=2 --strategy-opt megatron.hysteresis=2",
              "1\n0\n1\n0\n0\n1\n1\n0\n0\n1\n", 6,
              R"({"megatron": {"scale": [16.0], "growth_tracker": 0, "hysteresis_tracker": 1}})", {16, 8, 8, 16});
}

// DeepSpeed's DynamicLossScaler (zero), init 16, window 3, hysteresis 2.
// Flags 0 0 1 0 | 0 0 1 0: step 2 takes h to 1 (last overflow 2); the state
// after step 3 is cur_iter 4, last_overflow_iter 2, cur_hysteresis 1. With
// DeepSpeed 0.17.0's rule, step 5 has (5 - 2) % 3 == 0: the scale grows to 32
// (h back to 2); step 6 takes h to 1. With 0.17.1's (the default), stable =
// 5 - 2 - 1 = 2 is no multiple of 3: no growth, and step 6 overflows with h = 1:
// the scale halves to 8. Then flags 0 0 1 | 1 0: the state after step 2
// (cur_iter 3, last 2, h 1); step 3 overflows with h = 1: the scale halves to 8,
// and step 4 grows under neither rule.
TEST(ReplayScalersCli, InitialStateDeepSpeedEqualsTheTailOfALongerReplay) {
  const std::string opts =
      " --strategy-opt deepspeed.init=16 --strategy-opt deepspeed.interval=3 --strategy-opt deepspeed.hysteresis=2";
  const std::string state =
      R"({"deepspeed": {"cur_scale": 16.0, "cur_iter": 4, "last_overflow_iter": 2, "cur_hysteresis": 1}})";
  expect_tail("deepspeed", opts + " --strategy-opt deepspeed.version=0.17.0", "0\n0\n1\n0\n0\n0\n1\n0\n", 4,
              state, {16, 16, 32, 32});
  expect_tail("deepspeed", opts, "0\n0\n1\n0\n0\n0\n1\n0\n", 4, state, {16, 16, 16, 8});
  expect_tail("deepspeed", opts, "0\n0\n1\n1\n0\n", 3,
              R"({"deepspeed": {"cur_scale": 16.0, "cur_iter": 3, "last_overflow_iter": 2, "cur_hysteresis": 1}})",
              {16, 8});
}

// A run whose fp32 gradients (bias, LayerNorm) overflow nothing while the amax times the scale passes fp16's
// range: the run's own found_inf says no overflow, the amax says overflow. --check asks whether the run's
// scales follow the rule, so it reads the recorded found_inf; the output's first line says which.
TEST(ReplayScalersCli, CheckReadsTheRecordedFoundInfAndSaysSo) {
  // torch from 2^16: no overflow recorded, so the scale stays 65536 (interval 2000); 2 * 65536 > 65504.
  const std::string trace = "step,found_inf,scale,amax\n0,0,65536,2\n1,0,65536,2\n2,0,65536,2\n";
  const auto r = run_command(replay("--trace - --check torch"), trace);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("fp16/bf16 strategies' overflow: the recorded found_inf flags\n", 0), 0u) << r.out;
  // Asked to decide from the amax, the rule halves at step 0 and differs from step 1 on, and says why.
  const auto amax = run_command(replay("--trace - --check torch --overflow-from amax"), trace);
  EXPECT_EQ(amax.exit_code, 1) << amax.out;
  EXPECT_NE(amax.out.find("decided from each step's gradient amax"), std::string::npos) << amax.out;
  EXPECT_NE(amax.out.find("differs at step 1"), std::string::npos) << amax.out;
  // A replay (no --check) of the same trace keeps the what-if: each strategy decides from the amax.
  const auto what_if = run_command(replay("--trace - --strategies torch"), trace);
  EXPECT_EQ(what_if.out.rfind("fp16/bf16 strategies' overflow: decided from each step's gradient amax", 0), 0u)
      << what_if.out;
}

// With one strategy replayed, the file may be the saved state itself (a GradScaler.state_dict() as JSON):
// the same replay as the state under the strategy's key.
TEST(ReplayScalersCli, OneStrategysInitialStateMayBeTheSavedStateItself) {
  const std::string fields = R"({"scale": 2.0, "growth_interval": 3, "_growth_tracker": 2})";
  const std::string bare = temp_file(fields), keyed = temp_file(R"({"torch": )" + fields + "}");
  const std::string flags = "0\n0\n1\n0\n";
  const auto a = run_command(replay("--trace - --json --strategies torch --initial-state " + bare), flags);
  const auto b = run_command(replay("--trace - --json --strategies torch --initial-state " + keyed), flags);
  // With two strategies the bare fields name no strategy: refused.
  const auto two = run_command(replay("--trace - --strategies torch,apex --initial-state " + bare), flags);
  std::remove(bare.c_str());
  std::remove(keyed.c_str());
  ASSERT_EQ(a.exit_code, 0) << a.out;
  EXPECT_EQ(a.out, b.out);
  // scale 2 with the tracker at 2 of 3: the first step grows it, the overflow halves it.
  EXPECT_EQ(lane_of(a.out, "torch").scales, std::vector<double>({2, 4, 4, 2}));
  EXPECT_EQ(two.exit_code, 2);
}

TEST(ReplayScalersCli, InitialStateErrorsExit2WithNoOutput) {
  for (const std::string state :
       {R"({"torch": {"scale": 2, "growth_tracker": 1}})",  // Megatron's name, not torch's
        R"({"apex": {"scale": 2}})",                       // not replayed
        R"({"torch": {"scale": -2}})", R"({"torch": {"_growth_tracker": 1.5}})", R"([1, 2])",
        R"({"deepspeed": {"cur_iter": 2, "last_overflow_iter": 2}})",
        // Counters the framework never saves, once cut to an int: 2^32 + 2 behaved as 2, 2^31 as INT_MIN (the
        // scale never grew), 2^64 - 1 as -1, and INT_MAX overflowed tracker + 1. A tracker restarts at 0 on
        // reaching the interval (2000 by default), so it is below it.
        R"({"torch": {"_growth_tracker": 4294967298}})", R"({"torch": {"_growth_tracker": 2147483648}})",
        R"({"torch": {"_growth_tracker": 18446744073709551615}})", R"({"torch": {"_growth_tracker": 2147483647}})",
        R"({"torch": {"_growth_tracker": 2000}})", R"({"torch": {"growth_interval": 4294967297}})",
        R"({"deepspeed": {"cur_iter": 18446744073709551615}})"}) {
    const std::string path = temp_file(state);
    const auto r = run_command(replay("--trace - --strategies torch,deepspeed --initial-state " + path), "0\n");
    std::remove(path.c_str());
    EXPECT_EQ(r.exit_code, 2) << state;
    EXPECT_EQ(r.out, "") << state;
  }
  // A starting scale that rounds to 0 in fp32 (below 2^-149) made every scale 0, exit 0.
  for (const std::string strategy : {"torch", "megatron", "nemo", "keras"}) {
    const auto r = run_command(replay("--trace - --strategies " + strategy + " --strategy-opt " + strategy +
                                      ".init=1e-46"),
                               "0\n", true);
    EXPECT_EQ(r.exit_code, 2) << strategy << ": " << r.out;
    EXPECT_NE(r.out.find("once rounded to fp32"), std::string::npos) << r.out;
  }
  const std::string path = temp_file(R"({"fairseq": {"scale": 2}})");
  const auto named = run_command(replay("--trace - --strategies fairseq --initial-state " + path), "0\n", true);
  std::remove(path.c_str());
  EXPECT_NE(named.out.find("strategies with a state: torch, nemo, megatron, deepspeed"), std::string::npos)
      << named.out;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// --plot: one polyline per strategy (every scale drawable), a cross at each
// skipped step, on the geometry svg_line_chart.h documents.
TEST(ReplayScalersCli, PlotDrawsEachStrategyAndMarksSkippedSteps) {
  const std::string dir = temp_dir();
  const std::string svg = dir + "/scales.svg";
  // torch and apex from 4: 4, 4 (S), 2, 2. deepspeed (zero, hysteresis 2)
  // from 4 keeps 4 (the overflow only lowers h) but skips step 1 as well.
  const auto r = run_command(replay("--trace - --strategies torch,deepspeed,apex --strategy-opt torch.init=4 "
                                    "--strategy-opt deepspeed.init=4 --strategy-opt apex.init=4 --plot " + svg),
                             "0\n1\n0\n0\n");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream in(svg);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(count(text, "<polyline"), 3u);
  EXPECT_EQ(count(text, "class=\"mark\""), 3u);
  EXPECT_NE(text.find("<title>torch</title>"), std::string::npos);
  // Where step 1 at scale 4 lands: x over [0, 3] padded by 5%, log2 y over
  // [1, 2] (scales 2..4) padded by 5%; the cross is centred there.
  const double x_lo = 0 - 0.05 * 3, x_hi = 3 + 0.05 * 3, y_lo = 1 - 0.05, y_hi = 2 + 0.05;
  const double px = 80 + (1 - x_lo) / (x_hi - x_lo) * 780, py = 40 + 240 - (2 - y_lo) / (y_hi - y_lo) * 240;
  char start[64];
  std::snprintf(start, sizeof start, "M%.2f,%.2f", px - 4, py - 4);
  EXPECT_NE(text.find(start), std::string::npos) << start << "\n" << text;
  // Bad input: no file, no output. A path that cannot be written: exit 2.
  std::filesystem::remove(svg);
  const auto bad = run_command(replay("--trace - --strategies torch --plot " + svg), "0\nx\n");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(svg));
  const std::string file = temp_file("a file");
  const auto unwritable = run_command(replay("--trace - --strategies torch --plot " + file + "/scales.svg"), "0\n");
  EXPECT_EQ(unwritable.exit_code, 2);
  EXPECT_EQ(unwritable.out, "");
  std::remove(file.c_str());
  std::filesystem::remove_all(dir);
}

}  // namespace

// A long trace is replayed within a fixed budget a step: it once held about 380 bytes a step in text (790 as
// JSON), so a 20 MB trace of ten million steps ran out of memory. Two million steps under a 512 MiB
// address-space limit: the program itself runs in under 64 MiB (a tiny trace succeeds under that limit), and
// a step may cost 224 bytes (its trace record 144, its replay record 48, the line's offset 8, the text it was
// read from 2, and 22 to spare), 2e6 x 224 B = 427 MiB; the old per-step cost needs 725 MiB or more.
TEST(ReplayScalersCli, LongTraceFitsAFixedBudgetAStep) {
  if (mpverify::test::kAddressSanitizer)
    GTEST_SKIP() << "AddressSanitizer reserves more address space than the memory limit this test sets";
  constexpr std::size_t kSteps = 2'000'000;
  std::string trace;
  trace.reserve(2 * kSteps);
  std::size_t flagged = 0;
  for (std::size_t i = 0; i < kSteps; ++i) {
    const bool inf = i % 4000 == 3999;  // one overflow in 4000 steps: torch grows once, backs off once
    flagged += inf ? 1 : 0;
    trace += inf ? "1\n" : "0\n";
  }
  const std::filesystem::path out = std::filesystem::temp_directory_path() / ("mpverify-long-replay-" + std::to_string(getpid()));
  std::string command = "ulimit -v 524288; ";  // appended, not "literal" + string: GCC 12's false -Warray-bounds
  command += replay("--trace - --strategies torch,deepspeed");
  command += " > " + out.string();
  const auto r = run_command(command, trace, true);
  std::ifstream in(out);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::filesystem::remove(out);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The source line, the table's header, a row a step, then the summary.
  ASSERT_GT(lines.size(), kSteps + 2);
  EXPECT_EQ(lines[2 + kSteps - 1].rfind(std::to_string(kSteps - 1) + " ", 0), 0u) << lines[2 + kSteps - 1];
  std::size_t skipped_rows = 0;
  for (std::size_t k = 0; k < kSteps; ++k) skipped_rows += lines[2 + k].find(" S ") != std::string::npos ? 1 : 0;
  EXPECT_EQ(skipped_rows, flagged);  // torch skips each flagged step (deepspeed too: hysteresis 2 skips as well)
  const auto torch_row = std::find_if(lines.begin() + 2 + kSteps, lines.end(),
                                      [](const std::string& l) { return l.rfind("torch ", 0) == 0; });
  ASSERT_NE(torch_row, lines.end());
  EXPECT_NE(torch_row->find(" " + std::to_string(flagged) + " "), std::string::npos) << *torch_row;
}

// Two settings of one strategy side by side: each lane named STRATEGY@KEY=VALUE replays exactly as a run of
// that strategy alone with those keys would (the oracle: separate invocations), --strategy-opt reaches every
// lane of its strategy and a lane's own settings override it. The expected scales of the second lane are
// torch's rule worked by hand: init 1024, interval 2, growth 4 (from --strategy-opt): two clean steps grow
// 1024 to 4096, the overflow at step 2 skips it and halves to 2048, two clean steps grow that to 8192.
TEST(ReplayScalersCli, TwoSettingsOfOneStrategySideBySide) {
  const std::string trace = "0\n0\n1\n0\n0\n0\n";
  const auto both = run_command(replay("--trace - --strategies torch,torch@init=1024@interval=2,deepspeed@hysteresis=1 "
                                       "--strategy-opt torch.growth=4 --json"),
                                trace);
  ASSERT_EQ(both.exit_code, 0) << both.out;
  const auto j = nlohmann::json::parse(both.out);
  const double expected[] = {1024, 1024, 4096, 2048, 2048, 8192};
  ASSERT_EQ(j["torch@init=1024@interval=2"].size(), 6u);
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(j["torch@init=1024@interval=2"][k]["scale"].get<double>(), expected[k]) << k;
    EXPECT_EQ(j["torch@init=1024@interval=2"][k]["skipped"].get<bool>(), k == 2) << k;
  }
  const struct {
    std::string lane, alone;
  } lanes[] = {
      {"torch", "--strategies torch --strategy-opt torch.growth=4"},
      {"torch@init=1024@interval=2",
       "--strategies torch --strategy-opt torch.growth=4 --strategy-opt torch.init=1024 --strategy-opt torch.interval=2"},
      {"deepspeed@hysteresis=1", "--strategies deepspeed --strategy-opt deepspeed.hysteresis=1"},
  };
  for (const auto& l : lanes) {
    const auto alone = run_command(replay("--trace - --json " + l.alone), trace);
    ASSERT_EQ(alone.exit_code, 0) << alone.out;
    const auto a = nlohmann::json::parse(alone.out);
    const std::string strategy = l.lane.substr(0, l.lane.find('@'));
    EXPECT_EQ(j[l.lane], a[strategy]) << l.lane;
    EXPECT_EQ(j["summary"][l.lane], a["summary"][strategy]) << l.lane;
  }
  // A saved state by the lane's name starts that lane alone: scale 8, one clean step already counted.
  char path[] = "/tmp/mpverify-lane-state-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << R"({"torch@interval=2": {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5, )"
                      << R"("growth_interval": 2, "_growth_tracker": 1}})";
  const auto started = run_command(
      replay(std::string("--trace - --strategies torch,torch@interval=2 --json --initial-state ") + path), trace);
  std::remove(path);
  ASSERT_EQ(started.exit_code, 0) << started.out;
  const auto s = nlohmann::json::parse(started.out);
  const double from_state[] = {8, 16, 16, 8, 8, 16};  // 8 -> 16 after the second clean step; halved at step 2
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(s["torch@interval=2"][k]["scale"].get<double>(), from_state[k]) << k;
    EXPECT_EQ(s["torch"][k]["scale"].get<double>(), k < 3 ? 65536.0 : 32768.0) << k;
  }
  // Refused before the trace is read: a name twice (with the way to name two settings), a setting that is not
  // KEY=VALUE, a key the strategy does not have.
  const struct {
    std::string strategies, said;
  } bad[] = {{"torch,torch", "torch@KEY=VALUE"},
             {"torch@init", "'init' is not KEY=VALUE"},
             {"torch@nope=1", "unknown key 'nope'"},
             {"torch@init=2@init=4", "sets init twice"}};
  for (const auto& b : bad) {
    const auto r = run_command(replay("--trace - --strategies " + b.strategies), trace, true);
    EXPECT_EQ(r.exit_code, 2) << b.strategies << "\n" << r.out;
    EXPECT_NE(r.out.find(b.said), std::string::npos) << b.strategies << "\n" << r.out;
  }
}
