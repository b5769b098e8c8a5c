// `mpverify ops --op conv2d[-backward-data|-backward-filter]` as a user runs
// it: the JSON's sides, pairs and counters (counts worked out from the shape),
// and bad shapes and policies.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpu/device.h"
#include "support/run_command.h"

namespace {

using mpverify::test::run_command;

std::string ops(const std::string& args) { return std::string(MPVERIFY_BIN) + " ops " + args; }

// n=2 c=3 h=9 w=7 k=4 r=3 s=3 stride=2 pad=1: p = (9 + 2 - 3)/2 + 1 = 5,
// q = (7 + 2 - 3)/2 + 1 = 4.
const std::string kShape = "--shape n=2,c=3,h=9,w=7,k=4,r=3,s=3,stride=2,pad=1";

nlohmann::json run_json(const std::string& op, const std::string& policy) {
  const auto r = run_command(ops("--op " + op + " " + kShape + " --policy " + policy + " --json"), "");
  EXPECT_EQ(r.exit_code, 0) << op << "\n" << r.out;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

// cudnn_has_policy: whether cuDNN runs the policy (fp32 throughout, or fp16 tensors with fp32 accumulation);
// the gpu side runs exactly when it does and a device is usable.
void expect_sides_and_ref_emu_pair(const nlohmann::json& j, const std::string& tensor, bool cudnn_has_policy) {
  ASSERT_EQ(j["sides"].size(), 3u);
  EXPECT_EQ(j["sides"][0]["name"], "ref");
  EXPECT_TRUE(j["sides"][0]["ran"].get<bool>());
  EXPECT_EQ(j["sides"][1]["name"], "emu");
  EXPECT_TRUE(j["sides"][1]["ran"].get<bool>());
  EXPECT_EQ(j["sides"][2]["name"], "gpu");
  const bool gpu_ran = j["sides"][2]["ran"].get<bool>();
  EXPECT_EQ(gpu_ran, cudnn_has_policy && mpverify::gpu::gpu_unavailable_reason().empty());
  if (!gpu_ran) {
    EXPECT_FALSE(j["sides"][2]["reason"].get<std::string>().empty());
  }
  ASSERT_GE(j["pairs"].size(), 1u);
  const auto& pair = j["pairs"][0];
  EXPECT_EQ(pair["a"], "ref");
  EXPECT_EQ(pair["b"], "emu");
  EXPECT_EQ(pair["tensor"], tensor);
  EXPECT_TRUE(pair["passed"].get<bool>()) << pair.dump();
  EXPECT_EQ(pair["tolerance"]["tier"], "normwise");
  EXPECT_GT(pair["relative_error"].get<double>(), 0.0);  // fp16 inputs and accumulation do round
  for (const char* key : {"max_abs_error", "bit_identical_fraction", "max_ulp"}) EXPECT_TRUE(pair.contains(key)) << key;
}

TEST(Conv2dOpsCli, ForwardCountsEveryInputOnceAndEveryTerm) {
  const auto j = run_json("conv2d", "input=fp16,accumulate=fp16");
  expect_sides_and_ref_emu_pair(j, "y", false);  // fp16 accumulation: no cuDNN counterpart
  EXPECT_EQ(j["policy"]["output"], "fp16");  // the output follows the input format unless given
  EXPECT_EQ(j["counters"]["conv2d.x"]["elements"], 2 * 3 * 9 * 7);
  EXPECT_EQ(j["counters"]["conv2d.w"]["elements"], 4 * 3 * 3 * 3);
  EXPECT_EQ(j["counters"]["conv2d.y"]["elements"], 2 * 4 * 5 * 4);
  // every output sums c r s = 27 terms, padding taps included
  EXPECT_EQ(j["counters"]["conv2d.accumulate"]["elements"], 2 * 4 * 5 * 4 * 27);
}

TEST(Conv2dOpsCli, BackwardDataCountsOnlyTheTapsOfEachStridePhase) {
  const auto j = run_json("conv2d-backward-data", "input=fp16,accumulate=fp16");
  expect_sides_and_ref_emu_pair(j, "dx", false);  // fp16 accumulation: no cuDNN counterpart
  // Row ih is reached by the taps r = (ih + 1) mod 2: ih even (5 rows of 9)
  // by r = 1 only, ih odd (4 rows) by r = 0 and 2: 5 + 8 = 13 steps over the
  // rows; columns: 4 even + 2 * 3 odd = 10. Times n c k = 24.
  EXPECT_EQ(j["counters"]["conv2d_backward_data.accumulate"]["elements"], 2 * 3 * 4 * 13 * 10);
  EXPECT_EQ(j["counters"]["conv2d_backward_data.dy"]["elements"], 2 * 4 * 5 * 4);
  EXPECT_EQ(j["counters"]["conv2d_backward_data.dx"]["elements"], 2 * 3 * 9 * 7);
}

TEST(Conv2dOpsCli, BackwardFilterIsOneReductionOverTheBatch) {
  const auto j = run_json("conv2d-backward-filter", "input=fp16,accumulate=fp16");
  expect_sides_and_ref_emu_pair(j, "dw", false);  // fp16 accumulation: no cuDNN counterpart
  EXPECT_EQ(j["counters"]["conv2d_backward_filter.accumulate"]["elements"], 4 * 3 * 3 * 3 * (2 * 5 * 4));
  EXPECT_EQ(j["counters"]["conv2d_backward_filter.dw"]["elements"], 4 * 3 * 3 * 3);
}

TEST(Conv2dOpsCli, TheGpuSideRunsWhereCudnnHasThePolicy) {
  for (const std::string op : {"conv2d", "conv2d-backward-data", "conv2d-backward-filter"}) {
    const auto j = run_json(op, "input=fp16,accumulate=fp32");
    expect_sides_and_ref_emu_pair(j, op == "conv2d" ? "y" : op == "conv2d-backward-data" ? "dx" : "dw", true);
    if (j["sides"][2]["ran"].get<bool>()) {  // then every pair with the gpu passes its tolerance too
      for (const auto& pair : j["pairs"]) EXPECT_TRUE(pair["passed"].get<bool>()) << op << " " << pair.dump();
    }
  }
}

TEST(Conv2dOpsCli, PoliciesWithoutACudnnMatchSayWhy) {
  // fp16 accumulation has no cuDNN counterpart here; tensor-core and fp32 runs pass against the reference.
  for (const std::string policy : {"accumulate=tensor-core,block=8", "input=fp32,accumulate=fp32", "input=bf16"}) {
    const auto j = run_json("conv2d", policy);
    ASSERT_GE(j["pairs"].size(), 1u) << policy;
    EXPECT_TRUE(j["pairs"][0]["passed"].get<bool>()) << policy;
  }
  const auto j = run_json("conv2d", "input=fp16,accumulate=fp16");
  if (mpverify::gpu::gpu_unavailable_reason().empty()) {
    EXPECT_FALSE(j["sides"][2]["ran"].get<bool>());
    EXPECT_NE(j["sides"][2]["reason"].get<std::string>().find("cuDNN"), std::string::npos);
  }
}

TEST(Conv2dOpsCli, BadShapesAndPoliciesExit2WithNoOutput) {
  for (const char* args : {"--op conv2d --shape n=1,c=1,h=3,w=3,k=1,r=3",           // s missing
                           "--op conv2d --shape n=1,c=1,h=3,w=3,k=1,r=3,s=3,m=2",   // unknown key
                           "--op conv2d --shape n=1,c=1,h=3,w=3,k=1,r=6,s=3,pad=1", // filter larger than padded input
                           "--op conv2d --shape n=1,c=1,h=3,w=3,k=1,r=3,s=3,stride=0",
                           "--op conv2d --shape n=0,c=1,h=3,w=3,k=1,r=3,s=3",
                           "--op conv2d-backward-data --shape n=1,c=1,h=3,w=3,k=1,r=3,s=3 --policy accumulate=fp8",
                           "--op conv2d-backward-filter --shape n=1,c=1,h=3,w=3,k=1,r=3,s=3 --policy slope=2",
                           "--op conv2d --shape n=4096,c=4096,h=64,w=64,k=1,r=1,s=1"}) {  // too large
    const auto r = run_command(ops(args), "");
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.out, "") << args;
  }
}

}  // namespace
