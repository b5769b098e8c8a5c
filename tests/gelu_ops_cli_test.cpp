// `mpverify ops --op gelu[-backward]` as a user runs it: ref and emu agree
// within the family's derived tolerance (src/cli/ops/activation_op.cpp), the
// counters are there, and the gpu side never runs gelu: without a device it
// says why, with one it names the missing kernel.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpu/device.h"
#include "support/run_command.h"

namespace {

using mpverify::test::run_command;

TEST(GeluOpsCli, RefAndEmuAgreeAndTheGpuSideSaysWhyNot) {
  for (const char* op : {"gelu", "gelu-backward"})
    for (const char* policy : {"input=fp16,output=fp16", "input=bf16,output=bf16"}) {
      const std::string command =
          std::string(MPVERIFY_BIN) + " ops --op " + op + " --shape n=3000 --json --policy " + policy;
      const auto r = run_command(command, "");
      ASSERT_EQ(r.exit_code, 0) << command << "\n" << r.out;
      const auto j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["op"], op);
      ASSERT_EQ(j["pairs"].size(), 1u) << command;
      EXPECT_EQ(j["pairs"][0]["a"], "ref");
      EXPECT_EQ(j["pairs"][0]["b"], "emu");
      EXPECT_TRUE(j["pairs"][0]["passed"].get<bool>()) << command;
      EXPECT_GT(j["pairs"][0]["relative_error"].get<double>(), 0.0) << command;  // the roundings do round
      const std::string out_site = std::string(op).ends_with("-backward") ? "activation_backward.dx" : "activation.y";
      EXPECT_EQ(j["counters"][out_site]["elements"], 3000) << command;
      EXPECT_FALSE(j["sides"][2]["ran"].get<bool>());
      const std::string unavailable = mpverify::gpu::gpu_unavailable_reason();
      const std::string why = unavailable.empty() ? "the GPU activations have no gelu kernel yet" : unavailable;
      EXPECT_EQ(j["sides"][2]["reason"], why);
    }
}

}  // namespace
