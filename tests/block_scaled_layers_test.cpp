// The layers under the block-scaled recipes (nn/block_scaled_matmul.h, nn/conv_lowering.h): each of a layer's
// three GEMMs must hand emu::block_scaled_gemm the operands, schemes, axes and rounding keys of the recipe
// table (training/recipe.h), written out again here from that table; the convolution's lowering is held to
// a direct transcription of the convolution's definition (ops/conv2d_shape.h) in exact arithmetic; the
// high-precision layers must keep the plain matrix ops.
//
// What the block-scaled GEMM computes is tested elsewhere (block_scaled_gemm_test against an independent
// reference); here the question is only whether the layer asks it the right question, so each expectation
// is the GEMM called directly with the operands this file builds itself, and equality is bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "emu/block_scaled_gemm.h"
#include "emu/block_stats.h"
#include "emu/hadamard.h"
#include "emu/quantize.h"
#include "emu/rounding_key.h"
#include "nn/conv2d_layer.h"
#include "nn/conv_lowering.h"
#include "nn/emu_backend.h"
#include "nn/linear.h"
#include "training/recipe.h"

namespace {

using namespace mpverify;
using nn::Tensor;

std::vector<float> random_values(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// x rounded to bf16, as the recipes store activations and gradients.
std::vector<float> bf16(std::vector<float> x) {
  emu::quantize(x, x, emu::QuantizeSpec{formats::parse_format("bf16")});
  return x;
}

void expect_bits_equal(std::span<const float> want, std::span<const float> got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < want.size(); ++i) differ += std::memcmp(&want[i], &got[i], sizeof(float)) != 0;
  EXPECT_EQ(differ, 0u) << what << ": " << differ << " of " << want.size() << " elements differ";
}

// The layer's stored output: the GEMM's fp32 result plus the bias in fp32, rounded to bf16.
std::vector<float> with_bias_bf16(std::vector<float> y, std::span<const float> bias, int channels, int inner) {
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += bias[(i / static_cast<std::size_t>(inner)) % channels];
  return bf16(std::move(y));
}

struct RecipeRun {
  training::Recipe recipe;
  nn::EmuBackend backend;
  nn::Context ctx;
  explicit RecipeRun(const std::string& text, std::uint64_t seed = 7, std::uint64_t step = 3)
      : recipe(training::parse_recipe(text)), ctx(backend, recipe.precision) {
    recipe.precision.block_scaling->high_precision_layers.clear();
    ctx.set_rounding_seed(seed);
    ctx.set_step(step);
  }
  emu::BlockScaledGemmPolicy policy(const char* a, const char* b) const {
    emu::BlockScaledGemmPolicy p;
    p.accumulation = recipe.precision.block_scaling->accumulation;
    p.scheme_a = *emu::find_block_scheme(a);
    p.scheme_b = *emu::find_block_scheme(b);
    return p;
  }
};

void cast(nn::Layer& layer, const nn::Precision& p) {
  for (nn::Parameter* q : layer.parameters()) nn::cast_weights(*q, p);
}

// The table of training/recipe.h: mxfp8 quantizes every operand as mxfp8-e4m3 with the sm100 mxf8f6f4 model.
TEST(BlockScaledLinear, Mxfp8RunsItsThreeGemmsOnTheTablesSchemes) {
  RecipeRun run("mxfp8");
  nn::Linear fc("fc", 96, 40, 11, 0);
  cast(fc, run.recipe.precision);
  const std::vector<float>& w = fc.parameters()[0]->value;
  const std::vector<float>& b = fc.parameters()[1]->value;
  Tensor x(8, 96);
  x.values = bf16(random_values(x.size(), 1));
  const Tensor y = fc.forward(run.ctx, x);

  std::vector<float> want(8 * 40);
  emu::block_scaled_gemm({8, 40, 96, false, true}, x.values, w, want, run.policy("mxfp8-e4m3", "mxfp8-e4m3"));
  expect_bits_equal(with_bias_bf16(want, b, 40, 1), y.values, "fprop");

  Tensor dy(8, 40);
  dy.values = bf16(random_values(dy.size(), 2, 1e-3f));
  const Tensor dx = fc.backward(run.ctx, dy, true);
  std::vector<float> want_dx(8 * 96), want_dw(40 * 96);
  emu::block_scaled_gemm({8, 96, 40}, dy.values, w, want_dx, run.policy("mxfp8-e4m3", "mxfp8-e4m3"));
  emu::block_scaled_gemm({40, 96, 8, true, false}, dy.values, x.values, want_dw,
                         run.policy("mxfp8-e4m3", "mxfp8-e4m3"));
  expect_bits_equal(bf16(want_dx), dx.values, "dgrad");
  expect_bits_equal(want_dw, fc.parameters()[0]->grad, "wgrad (fp32 weight gradients)");
}

TEST(BlockScaledLinear, Mxfp8ScaleRuleKeyReachesTheQuantization) {
  RecipeRun floor_run("mxfp8:scale_rule=floor");
  nn::Linear fc("fc", 64, 16, 5, 0);
  cast(fc, floor_run.recipe.precision);
  Tensor x(4, 64);
  // Significands above 1.75 in every block: floor clips where rceil does not, so the two rules differ.
  x.values = bf16(random_values(x.size(), 3));
  for (float& v : x.values) v = std::copysign(1.9375f, v) * std::ldexp(1.0f, static_cast<int>(std::fabs(v) * 4));
  const Tensor y = fc.forward(floor_run.ctx, x);
  auto p = floor_run.policy("mxfp8-e4m3", "mxfp8-e4m3");
  p.quantize_a.scale_rule = p.quantize_b.scale_rule = emu::ScaleRule::floor;
  std::vector<float> want(4 * 16), rceil(4 * 16);
  emu::block_scaled_gemm({4, 16, 64, false, true}, x.values, fc.parameters()[0]->value, want, p);
  expect_bits_equal(with_bias_bf16(want, fc.parameters()[1]->value, 16, 1), y.values, "floor scales");
  emu::block_scaled_gemm({4, 16, 64, false, true}, x.values, fc.parameters()[0]->value, rceil,
                         floor_run.policy("mxfp8-e4m3", "mxfp8-e4m3"));
  EXPECT_NE(with_bias_bf16(rceil, fc.parameters()[1]->value, 16, 1), y.values) << "the check cannot tell the rules";
}

// nvfp4: 16 x 16 weight tiles, stochastic dy keyed by (seed, "LAYER.dgrad.dy" / "LAYER.wgrad.dy", step), and
// wgrad's operands through the random Hadamard transform along the batch.
TEST(BlockScaledLinear, Nvfp4TilesWeightsRoundsDyStochasticallyAndTransformsWgrad) {
  const std::uint64_t seed = 99, step = 5;
  RecipeRun run("nvfp4", seed, step);
  nn::Linear fc("fc", 64, 32, 13, 0);
  cast(fc, run.recipe.precision);
  const std::vector<float>& w = fc.parameters()[0]->value;
  Tensor x(32, 64), dy(32, 32);
  x.values = bf16(random_values(x.size(), 4));
  dy.values = bf16(random_values(dy.size(), 5, 1e-2f));
  const Tensor y = fc.forward(run.ctx, x);
  const Tensor dx = fc.backward(run.ctx, dy, true);

  emu::BlockScheme tile = *emu::find_block_scheme("nvfp4");
  tile.block_rows = 16;
  auto fprop = run.policy("nvfp4", "nvfp4");
  fprop.scheme_b = tile;
  std::vector<float> want_y(32 * 32);
  emu::block_scaled_gemm({32, 32, 64, false, true}, x.values, w, want_y, fprop);
  expect_bits_equal(with_bias_bf16(want_y, fc.parameters()[1]->value, 32, 1), y.values, "fprop");

  auto stochastic = [&](emu::BlockScaledGemmPolicy p, const char* name) {
    const emu::RoundingKey key = emu::rounding_key(seed, name, step);
    p.quantize_a.rounding = formats::Rounding::stochastic;
    p.quantize_a.seed = key.seed;
    p.quantize_a.stream = key.stream;
    return p;
  };
  auto dgrad = stochastic(run.policy("nvfp4", "nvfp4"), "fc.dgrad.dy");
  dgrad.scheme_b = tile;
  std::vector<float> want_dx(32 * 64);
  emu::block_scaled_gemm({32, 64, 32}, dy.values, w, want_dx, dgrad);
  expect_bits_equal(bf16(want_dx), dx.values, "dgrad");

  std::vector<float> hdy = dy.values, hx = x.values, want_dw(32 * 64);
  emu::random_hadamard_transform(hdy, 32, 32, emu::RhtAxis::within_columns);
  emu::random_hadamard_transform(hx, 32, 64, emu::RhtAxis::within_columns);
  emu::block_scaled_gemm({32, 64, 32, true, false}, hdy, hx, want_dw,
                         stochastic(run.policy("nvfp4", "nvfp4"), "fc.wgrad.dy"));
  expect_bits_equal(want_dw, fc.parameters()[0]->grad, "wgrad");
}

TEST(BlockScaledLinear, Fp8BlockwiseUsesDeepSeekTilesAndBlocks) {
  RecipeRun run("fp8-blockwise");
  nn::Linear fc("fc", 256, 130, 17, 0);
  cast(fc, run.recipe.precision);
  Tensor x(6, 256), dy(6, 130);
  x.values = bf16(random_values(x.size(), 6));
  dy.values = bf16(random_values(dy.size(), 7, 1e-3f));
  const Tensor y = fc.forward(run.ctx, x);
  const Tensor dx = fc.backward(run.ctx, dy, true);
  std::vector<float> want_y(6 * 130), want_dx(6 * 256), want_dw(130 * 256);
  const std::vector<float>& w = fc.parameters()[0]->value;
  emu::block_scaled_gemm({6, 130, 256, false, true}, x.values, w, want_y,
                         run.policy("fp8-tile1x128", "fp8-block128x128"));
  emu::block_scaled_gemm({6, 256, 130}, dy.values, w, want_dx, run.policy("fp8-tile1x128", "fp8-block128x128"));
  emu::block_scaled_gemm({130, 256, 6, true, false}, dy.values, x.values, want_dw,
                         run.policy("fp8-tile1x128", "fp8-tile1x128"));
  expect_bits_equal(with_bias_bf16(want_y, fc.parameters()[1]->value, 130, 1), y.values, "fprop");
  expect_bits_equal(bf16(want_dx), dx.values, "dgrad");
  expect_bits_equal(want_dw, fc.parameters()[0]->grad, "wgrad");
}

// A high-precision layer runs the recipe's plain bf16 matrix ops: the same layer under bf16-o1 (whose matrix
// ops and storage are the same bf16 ones) gives the same bits.
TEST(BlockScaledLinear, HighPrecisionLayerKeepsThePlainBf16MatrixOps) {
  RecipeRun run("mxfp8");
  run.recipe.precision.block_scaling->high_precision_layers = {"head"};
  training::Recipe plain = training::parse_recipe("bf16-o1");
  nn::EmuBackend backend;
  nn::Context plain_ctx(backend, plain.precision);
  nn::Linear head("head", 48, 10, 3, 0), twin("head", 48, 10, 3, 0);
  cast(head, run.recipe.precision);
  cast(twin, plain.precision);
  Tensor x(4, 48);
  x.values = bf16(random_values(x.size(), 8));
  const Tensor y = head.forward(run.ctx, x), want = twin.forward(plain_ctx, x);
  expect_bits_equal(want.values, y.values, "head");
  emu::CounterSet counters;
  run.ctx.set_counters(&counters);
  head.forward(run.ctx, x);
  EXPECT_EQ(counters.find("block-gemm.accumulate"), nullptr);
  EXPECT_NE(counters.find("gemm.a"), nullptr);
}

// ---- what the recorders see ----

struct QuantizationLog final : nn::StoreObserver {
  struct Entry {
    std::string layer, operand, scheme;
    emu::BlockCounters counters;
    emu::BlockStats stats;
  };
  void on_store(std::string_view, std::string_view, nn::Role, nn::Pass, std::span<const float>,
                std::span<const float>, const formats::Format&) override {}
  void on_block_quantized(std::string_view layer, std::string_view operand, nn::Pass,
                          const emu::BlockScheme& scheme, const emu::BlockCounters& counters,
                          const emu::BlockStats& stats) override {
    entries.push_back({std::string(layer), std::string(operand), scheme.name, counters, stats});
  }
  std::vector<Entry> entries;
};

// Each GEMM reports both operands, named, with the counts of quantizing exactly that operand along that K
// (block_quantize called here) and statistics recomputed here another way: the SQNR by emu::sqnr_db over the
// dequantized values, the scale exponents by frexp, the non-zero inputs by counting.
TEST(BlockScaledRecorders, EachOperandsQuantizationIsReportedWithItsStatistics) {
  RecipeRun run("nvfp4");
  run.recipe.precision.block_scaling->wgrad_hadamard = false;
  QuantizationLog log;
  run.ctx.set_observer(&log);
  nn::Linear fc("fc", 64, 32, 13, 0);
  cast(fc, run.recipe.precision);
  Tensor x(16, 64), dy(16, 32);
  x.values = bf16(random_values(x.size(), 4));
  dy.values = bf16(random_values(dy.size(), 5, 1e-2f));
  for (std::size_t i = 0; i < 64; ++i) x.values[i] = 0;  // a row of zeros: its NVFP4 block scales are 0
  x.values[70] = 3000.0f;  // an outlier raises the tensor scale: the other blocks' scales sit far below
  fc.forward(run.ctx, x);
  fc.backward(run.ctx, dy, true);
  ASSERT_EQ(log.entries.size(), 6u);
  const char* operands[] = {"fprop.x", "fprop.w", "dgrad.dy", "dgrad.w", "wgrad.dy", "wgrad.x"};
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(log.entries[i].layer, "fc");
    EXPECT_EQ(log.entries[i].operand, operands[i]);
  }
  const QuantizationLog::Entry& e = log.entries[0];
  EXPECT_EQ(e.scheme, "nvfp4");
  const std::array<std::size_t, 2> shape{16, 64};
  const emu::BlockQuantized q = emu::block_quantize(x.values, shape, 1, *emu::find_block_scheme("nvfp4"));
  EXPECT_EQ(e.counters, q.counters);
  std::uint64_t nonzero = 0;
  for (float v : x.values) nonzero += v != 0;
  EXPECT_EQ(e.stats.nonzero_in, nonzero);
  EXPECT_DOUBLE_EQ(e.stats.sqnr_db(), emu::sqnr_db(x.values, q.values));
  std::map<int, std::uint64_t> exponents;
  std::uint64_t zero_scales = 0;
  for (float s : q.scales) {
    int exponent = 0;
    if (s == 0) ++zero_scales;
    else (void)std::frexp(s, &exponent), ++exponents[exponent - 1];
  }
  EXPECT_EQ(e.stats.scale_exponents, exponents);
  EXPECT_EQ(e.stats.zero_scales, zero_scales);
  EXPECT_GT(exponents.size(), 1u) << "the blocks should sit at several scales";
  EXPECT_GE(zero_scales, 4u) << "the zero row's four blocks";
}

// ---- the convolution's lowering ----

ops::Conv2dShape conv_shape() { return ops::Conv2dShape{2, 3, 6, 5, 4, 3, 3, 1, 1}; }

// The convolution's definition (ops/conv2d_shape.h) in double: y[n,k,p,q] = sum_{c,r,s} x[...] w[k,c,r,s].
std::vector<double> direct_conv(const ops::Conv2dShape& s, std::span<const float> x, std::span<const float> w) {
  std::vector<double> y(s.y_size(), 0.0);
  for (int n = 0; n < s.n; ++n)
    for (int k = 0; k < s.k; ++k)
      for (int p = 0; p < s.p(); ++p)
        for (int q = 0; q < s.q(); ++q)
          for (int c = 0; c < s.c; ++c)
            for (int r = 0; r < s.r; ++r)
              for (int t = 0; t < s.s; ++t) {
                const int ih = p * s.stride - s.pad + r, iw = q * s.stride - s.pad + t;
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                y[((static_cast<std::size_t>(n) * s.k + k) * s.p() + p) * s.q() + q] +=
                    static_cast<double>(x[((static_cast<std::size_t>(n) * s.c + c) * s.h + ih) * s.w + iw]) *
                    w[((static_cast<std::size_t>(k) * s.c + c) * s.r + r) * s.s + t];
              }
  return y;
}

// Small integers: every product and sum below is exact in double and in float.
std::vector<float> small_integers(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(-8, 8);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(d(gen));
  return v;
}

TEST(ConvLowering, PatchesTimesFiltersIsTheConvolution) {
  const ops::Conv2dShape s = conv_shape();
  const auto x = small_integers(s.x_size(), 1), w = small_integers(s.weight_size(), 2);
  const std::vector<float> patches = nn::im2col_rows(s, x);
  const int positions = s.n * s.p() * s.q(), crs = s.c * s.r * s.s;
  ASSERT_EQ(patches.size(), static_cast<std::size_t>(positions) * crs);
  std::vector<float> rows(static_cast<std::size_t>(positions) * s.k, 0.0f), y(s.y_size());
  for (int i = 0; i < positions; ++i)
    for (int k = 0; k < s.k; ++k)
      for (int j = 0; j < crs; ++j)
        rows[static_cast<std::size_t>(i) * s.k + k] += patches[static_cast<std::size_t>(i) * crs + j] *
                                                       w[static_cast<std::size_t>(k) * crs + j];
  nn::positions_to_nchw(s, rows, y);
  const std::vector<double> want = direct_conv(s, x, w);
  for (std::size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], want[i]) << i;
  EXPECT_EQ(nn::nchw_to_positions(s, y), rows);
}

// col2im is im2col's adjoint: <im2col(x), P> = <x, col2im(P)> for every x and P (exact on small integers).
TEST(ConvLowering, Col2imIsTheAdjointOfIm2col) {
  const ops::Conv2dShape s = conv_shape();
  const auto x = small_integers(s.x_size(), 3);
  const std::vector<float> patches = nn::im2col_rows(s, x);
  const auto p = small_integers(patches.size(), 4);
  std::vector<float> back(s.x_size());
  nn::col2im_rows(s, p, back);
  double left = 0, right = 0;
  for (std::size_t i = 0; i < p.size(); ++i) left += static_cast<double>(patches[i]) * p[i];
  for (std::size_t i = 0; i < x.size(); ++i) right += static_cast<double>(x[i]) * back[i];
  EXPECT_EQ(left, right);
  EXPECT_NE(left, 0.0);
}

// The block-scaled Conv2d: its three GEMMs on the patches, as nn/conv_lowering.h writes them.
TEST(BlockScaledConv2d, RunsTheLinearLayersGemmsOnItsPatches) {
  RecipeRun run("mxfp8");
  const ops::Conv2dShape s = conv_shape();
  nn::Conv2d conv("conv", s.c, s.k, 3, 1, 1, 21, 0);
  cast(conv, run.recipe.precision);
  const std::vector<float>& w = conv.parameters()[0]->value;
  Tensor x(s.n, s.c, s.h, s.w), dy(s.n, s.k, s.p(), s.q());
  x.values = bf16(random_values(x.size(), 9));
  dy.values = bf16(random_values(dy.size(), 10, 1e-2f));
  const Tensor y = conv.forward(run.ctx, x);
  const Tensor dx = conv.backward(run.ctx, dy, true);

  const int positions = s.n * s.p() * s.q(), crs = s.c * s.r * s.s;
  const std::vector<float> patches = nn::im2col_rows(s, x.values), dy_rows = nn::nchw_to_positions(s, dy.values);
  const auto policy = run.policy("mxfp8-e4m3", "mxfp8-e4m3");
  std::vector<float> rows(static_cast<std::size_t>(positions) * s.k), want_y(s.y_size());
  emu::block_scaled_gemm({positions, s.k, crs, false, true}, patches, w, rows, policy);
  nn::positions_to_nchw(s, rows, want_y);
  expect_bits_equal(with_bias_bf16(want_y, conv.parameters()[1]->value, s.k, s.p() * s.q()), y.values, "fprop");

  std::vector<float> dpatches(static_cast<std::size_t>(positions) * crs), want_dx(s.x_size()), want_dw(w.size());
  emu::block_scaled_gemm({positions, crs, s.k}, dy_rows, w, dpatches, policy);
  nn::col2im_rows(s, dpatches, want_dx);
  expect_bits_equal(bf16(want_dx), dx.values, "dgrad");
  emu::block_scaled_gemm({s.k, crs, positions, true, false}, dy_rows, patches, want_dw, policy);
  expect_bits_equal(want_dw, conv.parameters()[0]->grad, "wgrad");
}

}  // namespace
