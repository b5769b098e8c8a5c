// `mpverify ops --op block-gemm` as a user runs it: ref and emu bit for bit under each model, the counters and
// the information against FP64, the GPU side refused with its reason, and bad policies refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpu/device.h"
#include "support/run_command.h"

namespace {

using mpverify::test::run_command;

nlohmann::json block_gemm(const std::string& shape, const std::string& policy) {
  const auto r = run_command(std::string(MPVERIFY_BIN) + " ops --op block-gemm --json --shape " + shape +
                                 (policy.empty() ? "" : " --policy " + policy),
                             "");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return nlohmann::json::parse(r.out);
}

TEST(BlockGemmOpsCli, DefaultsAreMxfp8OnBlackwellAndRefEqualsEmu) {
  const auto j = block_gemm("m=6,n=5,k=70", "");
  EXPECT_EQ(j["policy"]["scheme-a"], "mxfp8-e4m3");
  EXPECT_EQ(j["policy"]["scheme-b"], "mxfp8-e4m3");
  EXPECT_EQ(j["policy"]["accumulate"], "sm100.mxf8f6f4");
  ASSERT_EQ(j["sides"].size(), 3u);
  EXPECT_FALSE(j["sides"][2]["ran"].get<bool>());  // no GPU kernel yet, with or without a GPU
  const std::string reason = j["sides"][2]["reason"];
  if (mpverify::gpu::gpu_unavailable_reason().empty())
    EXPECT_NE(reason.find("no GPU kernel"), std::string::npos) << reason;
  else
    EXPECT_EQ(reason, mpverify::gpu::gpu_unavailable_reason());
  ASSERT_EQ(j["pairs"].size(), 1u);
  EXPECT_EQ(j["pairs"][0]["tolerance"]["tier"], "bit-exact");
  EXPECT_EQ(j["pairs"][0]["bit_identical_fraction"].get<double>(), 1.0);
  EXPECT_TRUE(j["pairs"][0]["passed"].get<bool>());
  // k = 70 is padded to 96: three instructions per output; A quantizes 6 x 70 elements in 6 x 3 blocks.
  EXPECT_EQ(j["counters"]["block-gemm.accumulate"]["elements"], 6 * 5 * 3);
  EXPECT_EQ(j["counters"]["block-gemm.a"]["elements"], 6 * 70);
  EXPECT_EQ(j["info"]["quantization_a"]["blocks"], 6 * 3);
  const double error = j["info"]["against_fp64_of_unquantized_inputs"]["normwise_relative_error"];
  EXPECT_GT(error, 0.0);   // E4M3 elements lose bits
  EXPECT_LT(error, 0.07);  // about 2^-5 per element (3 fraction bits, to nearest), averaged over 70 products
}

TEST(BlockGemmOpsCli, EveryModelAgreesWithTheReference) {
  for (const char* policy : {"scheme-a=mxfp6-e2m3,scheme-b=mxfp4,scale-rule=floor",
                             "scheme-a=nvfp4", "scheme-a=mxfp4,accumulate=sm100.mxf4nvf4",
                             "scheme-a=fp8-tile1x128,scheme-b=fp8-block128x128"}) {
    const auto j = block_gemm("m=4,n=3,k=200,ta=1,tb=1", policy);
    ASSERT_EQ(j["pairs"].size(), 1u) << policy;
    EXPECT_TRUE(j["pairs"][0]["passed"].get<bool>()) << policy << j["pairs"][0].dump();
  }
  const auto hopper = block_gemm("m=2,n=2,k=300", "scheme-a=fp8-tile1x128,scheme-b=fp8-block128x128");
  EXPECT_EQ(hopper["policy"]["accumulate"], "sm90.fp8-blockwise");  // the model fp32 scales are made for
  EXPECT_EQ(hopper["info"]["promotions"]["count"], 2 * 2 * 3);
}

TEST(BlockGemmOpsCli, RefusesPoliciesTheModelsCannotTake) {
  for (const char* bad : {"scheme-a=nvfp4,scheme-b=mxfp4", "scheme-a=mxfp8-e4m3,accumulate=sm100.mxf4nvf4",
                          "scheme-a=fp8-tile1x128,accumulate=sm100.mxf8f6f4", "accumulate=sm80",
                          "scheme-a=int8", "scale-rule=up", "input=fp16"}) {
    const auto e = run_command(std::string(MPVERIFY_BIN) + " ops --op block-gemm --shape m=2,n=2,k=32 --policy " + bad, "");
    EXPECT_EQ(e.exit_code, 2) << bad;
    EXPECT_EQ(e.out, "") << bad;
  }
}

}  // namespace
