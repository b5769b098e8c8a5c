// `mpverify ops` on the losses as a user runs it: the JSON's sides, pairs and
// counters, the ref-emu pair passing its derived tolerance, the policy keys,
// and bad shapes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpu/device.h"
#include "support/run_command.h"

namespace {

using mpverify::test::run_command;

std::string ops(const std::string& args) { return std::string(MPVERIFY_BIN) + " ops " + args; }

nlohmann::json run_json(const std::string& args) {
  const auto r = run_command(ops(args + " --json"), "");
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.out;
  return nlohmann::json::parse(r.out);
}

void expect_sides_and_ref_emu_pass(const nlohmann::json& j, const std::string& tensor) {
  ASSERT_EQ(j["sides"].size(), 3u);
  EXPECT_EQ(j["sides"][0]["name"], "ref");
  EXPECT_TRUE(j["sides"][0]["ran"].get<bool>());
  EXPECT_EQ(j["sides"][1]["name"], "emu");
  EXPECT_TRUE(j["sides"][1]["ran"].get<bool>());
  const bool gpu_ran = j["sides"][2]["ran"].get<bool>();
  EXPECT_EQ(gpu_ran, mpverify::gpu::gpu_unavailable_reason().empty());
  if (!gpu_ran) {
    EXPECT_EQ(j["sides"][2]["reason"], mpverify::gpu::gpu_unavailable_reason());
  }
  ASSERT_EQ(j["pairs"].size(), gpu_ran ? 3u : 1u);
  const auto& pair = j["pairs"][0];
  EXPECT_EQ(pair["a"], "ref");
  EXPECT_EQ(pair["b"], "emu");
  EXPECT_EQ(pair["tensor"], tensor);
  EXPECT_EQ(pair["tolerance"]["tier"], "normwise");
  EXPECT_GT(pair["relative_error"].get<double>(), 0.0);  // fp16 inputs do round
  EXPECT_TRUE(pair["passed"].get<bool>()) << pair.dump(2);
  for (const auto& p : j["pairs"]) EXPECT_TRUE(p["passed"].get<bool>()) << p.dump(2);
}

TEST(LossOpsCli, SoftmaxCrossEntropyForwardAndBackward) {
  // b = 16 rows of m = 300 logits: the emulator rounds 4800 logits and adds
  // 4800 exps, then 16 row losses, and rounds the loss once.
  auto j = run_json("--op softmax-cross-entropy --shape b=16,m=300");
  expect_sides_and_ref_emu_pass(j, "loss");
  EXPECT_EQ(j["counters"]["softmax_cross_entropy.logits"]["elements"], 4800);
  EXPECT_EQ(j["counters"]["softmax_cross_entropy.sum_exp"]["elements"], 4800);
  EXPECT_EQ(j["counters"]["softmax_cross_entropy.batch_sum"]["elements"], 16);
  EXPECT_EQ(j["counters"]["softmax_cross_entropy.loss"]["elements"], 1);
  EXPECT_EQ(j["shape"]["b"], 16);
  EXPECT_EQ(j["policy"]["accumulate"], "fp32");

  j = run_json("--op softmax-cross-entropy-backward --shape b=16,m=300");
  expect_sides_and_ref_emu_pass(j, "dlogits");
  EXPECT_EQ(j["counters"]["softmax_cross_entropy_backward.dlogits"]["elements"], 4800);
  // Logits of standard deviation 4 over 300 classes: some p/16 fall below
  // 2^-25 and underflow the fp16 gradient.
  EXPECT_GT(j["counters"]["softmax_cross_entropy_backward.dlogits"]["underflow_to_zero"].get<int>(), 0);
}

TEST(LossOpsCli, MseAndBceForwardAndBackward) {
  for (const char* op : {"mse", "bce-with-logits"}) {
    const std::string site = std::string(op) == "mse" ? "mse" : "bce_with_logits";
    auto j = run_json(std::string("--op ") + op + " --shape n=3000");
    expect_sides_and_ref_emu_pass(j, "loss");
    EXPECT_EQ(j["counters"][site + ".sum"]["elements"], 3000) << op;
    EXPECT_EQ(j["counters"][site + ".loss"]["elements"], 1) << op;
    j = run_json(std::string("--op ") + op + "-backward --shape n=3000");
    expect_sides_and_ref_emu_pass(j, std::string(op) == "mse" ? "dy" : "dx");
    EXPECT_EQ(j["counters"][site + "_backward." + (std::string(op) == "mse" ? "dy" : "dx")]["elements"], 3000) << op;
  }
}

TEST(LossOpsCli, Fp16AccumulationIsAPolicyTheGpuDoesNotRun) {
  // 3000 terms in an fp16 running sum: gamma_3000(2^-11) does not exist
  // (k u > 1), so there is no a priori bound: the tolerance is infinite and
  // the report says so; the sum swamps some of its additions.
  const auto j = run_json("--op mse --shape n=3000 --policy accumulate=fp16");
  EXPECT_EQ(j["policy"]["accumulate"], "fp16");
  EXPECT_GT(j["counters"]["mse.sum"]["swamped"].get<int>(), 0);
  EXPECT_EQ(j["pairs"][0]["tolerance"]["used"], nullptr);
  if (mpverify::gpu::gpu_unavailable_reason().empty()) {
    EXPECT_FALSE(j["sides"][2]["ran"].get<bool>());
    EXPECT_NE(j["sides"][2]["reason"].get<std::string>().find("fp32 accumulation"), std::string::npos);
  }
  // 300 terms: gamma exists and the pair holds it.
  const auto k = run_json("--op bce-with-logits --shape n=300 --policy accumulate=fp16");
  EXPECT_NE(k["pairs"][0]["tolerance"]["used"], nullptr);
  EXPECT_TRUE(k["pairs"][0]["passed"].get<bool>());
}

TEST(LossOpsCli, SameSeedSameOutput) {
  const std::string cmd = ops("--op softmax-cross-entropy-backward --shape b=4,m=9 --backends ref,emu --json --seed 3");
  EXPECT_EQ(run_command(cmd, "").out, run_command(cmd, "").out);
  EXPECT_NE(run_command(cmd, "").out,
            run_command(ops("--op softmax-cross-entropy-backward --shape b=4,m=9 --backends ref,emu --json --seed 4"), "")
                .out);
}

TEST(LossOpsCli, BadArgumentsExit2WithNoOutput) {
  for (const char* args :
       {"--op softmax-cross-entropy --shape b=4", "--op softmax-cross-entropy --shape n=4",
        "--op softmax-cross-entropy --shape b=0,m=3", "--op softmax-cross-entropy --shape b=65536,m=65536",
        "--op mse --shape n=0", "--op mse --shape b=2,m=2", "--op bce-with-logits --shape n=4 --policy slope=1",
        "--op mse-backward --shape n=4 --policy accumulate=fp99"}) {
    const auto r = run_command(ops(args), "");
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.out, "") << args;
  }
}

}  // namespace
