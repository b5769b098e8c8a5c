// `mpverify ops --op gemm` under a tensor-core instruction holds the emulator to the reference of
// refs/mma_ref.cpp bit for bit, so a model that is off by one fraction bit (or computes in halves where the
// architecture does not) fails the comparison; the same run with the emulator unchanged passes.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "cli/ops/gemm_op.h"
#include "cli/commands.h"
#include "compare/compare.h"
#include "gpu/device.h"

namespace {

using namespace mpverify;
using cli::ops::OpArgs;
using cli::ops::Side;

// Runs ref and emu with the emulator's policy changed by `alter`; returns the ref-emu comparison.
compare::Comparison ref_against_emu(const std::string& policy, const std::function<void(emu::GemmPolicy&)>& alter) {
  OpArgs args;
  args.op = "gemm";
  args.shape = {{"m", "16"}, {"n", "12"}, {"k", "256"}};
  args.policy = cli::ops::parse_key_values(policy, "--policy");
  std::vector<Side> sides{{"ref", false, {}, {}}, {"emu", false, {}, {}}};
  const cli::ops::OpResult r = cli::ops::run_gemm_altering_emulator(args, sides, alter);
  EXPECT_TRUE(r.sides[0].ran && r.sides[1].ran);
  const compare::Tolerance tolerance = r.tolerance(0, "ref", "emu");
  EXPECT_EQ(tolerance.tier, compare::Tier::bit_exact) << policy;
  return compare::compare(r.sides[0].out[0], r.sides[1].out[0], r.tensors[0].format, tolerance);
}

TEST(OpsGemm, TheUnchangedInstructionModelPasses) {
  for (const char* policy : {"input=fp16,accumulate=hopper", "input=bf16,accumulate=ampere",
                             "input=fp8-e4m3,input-b=fp8-e5m2,accumulate=sm90.wgmma.k32.f32.e4m3.e5m2",
                             "input=fp8-e4m3,accumulate=hopper,promotion=128", "input=fp16,accumulate=volta,output=fp16"}) {
    const compare::Comparison c = ref_against_emu(policy, [](emu::GemmPolicy&) {});
    EXPECT_TRUE(c.passed) << policy << ": " << c.failure;
    EXPECT_EQ(c.bit_identical_fraction, 1.0) << policy;
  }
}

TEST(OpsGemm, FailsWhenTheEmulatorsModelIsOffByOneFractionBit) {
  for (const char* policy : {"input=fp16,accumulate=hopper", "input=bf16,accumulate=ampere",
                             "input=fp8-e4m3,input-b=fp8-e5m2,accumulate=sm90.wgmma.k32.f32.e4m3.e5m2"})
    for (const int change : {-1, +1}) {
      const compare::Comparison c =
          ref_against_emu(policy, [change](emu::GemmPolicy& p) { p.mma->fraction_bits += change; });
      EXPECT_FALSE(c.passed) << policy << " with F changed by " << change;
      EXPECT_LT(c.bit_identical_fraction, 1.0) << policy;
    }
}

TEST(OpsGemm, FailsWhenTheEmulatorSplitsWhereTheArchitectureDoesNot) {
  const compare::Comparison c =
      ref_against_emu("input=fp16,accumulate=hopper", [](emu::GemmPolicy& p) { p.mma->split_halves = true; });
  EXPECT_FALSE(c.passed);
}

}  // namespace

namespace {

cli::ops::OpResult ref_and_emu(const std::string& policy, const std::function<void(emu::GemmPolicy&)>& alter) {
  OpArgs args;
  args.op = "gemm";
  args.shape = {{"m", "24"}, {"n", "20"}, {"k", "256"}};
  args.policy = cli::ops::parse_key_values(policy, "--policy");
  std::vector<Side> sides{{"ref", false, {}, {}}, {"emu", false, {}, {}}};
  return cli::ops::run_gemm_altering_emulator(args, sides, alter);
}

compare::Comparison compare_pair(const cli::ops::OpResult& r, const std::string& x, const std::string& y) {
  return compare::compare(r.sides[0].out[0], r.sides[1].out[0], r.tensors[0].format, r.tolerance(0, x, y));
}

TEST(OpsGemm, OtherPairsAreHeldComponentwiseInUlpsOfTheAbsoluteProduct) {
  const cli::ops::OpResult r = ref_and_emu("input=fp16,accumulate=fp32", [](emu::GemmPolicy&) {});
  const compare::Tolerance t = r.tolerance(0, "ref", "emu");
  ASSERT_EQ(t.tier, compare::Tier::ulp_bound);
  ASSERT_TRUE(t.ulp_scale);
  // beta_ref + beta_emu = 2^-24 + gamma_256(2^-24) + 2^-24 (1 + gamma): about 258 u_out, in ulps of fp32.
  EXPECT_NEAR(t.bound, 2 + 256 * (1 + 256 * 0x1p-24), 0.01);
  const compare::Comparison c = compare_pair(r, "ref", "emu");
  EXPECT_TRUE(c.passed) << c.failure;
}

TEST(OpsGemm, TheComponentwiseBoundFailsAnEmulatorThatAccumulatesInFp16) {
  // The reference keeps fp32 accumulation's bound; fp16 accumulation over 256 terms loses about 2^-11 per step.
  const cli::ops::OpResult r =
      ref_and_emu("input=fp16,accumulate=fp32", [](emu::GemmPolicy& p) { p.accumulation = emu::Accumulation::fp16; });
  EXPECT_FALSE(compare_pair(r, "ref", "emu").passed);
}

TEST(OpsGemm, WithoutADeviceOfItsArchitectureTheChainedGpuSideIsHeldByUlps) {
  // Bit for bit only on the architecture the preset describes, and only with a device to ask; here neither.
  if (gpu::gpu_unavailable_reason().empty()) GTEST_SKIP() << "a GPU is present: gemm_gpu_test checks the bit-exact tier";
  const cli::ops::OpResult r = ref_and_emu("input=fp16,accumulate=sm90.wgmma.k16.f32.f16", [](emu::GemmPolicy&) {});
  EXPECT_EQ(r.tolerance(0, "ref", "emu").tier, compare::Tier::bit_exact);
  const compare::Tolerance t = r.tolerance(0, "emu", "gpu");
  EXPECT_EQ(t.tier, compare::Tier::ulp_bound);
  EXPECT_TRUE(t.ulp_scale);
}

TEST(OpsGemm, GpuChainNeedsAnInstruction) {
  EXPECT_THROW(ref_and_emu("input=fp16,accumulate=fp32,gpu=chain", [](emu::GemmPolicy&) {}), cli::UsageError);
  EXPECT_THROW(ref_and_emu("input=fp16,accumulate=hopper,gpu=tensor", [](emu::GemmPolicy&) {}), cli::UsageError);
}

}  // namespace
