// `mpverify ops --op sgd|adam` as a user runs it: sides, pairs and their
// tiers, the counters (swamping of fp16 weights), and bad input.
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
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

// The ref-emu pairs, one per output tensor, in order.
std::vector<nlohmann::json> ref_emu_pairs(const nlohmann::json& j) {
  std::vector<nlohmann::json> out;
  for (const auto& p : j["pairs"])
    if (p["a"] == "ref" && p["b"] == "emu") out.push_back(p);
  return out;
}

TEST(OptimizerOpsCli, Fp32PolicyIsBitExactAgainstTheReference) {
  for (const char* op : {"sgd", "adam"}) {
    const auto j = run_json(std::string("--op ") + op + " --shape n=2000,steps=5");
    ASSERT_EQ(j["sides"].size(), 3u);
    EXPECT_TRUE(j["sides"][0]["ran"].get<bool>());
    EXPECT_TRUE(j["sides"][1]["ran"].get<bool>());
    const bool gpu_ran = j["sides"][2]["ran"].get<bool>();
    EXPECT_EQ(gpu_ran, mpverify::gpu::gpu_unavailable_reason().empty());
    const auto pairs = ref_emu_pairs(j);
    const std::vector<std::string> tensors =
        std::string(op) == "sgd" ? std::vector<std::string>{"w", "v"} : std::vector<std::string>{"w", "m", "v"};
    ASSERT_EQ(pairs.size(), tensors.size()) << op;
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      EXPECT_EQ(pairs[t]["tensor"], tensors[t]);
      EXPECT_EQ(pairs[t]["tolerance"]["tier"], "bit-exact") << op;
      EXPECT_EQ(pairs[t]["bit_identical_fraction"], 1.0) << op;
      EXPECT_TRUE(pairs[t]["passed"].get<bool>()) << op;
    }
    const std::string site = std::string(op) + ".update";
    EXPECT_EQ(j["counters"][site]["elements"], 2000 * 5) << op;
  }
}

// fp16-pure SGD at lr = 1e-3 with gradients ~1e-3 (see the op's comment and
// optimizer_test's derivation): at least 90% of the updates are lost, the
// pairs pass their normwise running-error bounds, and those bounds are finite.
TEST(OptimizerOpsCli, Fp16PureSgdShowsSwampingAndPasses) {
  const auto j = run_json("--op sgd --shape n=4096,steps=10 --policy weights=fp16,grad=fp16");
  EXPECT_EQ(j["policy"]["weights"], "fp16");
  EXPECT_EQ(j["policy"]["momentum"], 0.9);
  const auto pairs = ref_emu_pairs(j);
  ASSERT_EQ(pairs.size(), 2u);
  for (const auto& p : pairs) {
    EXPECT_EQ(p["tolerance"]["tier"], "normwise");
    EXPECT_TRUE(p["tolerance"]["bound"].is_number());
    EXPECT_TRUE(p["passed"].get<bool>()) << p.dump();
    EXPECT_GT(p["relative_error"].get<double>(), 0.0);  // fp16 does change the result
  }
  const auto& update = j["counters"]["sgd.update"];
  EXPECT_EQ(update["elements"], 40960);
  EXPECT_GT(update["swamped"].get<double>(), 0.9 * update["addends_nonzero"].get<double>());
  EXPECT_EQ(j["counters"]["sgd.grad"]["elements"], 40960);
  EXPECT_GT(j["counters"]["sgd.grad"]["subnormal"].get<int>(), 0);  // |g| < 2^-14 = 6.1e-5: about 5% of N(0,1e-3)
}

TEST(OptimizerOpsCli, AdamVariantsPass) {
  for (const char* policy : {"weights=fp16", "weights=bf16,state=bf16,adamw=1,weight_decay=0.1",
                             "beta1=0.3,weight_decay=0.01,grad=fp16"}) {
    const auto j = run_json(std::string("--op adam --shape n=3000,steps=8 --policy ") + policy);
    const auto pairs = ref_emu_pairs(j);
    ASSERT_EQ(pairs.size(), 3u) << policy;
    for (const auto& p : pairs) EXPECT_TRUE(p["passed"].get<bool>()) << policy << " " << p.dump();
    EXPECT_EQ(j["counters"]["adam.update"]["elements"], 24000) << policy;
  }
}

TEST(OptimizerOpsCli, WithoutMomentumOnlyWeightsAreCompared) {
  const auto j = run_json("--op sgd --shape n=100 --policy momentum=0,nesterov=0 --backends ref,emu");
  ASSERT_EQ(j["pairs"].size(), 1u);
  EXPECT_EQ(j["pairs"][0]["tensor"], "w");
  EXPECT_EQ(j["counters"].count("sgd.state"), 0u);
}

TEST(OptimizerOpsCli, GpuSideSaysWhyItDidNotRun) {
  const auto j = run_json("--op adam --shape n=100 --policy state=bf16");
  ASSERT_EQ(j["sides"].size(), 3u);
  EXPECT_FALSE(j["sides"][2]["ran"].get<bool>());
  const std::string reason = j["sides"][2]["reason"];
  if (mpverify::gpu::gpu_unavailable_reason().empty()) EXPECT_NE(reason.find("state in fp32"), std::string::npos) << reason;
  else EXPECT_EQ(reason, mpverify::gpu::gpu_unavailable_reason());
}

TEST(OptimizerOpsCli, BadArgumentsExit2WithNoOutput) {
  for (const char* args :
       {"--op sgd --shape n=0", "--op sgd --shape n=4,steps=0", "--op sgd --shape n=4,k=3",
        "--op sgd --shape n=4 --policy beta1=0.9", "--op adam --shape n=4 --policy nesterov=1",
        "--op sgd --shape n=4 --policy nesterov=1,dampening=0.5", "--op sgd --shape n=4 --policy nesterov=2",
        "--op adam --shape n=4 --policy beta1=1", "--op adam --shape n=4 --policy lr=-1",
        "--op sgd --shape n=4 --policy weights=fp99", "--op sgd --shape n=65536,steps=2000"}) {
    const auto r = run_command(ops(args), "");
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.out, "") << args;
  }
}

}  // namespace
