// `mpverify ops` for bias add, max pooling and batch normalisation, as a user
// runs it: sides, pairs per output tensor, tiers, counters, and bad input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpu/device.h"
#include "support/run_command.h"

namespace {

using mpverify::test::run_command;

std::string ops(const std::string& args) { return std::string(MPVERIFY_BIN) + " ops " + args; }

struct Case {
  const char* args;
  std::vector<const char*> tensors;
  const char* counter_site;  // an emulator site and how many elements it rounded
  long elements;
  const char* ref_emu_tier;  // of the first tensor
};

TEST(BnPoolOpsCli, EveryOpRunsWithItsTensorsAndPasses) {
  const bool gpu = mpverify::gpu::gpu_unavailable_reason().empty();
  const Case cases[] = {
      // y rounded once per element: 2*3*4*5.
      {"--op bias-add --shape n=2,c=3,h=4,w=5", {"y"}, "bias_add.y", 120, "ulp-bound"},
      // 64*8 dy; per channel 64 lane additions + 255 tree additions.
      {"--op bias-add-backward --shape n=64,c=8", {"db"}, "bias_add_backward.accumulate", 8 * (64 + 255), "normwise"},
      // 9x9 input, 3x3 windows, stride 2, pad 1: 5x5 outputs per plane, 2*3 planes.
      {"--op max-pool --shape n=2,c=3,h=9,w=9,r=3,s=3,stride=2,pad=1", {"y"}, "max_pool.y", 150, "bit-exact"},
      // one accumulation per window.
      {"--op max-pool-backward --shape n=2,c=3,h=9,w=9,r=3,s=3,stride=2,pad=1", {"dx"}, "max_pool_backward.accumulate",
       150, "normwise"},
      // M = 4*7*7 = 196: per channel 196 + 255 additions and one division.
      {"--op batch-norm --shape n=4,c=5,h=7,w=7", {"y", "mean", "invstd"}, "batch_norm.mean", 5 * (196 + 255 + 1),
       "normwise"},
      // dbeta: 196 + 255 additions and one rounding to the parameter format.
      {"--op batch-norm-backward --shape n=4,c=5,h=7,w=7", {"dx", "dgamma", "dbeta"}, "batch_norm_backward.dbeta",
       5 * (196 + 255 + 1), "normwise"},
  };
  for (const Case& c : cases) {
    const auto r = run_command(ops(std::string(c.args) + " --json"), "");
    ASSERT_EQ(r.exit_code, 0) << c.args << "\n" << r.out;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["sides"].size(), 3u);
    EXPECT_TRUE(j["sides"][0]["ran"].get<bool>() && j["sides"][1]["ran"].get<bool>()) << c.args;
    EXPECT_EQ(j["sides"][2]["ran"].get<bool>(), gpu) << c.args;
    if (!gpu) {
      EXPECT_EQ(j["sides"][2]["reason"], mpverify::gpu::gpu_unavailable_reason());
    }
    ASSERT_EQ(j["pairs"].size(), c.tensors.size() * (gpu ? 3 : 1)) << c.args;
    for (std::size_t t = 0; t < c.tensors.size(); ++t) {
      const auto& pair = j["pairs"][t];
      EXPECT_EQ(pair["a"], "ref");
      EXPECT_EQ(pair["b"], "emu");
      EXPECT_EQ(pair["tensor"], c.tensors[t]) << c.args;
      EXPECT_TRUE(pair["passed"].get<bool>()) << c.args << " " << c.tensors[t] << ": " << pair.dump();
      EXPECT_FALSE(pair["tolerance"]["derivation"].get<std::string>().empty());
    }
    EXPECT_EQ(j["pairs"][0]["tolerance"]["tier"], c.ref_emu_tier) << c.args;
    EXPECT_EQ(j["counters"][c.counter_site]["elements"].get<long>(), c.elements) << c.args;
    if (gpu) {
      for (const auto& pair : j["pairs"]) EXPECT_TRUE(pair["passed"].get<bool>()) << c.args << ": " << pair.dump();
    }
  }
}

TEST(BnPoolOpsCli, PoliciesOutsideTheGpuKernelsSayWhy) {
  for (const char* args : {"--op bias-add-backward --shape n=4,c=2 --policy accumulate=fp16",
                           "--op max-pool --shape n=1,c=1,h=4,w=4,r=2,s=2 --policy input=bf16,output=bf16",
                           "--op batch-norm --shape n=4,c=2 --policy statistics=bf16"}) {
    const auto r = run_command(ops(std::string(args) + " --json"), "");
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.out;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_FALSE(j["sides"][2]["ran"].get<bool>()) << args;
    EXPECT_FALSE(j["sides"][2]["reason"].get<std::string>().empty()) << args;
    EXPECT_TRUE(j["pairs"][0]["passed"].get<bool>()) << args;
  }
}

TEST(BnPoolOpsCli, BatchNormCountersOnlyWithTheEmulatorSide) {
  // The emulator also runs for the GPU pairs' bounds; its counts are reported
  // only when it is one of the sides asked for.
  const auto with = nlohmann::json::parse(run_command(ops("--op batch-norm --shape n=4,c=2 --backends ref,emu --json"), "").out);
  EXPECT_EQ(with["counters"]["batch_norm.y"]["elements"], 8);
  const auto without = nlohmann::json::parse(run_command(ops("--op batch-norm --shape n=4,c=2 --backends ref,gpu --json"), "").out);
  EXPECT_TRUE(without["counters"].empty());
}

TEST(BnPoolOpsCli, BadArgumentsExit2WithNoOutput) {
  for (const char* args : {"--op bias-add --shape n=2", "--op bias-add --shape n=2,c=0",
                           "--op bias-add-backward --shape n=2,c=2 --policy lanes=3",
                           "--op max-pool --shape n=1,c=1,h=4,w=4,r=2", "--op max-pool --shape n=1,c=1,h=4,w=4,r=2,s=2,pad=2",
                           "--op max-pool --shape n=1,c=1,h=2,w=2,r=3,s=3", "--op max-pool --shape n=1,c=1,h=4,w=4,r=2,s=2,stride=0",
                           "--op batch-norm --shape n=1,c=3", "--op batch-norm --shape n=2,c=3 --policy eps=0",
                           "--op batch-norm-backward --shape n=2,c=3 --policy momentum=x",
                           "--op batch-norm --shape n=2,c=3 --policy gamma=fp16", "--op max-pool-backward --shape n=1,c=1,h=4,w=4,r=2,s=2,q=1"}) {
    const auto r = run_command(ops(args), "");
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.out, "") << args;
  }
}

}  // namespace
