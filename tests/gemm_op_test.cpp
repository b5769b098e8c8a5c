// `mpverify ops --op gemm` under a tensor-core instruction holds the emulator to the reference of
// refs/mma_ref.cpp bit for bit, so a model that is off by one fraction bit (or computes in halves where the
// architecture does not) fails the comparison; the same run with the emulator unchanged passes.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "cli/ops/gemm_op.h"
#include "compare/compare.h"

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
