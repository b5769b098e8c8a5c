// `mpverify ops` as a user runs it: the JSON's structure, which sides ran,
// and bad input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpu/device.h"
#include "support/run_command.h"

namespace {

using mpverify::test::run_command;

std::string ops(const std::string& args) { return std::string(MPVERIFY_BIN) + " ops " + args; }

TEST(OpsCli, GemmJsonHasSidesPairsAndCounters) {
  const auto r = run_command(ops("--op gemm --shape m=9,n=7,k=33 --policy input=fp16,accumulate=fp16 --json"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["sides"].size(), 3u);
  EXPECT_EQ(j["sides"][0]["name"], "ref");
  EXPECT_TRUE(j["sides"][0]["ran"].get<bool>());
  EXPECT_EQ(j["sides"][1]["name"], "emu");
  const bool gpu_ran = j["sides"][2]["ran"].get<bool>();
  EXPECT_EQ(gpu_ran, mpverify::gpu::gpu_unavailable_reason().empty());
  if (!gpu_ran) {
    EXPECT_EQ(j["sides"][2]["reason"], mpverify::gpu::gpu_unavailable_reason());
  }
  ASSERT_EQ(j["pairs"].size(), gpu_ran ? 3u : 1u);
  const auto& pair = j["pairs"][0];
  for (const char* key : {"a", "b", "max_abs_error", "relative_error", "bit_identical_fraction", "max_ulp"})
    EXPECT_TRUE(pair.contains(key)) << key;
  EXPECT_GT(pair["relative_error"].get<double>(), 0.0);  // fp16 accumulation does round
  EXPECT_TRUE(pair["passed"].get<bool>());
  // 9*7 outputs, each accumulating 33 products: 2079 fp16 accumulation steps.
  EXPECT_EQ(j["counters"]["gemm.accumulate"]["elements"], 9 * 7 * 33);
  EXPECT_EQ(j["counters"]["gemm.a"]["elements"], 9 * 33);
}

TEST(OpsCli, GemmUnderATensorCoreInstructionWithTwoOperandFormats) {
  const auto r = run_command(ops("--op gemm --shape m=4,n=5,k=40 --backends ref,emu --json "
                                 "--policy input=fp8-e4m3,input-b=fp8-e5m2,accumulate=hopper,promotion=64"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["policy"]["mma"], "sm90.wgmma.k32.f32.e4m3.e5m2");  // Hopper's FP8 GEMM instruction, A x B
  EXPECT_EQ(j["policy"]["input-b"], "fp8-e5m2");
  EXPECT_EQ(j["policy"]["promotion"], 64);
  // k = 40 is padded to two instructions of 32 per output: 4 * 5 * 2 roundings.
  EXPECT_EQ(j["counters"]["gemm.accumulate"]["elements"], 40);
  EXPECT_GT(j["counters"]["gemm.accumulate"]["truncated"].get<int>(), 0);  // F = 13 drops bits of most terms
  EXPECT_EQ(j["counters"]["gemm.b"]["elements"], 40 * 5);
  EXPECT_TRUE(j["pairs"][0]["passed"].get<bool>()) << j["pairs"][0].dump();
  for (const char* bad : {"input=fp8-e4m3,accumulate=ampere",  // Ampere has no FP8 instruction
                          "input=fp16,promotion=128",          // promotion needs an instruction model
                          "input=fp16,accumulate=hopper,promotion=7",  // not a multiple of k = 16
                          "input=bf16,accumulate=sm80.mma.m16n8k16.f32.f16", "input=fp16,accumulate=pascal"}) {
    const auto e = run_command(ops(std::string("--op gemm --shape m=2,n=2,k=32 --policy ") + bad), "");
    EXPECT_EQ(e.exit_code, 2) << bad;
    EXPECT_EQ(e.out, "") << bad;
  }
}

// policy step-inexact=1: fp32 accumulation also counts each step's inexact (0 without the key); the
// conv2d ops read the same key. Only with accumulate=fp32, and 0 or 1.
TEST(OpsCli, GemmStepInexactCountsFp32AccumulationsInexactSteps) {
  const std::string gemm = "--op gemm --shape m=9,n=40,k=33 --backends ref,emu --json --policy input=fp16,accumulate=fp32";
  const auto on = run_command(ops(gemm + ",step-inexact=1"), "");
  ASSERT_EQ(on.exit_code, 0) << on.out;
  const auto j = nlohmann::json::parse(on.out);
  EXPECT_EQ(j["policy"]["step-inexact"], 1);
  const auto& steps = j["counters"]["gemm.accumulate"];
  EXPECT_EQ(steps["elements"], 9 * 40 * 33);
  // normal(0,1) fp16 values: products of at most 22 bits, so many partial sums still fit fp32's 24 (about
  // 30% of the steps are inexact here), and each element's first step, 0 + a*b, is exact
  EXPECT_GT(steps["inexact"].get<int>(), 9 * 40 * 33 / 10) << steps.dump();
  EXPECT_LE(steps["inexact"].get<int>(), 9 * 40 * 32) << steps.dump();
  for (const std::string& off : {gemm, gemm + ",step-inexact=0"}) {
    const auto r = run_command(ops(off), "");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto k = nlohmann::json::parse(r.out);
    EXPECT_FALSE(k["policy"].contains("step-inexact"));
    EXPECT_EQ(k["counters"]["gemm.accumulate"]["inexact"], 0);
    EXPECT_EQ(k["counters"]["gemm.accumulate"]["swamped"], steps["swamped"]);  // the rest unchanged
  }
  const auto conv = run_command(ops("--op conv2d --shape n=2,c=3,h=6,w=6,k=4,r=3,s=3 --backends ref,emu --json "
                                    "--policy input=fp16,step-inexact=1"), "");
  ASSERT_EQ(conv.exit_code, 0) << conv.out;
  EXPECT_GT(nlohmann::json::parse(conv.out)["counters"]["conv2d.accumulate"]["inexact"].get<int>(), 0) << conv.out;
  for (const char* bad : {"input=fp16,accumulate=fp16,step-inexact=1", "input=fp16,step-inexact=2",
                          "input=fp16,step-inexact=yes"}) {
    const auto e = run_command(ops(std::string("--op gemm --shape m=2,n=2,k=32 --policy ") + bad), "");
    EXPECT_EQ(e.exit_code, 2) << bad;
    EXPECT_EQ(e.out, "") << bad;
  }
}

TEST(OpsCli, ActivationsForwardAndBackward) {
  for (const char* op : {"relu", "leaky-relu", "tanh", "sigmoid", "tanh-backward", "sigmoid-backward"}) {
    const auto r = run_command(ops(std::string("--op ") + op + " --shape n=3000 --json"), "");
    ASSERT_EQ(r.exit_code, 0) << op << "\n" << r.out;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["op"], op);
    ASSERT_GE(j["pairs"].size(), 1u);
    EXPECT_TRUE(j["pairs"][0]["passed"].get<bool>()) << op;
    EXPECT_EQ(j["pairs"][0]["tolerance"]["tier"], "normwise");
    const std::string out_site = std::string(op).ends_with("-backward") ? "activation_backward.dx" : "activation.y";
    EXPECT_EQ(j["counters"][out_site]["elements"], 3000) << op;
  }
}

// One side alone compares nothing: the text says so instead of printing a
// table header over no rows, and the JSON has no pair.
TEST(OpsCli, OneSideAloneSaysNoPairWasCompared) {
  const auto r = run_command(ops("--op gemm --shape m=4,n=4,k=4 --backends ref"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("no pair compared: fewer than two sides ran"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("max_abs_error"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(run_command(ops("--op gemm --shape m=4,n=4,k=4 --backends ref --json"), "").out);
  EXPECT_TRUE(j["pairs"].empty());
  const auto two = run_command(ops("--op gemm --shape m=4,n=4,k=4 --backends ref,emu"), "");
  EXPECT_NE(two.out.find("max_abs_error"), std::string::npos) << two.out;
  EXPECT_EQ(two.out.find("no pair compared"), std::string::npos) << two.out;
}

TEST(OpsCli, SameSeedSameOutput) {
  const std::string cmd = ops("--op gemm --shape m=5,n=5,k=5 --backends ref,emu --json --seed 4");
  EXPECT_EQ(run_command(cmd, "").out, run_command(cmd, "").out);
  EXPECT_NE(run_command(cmd, "").out, run_command(ops("--op gemm --shape m=5,n=5,k=5 --backends ref,emu --json --seed 5"), "").out);
}

TEST(OpsCli, BadArgumentsExit2WithNoOutput) {
  for (const char* args : {"--op conv9 --shape m=1", "--op gemm --shape m=1,n=2", "--op gemm --shape m=1,n=2,k=x",
                           "--op gemm --shape m=1,n=1,k=1,q=3", "--op gemm --shape m=1,n=1,k=1 --policy input=fp99",
                           "--op gemm --shape m=1,n=1,k=1 --backends ref,cpu", "--op gemm --shape m=0,n=1,k=1"}) {
    const auto r = run_command(ops(args), "");
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.out, "") << args;
  }
}

}  // namespace
