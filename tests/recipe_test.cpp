// Precision recipes: each name gives the table row of training/recipe.h, keys
// override it, and every malformed text is refused with a message that names
// what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "nn/policies.h"
#include "training/recipe.h"
#include "training/unscale.h"

namespace {

using mpverify::formats::parse_format;
using mpverify::training::OperandScaling;
using mpverify::training::parse_recipe;

const auto fp32 = parse_format("fp32");
const auto fp16 = parse_format("fp16");
const auto bf16 = parse_format("bf16");

TEST(Recipe, Fp32IsTheReference) {
  const auto r = parse_recipe("fp32");
  EXPECT_TRUE(r.precision.is_fp32());
  EXPECT_EQ(r.optimizer_state, fp32);
  EXPECT_EQ(r.operand_scaling, OperandScaling::none);
}

TEST(Recipe, O1KeepsFp32WeightsAndCastsMatrixOperands) {
  const auto p = parse_recipe("o1").precision;
  EXPECT_EQ(p.matmul_forward, fp16);
  EXPECT_EQ(p.matmul_backward, fp16);
  EXPECT_EQ(p.activations, fp16);
  EXPECT_EQ(p.activation_grads, fp16);
  EXPECT_EQ(p.weight_grads, fp16);
  EXPECT_EQ(p.weights, fp32);
  EXPECT_EQ(p.master, fp32);
  EXPECT_EQ(p.loss_input, fp32);
  EXPECT_EQ(p.norm_parameters, fp32);
  EXPECT_EQ(p.norm_statistics, fp32);
  EXPECT_FALSE(p.is_fp32());
}

TEST(Recipe, O2HasFp16WeightsAndFp32Masters) {
  const auto r = parse_recipe("o2");
  EXPECT_EQ(r.precision.weights, fp16);
  EXPECT_EQ(r.precision.master, fp32);
  EXPECT_EQ(r.precision.loss_input, fp16);
  EXPECT_EQ(r.precision.norm_parameters, fp32);
  EXPECT_EQ(r.optimizer_state, fp32);
}

TEST(Recipe, PureHasNoMasterCopy) {
  const auto r = parse_recipe("fp16-pure");
  EXPECT_EQ(r.precision.weights, fp16);
  EXPECT_EQ(r.precision.master, fp16);
  EXPECT_EQ(r.precision.norm_parameters, fp16);
  EXPECT_EQ(r.optimizer_state, fp16);
  EXPECT_EQ(r.precision.norm_statistics, fp32);  // kernels keep statistics in fp32
  EXPECT_EQ(r.precision.loss_accumulate, fp32);
}

TEST(Recipe, Bf16VariantsSwapTheLowFormat) {
  EXPECT_EQ(parse_recipe("bf16-o1").precision.matmul_forward, bf16);
  EXPECT_EQ(parse_recipe("bf16-o1").precision.weights, fp32);
  EXPECT_EQ(parse_recipe("bf16-o2").precision.weights, bf16);
  EXPECT_EQ(parse_recipe("bf16-pure").precision.master, bf16);
}

TEST(Recipe, Fp8UsesOcpE4m3ForwardE5m2BackwardWithScaling) {
  const auto r = parse_recipe("fp8");
  // OCP FP8 as the GPUs implement it: E4M3 "fn" (max 448, not the IEEE-like e4m3's 240), E5M2; the casts
  // saturate as CUDA's __nv_fp8_e4m3(float) does (cuda_fp8.hpp, __NV_SATFINITE).
  EXPECT_EQ(r.precision.matmul_forward, parse_format("fp8-e4m3:saturate"));
  EXPECT_EQ(r.precision.matmul_forward.max_finite(), 448.0);
  EXPECT_EQ(r.precision.matmul_forward.overflow, mpverify::formats::Overflow::saturate);
  EXPECT_EQ(r.precision.matmul_backward, parse_format("fp8-e5m2:saturate"));
  EXPECT_EQ(r.precision.activations, bf16);
  EXPECT_EQ(r.operand_scaling, OperandScaling::current);
  EXPECT_EQ(parse_recipe("fp8:fp8_scaling=delayed").operand_scaling, OperandScaling::delayed);
}

TEST(Recipe, LowReplacesEveryLowRoleWithACustomFormat) {
  const auto r = parse_recipe("o2:low=e5m7");
  const auto e5m7 = parse_format("e5m7");
  EXPECT_EQ(r.precision.matmul_forward, e5m7);
  EXPECT_EQ(r.precision.activations, e5m7);
  EXPECT_EQ(r.precision.weights, e5m7);
  EXPECT_EQ(r.precision.master, fp32);  // not a low role of o2
  EXPECT_EQ(r.name, "o2:low=e5m7");
}

TEST(Recipe, KeysSetSingleRolesAndAccumulation) {
  const auto r = parse_recipe("o2:accumulation=fp16,master=bf16,matmul_backward=e5m2");
  EXPECT_EQ(r.precision.accumulation, mpverify::emu::Accumulation::fp16);
  EXPECT_EQ(r.precision.master, bf16);
  EXPECT_EQ(r.precision.matmul_backward, parse_format("e5m2"));
  EXPECT_EQ(r.precision.matmul_forward, fp16);
}

TEST(Recipe, Fp8BackwardGemmsMultiplyAnE5m2GradientByE4m3) {
  // Transformer Engine's HYBRID: a backward GEMM's gradient operand is E5M2, the weight or activation E4M3.
  using mpverify::nn::GradientOperand;
  using mpverify::nn::Pass;
  const auto p = parse_recipe("fp8").precision;
  const auto e4m3 = parse_format("fp8-e4m3:saturate"), e5m2 = parse_format("fp8-e5m2:saturate");
  const auto forward = mpverify::nn::matmul_policy(p, Pass::forward);
  EXPECT_EQ(forward.input, e4m3);
  EXPECT_EQ(forward.b_format(), e4m3);
  const auto data = mpverify::nn::matmul_policy(p, Pass::backward, GradientOperand::first);
  EXPECT_EQ(data.input, e5m2);
  EXPECT_EQ(data.b_format(), e4m3);
  const auto filter = mpverify::nn::matmul_policy(p, Pass::backward, GradientOperand::second);
  EXPECT_EQ(filter.input, e4m3);
  EXPECT_EQ(filter.b_format(), e5m2);
  // o2's backward GEMMs keep one format.
  EXPECT_FALSE(mpverify::nn::matmul_policy(parse_recipe("o2").precision, Pass::backward).input_b.has_value());
}

TEST(Recipe, AccumulationAsAnArchitecturesTensorCores) {
  using mpverify::nn::GradientOperand;
  using mpverify::nn::Pass;
  const auto p = parse_recipe("fp8:accumulation=hopper,promotion=128").precision;
  const auto data = mpverify::nn::matmul_policy(p, Pass::backward, GradientOperand::first);
  EXPECT_EQ(data.accumulation, mpverify::emu::Accumulation::mma);
  EXPECT_EQ(data.mma->name, "sm90.wgmma.k32.f32.e5m2.e4m3");
  EXPECT_EQ(data.promotion_interval, 128);
  EXPECT_EQ(mpverify::nn::matmul_policy(p, Pass::forward).mma->name, "sm90.wgmma.k32.f32.e4m3");
  EXPECT_EQ(mpverify::nn::matmul_policy(parse_recipe("bf16-o2:accumulation=ampere").precision, Pass::forward).mma->name,
            "sm80.mma.m16n8k16.f32.bf16");
}

void expect_error(const std::string& text, const std::string& fragment) {
  try {
    parse_recipe(text);
    ADD_FAILURE() << text << " was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Recipe, BadTextIsRefusedWithTheReason) {
  expect_error("o3", "the recipes are fp32, o1, o2");
  expect_error("o2:", "nothing after ':'");
  expect_error("o2:low", "is not KEY=VALUE");
  expect_error("o2:colour=red", "unknown key 'colour'");
  expect_error("o2:low=fp17", "key low");
  expect_error("fp32:low=bf16", "low= applies to the mixed recipes");
  expect_error("o2:accumulation=fp64", "accumulation must be");
  expect_error("o2:accumulation=pascal", "an architecture (volta, turing, ampere, ada, hopper, blackwell)");
  expect_error("fp8:promotion=-1", "promotion must be");
  // Found when the recipe is read, not at a run's first GEMM (which would leave a partial run behind).
  expect_error("o2:accumulation=hopper,promotion=7", "not a multiple of k = 16");
  expect_error("fp8:promotion=128", "promotion=N needs accumulation=ARCHITECTURE");
  expect_error("fp8:accumulation=ampere", "ampere has no mma instruction");
}

// Stochastic rounding of gradients and of the weight update: rne unless asked, in any key order, and refused
// with the reason for a bad value or where there is no low format to round into.
TEST(Recipe, RoundingKeysDefaultToRneAndTakeStochastic) {
  using mpverify::formats::Rounding;
  for (const std::string& name : mpverify::training::recipe_names()) {
    EXPECT_EQ(parse_recipe(name).precision.grad_rounding, Rounding::nearest_even) << name;
    EXPECT_EQ(parse_recipe(name).precision.update_rounding, Rounding::nearest_even) << name;
  }
  const auto pure = parse_recipe("bf16-pure:grad_rounding=stochastic,update_rounding=stochastic").precision;
  EXPECT_EQ(pure.grad_rounding, Rounding::stochastic);
  EXPECT_EQ(pure.update_rounding, Rounding::stochastic);
  EXPECT_FALSE(pure.is_fp32());
  EXPECT_EQ(parse_recipe("o2:grad_rounding=stochastic").precision.grad_rounding, Rounding::stochastic);
  EXPECT_EQ(parse_recipe("fp8:grad_rounding=stochastic").precision.grad_rounding, Rounding::stochastic);
  EXPECT_EQ(parse_recipe("o2:master=bf16,update_rounding=stochastic").precision.update_rounding, Rounding::stochastic);
  // Checked after every key: a later key may give the rounding its low format.
  EXPECT_EQ(parse_recipe("fp32:grad_rounding=stochastic,weight_grads=fp16").precision.grad_rounding,
            Rounding::stochastic);
  EXPECT_EQ(parse_recipe("fp16-pure:update_rounding=stochastic,update_rounding=rne").precision.update_rounding,
            Rounding::nearest_even);
  EXPECT_EQ(parse_recipe("o2:grad_rounding=rne").precision.grad_rounding, Rounding::nearest_even);
}

TEST(Recipe, RoundingKeysRefuseBadValuesAndNothingToRound) {
  expect_error("o2:grad_rounding=up", "grad_rounding must be rne or stochastic");
  expect_error("fp16-pure:update_rounding=Stochastic", "update_rounding must be rne or stochastic");
  expect_error("o2:grad_rnd=stochastic", "grad_rounding, update_rounding");
  expect_error("fp32:grad_rounding=stochastic", "nothing to round");
  expect_error("o2:update_rounding=stochastic", "master and norm_parameters are fp32");
  expect_error("fp16-pure:master=fp32,norm_parameters=fp32,update_rounding=stochastic", "master and norm_parameters");
}

// The block-scaled recipes' rows of training/recipe.h, transcribed from their sources: Transformer Engine's
// MXFP8BlockScaling (E4M3 everywhere, 1 x 32, rceil), NVIDIA's NVFP4 recipe (arXiv 2509.25149: 16 x 16
// weights, 1 x 16 activations and gradients, stochastic gradients, RHT on wgrad) and DeepSeek-V3 (1 x 128
// activations and gradients, 128 x 128 weights); bf16 around them, fp32 weight gradients and masters.
TEST(Recipe, BlockScaledRecipesFollowTheirSources) {
  using mpverify::emu::BlockScaledAccumulation;
  const auto mx = parse_recipe("mxfp8").precision;
  ASSERT_TRUE(mx.block_scaling);
  EXPECT_EQ(mx.block_scaling->accumulation, BlockScaledAccumulation::sm100_mxf8f6f4);
  for (const auto* s : {&mx.block_scaling->input, &mx.block_scaling->weight, &mx.block_scaling->gradient})
    EXPECT_EQ(s->name, "mxfp8-e4m3");
  EXPECT_EQ(mx.block_scaling->scale_rule, mpverify::emu::ScaleRule::rceil);
  EXPECT_EQ(mx.block_scaling->gradient_rounding, mpverify::formats::Rounding::nearest_even);
  EXPECT_FALSE(mx.block_scaling->wgrad_hadamard);
  EXPECT_EQ(mx.block_scaling->high_precision_last, 1);
  EXPECT_EQ(mx.activations, bf16);
  EXPECT_EQ(mx.activation_grads, bf16);
  EXPECT_EQ(mx.matmul_forward, bf16);
  EXPECT_EQ(mx.weight_grads, fp32);
  EXPECT_EQ(mx.master, fp32);
  EXPECT_EQ(mx.weights, fp32);
  EXPECT_FALSE(mx.is_fp32());

  const auto nv = parse_recipe("nvfp4").precision;
  ASSERT_TRUE(nv.block_scaling);
  EXPECT_EQ(nv.block_scaling->accumulation, BlockScaledAccumulation::sm100_mxf4nvf4);
  EXPECT_EQ(nv.block_scaling->input.block_rows, 1u);
  EXPECT_EQ(nv.block_scaling->input.block_cols, 16u);
  EXPECT_EQ(nv.block_scaling->weight.block_rows, 16u);
  EXPECT_EQ(nv.block_scaling->weight.block_cols, 16u);
  EXPECT_EQ(nv.block_scaling->gradient.block_rows, 1u);
  EXPECT_EQ(nv.block_scaling->gradient.element.name, "fp4-e2m1");
  EXPECT_EQ(nv.block_scaling->gradient_rounding, mpverify::formats::Rounding::stochastic);
  EXPECT_TRUE(nv.block_scaling->wgrad_hadamard);

  const auto ds = parse_recipe("fp8-blockwise").precision;
  ASSERT_TRUE(ds.block_scaling);
  EXPECT_EQ(ds.block_scaling->accumulation, BlockScaledAccumulation::sm90_fp8_blockwise);
  EXPECT_EQ(ds.block_scaling->input.name, "fp8-tile1x128");
  EXPECT_EQ(ds.block_scaling->gradient.name, "fp8-tile1x128");
  EXPECT_EQ(ds.block_scaling->weight.name, "fp8-block128x128");
  EXPECT_FALSE(parse_recipe("bf16-o1").precision.block_scaling);
}

TEST(Recipe, BlockScaledKeys) {
  const auto p = parse_recipe("nvfp4:high_precision_last=0,dy_rounding=rne,hadamard=off").precision;
  EXPECT_EQ(p.block_scaling->high_precision_last, 0);
  EXPECT_EQ(p.block_scaling->gradient_rounding, mpverify::formats::Rounding::nearest_even);
  EXPECT_FALSE(p.block_scaling->wgrad_hadamard);
  EXPECT_EQ(parse_recipe("mxfp8:scale_rule=floor").precision.block_scaling->scale_rule,
            mpverify::emu::ScaleRule::floor);
  EXPECT_EQ(parse_recipe("mxfp8:dy_rounding=stochastic").precision.block_scaling->gradient_rounding,
            mpverify::formats::Rounding::stochastic);
  expect_error("o2:scale_rule=floor", "applies to the block-scaled recipes");
  expect_error("mxfp8:scale_rule=down", "scale_rule must be floor, ceil, even or rceil");
  expect_error("nvfp4:scale_rule=floor", "it applies to mxfp8");
  expect_error("mxfp8:hadamard=on", "use it with nvfp4");
  expect_error("nvfp4:hadamard=yes", "hadamard must be on or off");
  expect_error("fp8-blockwise:high_precision_last=-1", "high_precision_last must be a count");
  expect_error("mxfp8:fp8_scaling=delayed", "scale every block themselves");
  expect_error("mxfp8:low=fp16", "low= applies to the mixed recipes");
}

// Unscaling: a multiplication by the fp32 inverse, a division for keras;
// equal for powers of two, and non-finite results are counted.
TEST(Unscale, MultipliesByTheFp32InverseOrDividesForKeras) {
  std::vector<float> g = {3.0f, -1.5f, 0.0f};
  EXPECT_EQ(mpverify::training::unscale_gradient("torch", 1024.0, g), 0u);
  EXPECT_EQ(g[0], 3.0f / 1024.0f);
  EXPECT_EQ(g[1], -1.5f / 1024.0f);
  // A scale whose inverse is not a float: fl32(5 * fl32(1/3)) = 1.66666675 but
  // fl32(5 / 3) = 1.66666663 (one ulp apart), so the two rules are told apart.
  std::vector<float> a = {5.0f}, b = {5.0f};
  mpverify::training::unscale_gradient("torch", 3.0, a);
  mpverify::training::unscale_gradient("keras", 3.0, b);
  EXPECT_EQ(a[0], 5.0f * static_cast<float>(1.0 / 3.0));
  EXPECT_EQ(b[0], 5.0f / 3.0f);
  EXPECT_NE(a[0], b[0]);
  std::vector<float> bad = {1.0f, std::numeric_limits<float>::infinity(), std::nanf("")};
  EXPECT_EQ(mpverify::training::unscale_gradient("torch", 2.0, bad), 2u);
}

}  // namespace
