// gpu::gemm_mma_chain lays every output element's operands out as the probe kernel's dot products and promotes
// the chains into fp32 on the host. Without a GPU the probe is replaced here by the emulator's scalar
// instruction model (emu::mma_dot, one chain per dot from c = +0), so what is checked is the layout (row-major,
// transposes, zero padding of K, operands swapped where the model lists B's format first) and the promotion:
// the result must equal emu::gemm_emu under the same preset bit for bit, which lays out and promotes with code
// of its own (emu/mma_gemm.cpp and its SIMD kernels). On a GPU, tests/gemm_gpu_test.cpp runs the real probe.
#include <gtest/gtest.h>

#include <bit>
#include <random>
#include <string>
#include <vector>

#include "emu/gemm_emu.h"
#include "emu/mma_presets.h"
#include "emu/quantize.h"
#include "formats/format.h"
#include "gpu/gemm_mma_chain.h"

namespace {

using namespace mpverify;

std::vector<std::uint32_t> chain_on_cpu(const emu::MmaModel& m, std::span<const std::uint32_t> a,
                                        std::span<const std::uint32_t> b, std::span<const std::uint32_t> c, int K) {
  std::vector<std::uint32_t> d(c.size());
  for (std::size_t i = 0; i < c.size(); ++i)
    d[i] = emu::mma_dot(m, a.subspan(i * K, K), b.subspan(i * K, K), c[i]);
  return d;
}

std::vector<float> normal(std::size_t n, std::mt19937_64& rng, const formats::Format& f) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return emu::quantized_copy(v, f);
}

struct Case {
  const char* preset;
  const char* a_format;
  const char* b_format;
  ops::GemmShape shape;
  int promotion;
};

void expect_chain_equals_emulator(const Case& c) {
  const emu::MmaModel model = emu::mma_preset(c.preset);
  emu::GemmPolicy policy;
  policy.input = formats::parse_format(c.a_format);
  policy.input_b = formats::parse_format(c.b_format);
  policy.accumulation = emu::Accumulation::mma;
  policy.mma = model;
  policy.promotion_interval = c.promotion;
  policy.output = model.c;
  std::mt19937_64 rng(7);
  const std::vector<float> a = normal(c.shape.a_size(), rng, policy.input), b = normal(c.shape.b_size(), rng, policy.b_format());
  std::vector<float> emulated(c.shape.c_size()), chained(c.shape.c_size(), -1.0f);
  emu::gemm_emu(c.shape, a, b, emulated, policy);
  gpu::gemm_mma_chain(c.shape, a, b, chained, model, policy.input, policy.b_format(), c.promotion, chain_on_cpu);
  std::size_t differing = 0;
  for (std::size_t i = 0; i < emulated.size(); ++i)
    differing += std::bit_cast<std::uint32_t>(emulated[i]) != std::bit_cast<std::uint32_t>(chained[i]);
  EXPECT_EQ(differing, 0u) << c.preset << " " << c.a_format << " x " << c.b_format << " m=" << c.shape.m
                           << " n=" << c.shape.n << " k=" << c.shape.k << " ta=" << c.shape.transpose_a
                           << " tb=" << c.shape.transpose_b << " promotion=" << c.promotion;
}

TEST(GemmMmaChain, EqualsTheEmulatorBitForBit) {
  const Case cases[] = {
      {"sm80.mma.m16n8k16.f32.f16", "fp16", "fp16", {5, 7, 64, false, false}, 0},
      {"sm80.mma.m16n8k16.f32.f16", "fp16", "fp16", {5, 7, 50, true, false}, 0},   // K padded with zero products
      {"sm90.wgmma.k16.f32.bf16", "bf16", "bf16", {6, 3, 48, false, true}, 0},
      {"sm90.wgmma.k16.f32.bf16", "bf16", "bf16", {4, 4, 40, true, true}, 0},
      {"sm80.mma.m16n8k16.f16.f16", "fp16", "fp16", {3, 5, 96, false, false}, 0},  // fp16 accumulator
      {"sm90.wgmma.k32.f32.e4m3", "fp8-e4m3", "fp8-e4m3", {4, 6, 384, false, false}, 128},
      {"sm90.wgmma.k32.f32.e4m3", "fp8-e4m3", "fp8-e4m3", {4, 6, 300, false, true}, 128},  // a short last run
      // The model multiplies E4M3 by E5M2; A is E5M2 here, so the chain takes A's values as its b operand.
      {"sm90.wgmma.k32.f32.e4m3.e5m2", "fp8-e5m2", "fp8-e4m3", {3, 4, 128, false, false}, 0},
  };
  for (const Case& c : cases) expect_chain_equals_emulator(c);
}

TEST(GemmMmaChain, AChangedLayoutIsSeen) {
  // The check above can fail: a chain that reads B as if it were not transposed differs.
  const emu::MmaModel model = emu::mma_preset("sm80.mma.m16n8k16.f32.f16");
  const ops::GemmShape shape{4, 5, 32, false, true}, wrong{4, 5, 32, false, false};
  std::mt19937_64 rng(3);
  const formats::Format fp16 = formats::parse_format("fp16");
  const std::vector<float> a = normal(shape.a_size(), rng, fp16), b = normal(shape.b_size(), rng, fp16);
  std::vector<float> right(shape.c_size()), wrong_c(shape.c_size());
  gpu::gemm_mma_chain(shape, a, b, right, model, fp16, fp16, 0, chain_on_cpu);
  gpu::gemm_mma_chain(wrong, a, b, wrong_c, model, fp16, fp16, 0, chain_on_cpu);
  EXPECT_NE(right, wrong_c);
}

TEST(GemmMmaChain, RefusesWhatItCannotLayOut) {
  const emu::MmaModel model = emu::mma_preset("sm80.mma.m16n8k16.f32.f16");
  const formats::Format fp16 = formats::parse_format("fp16"), bf16 = formats::parse_format("bf16");
  const ops::GemmShape shape{2, 2, 16};
  std::vector<float> a(32, 1.0f), b(32, 1.0f), c(4);
  EXPECT_THROW(gpu::gemm_mma_chain(shape, a, b, c, model, bf16, fp16, 0, chain_on_cpu), std::invalid_argument);
  EXPECT_THROW(gpu::gemm_mma_chain(shape, a, b, c, model, fp16, fp16, 24, chain_on_cpu), std::invalid_argument);
  a[0] = 1.0f + 0x1p-20f;  // not an fp16 value
  EXPECT_THROW(gpu::gemm_mma_chain(shape, a, b, c, model, fp16, fp16, 0, chain_on_cpu), std::invalid_argument);
}

}  // namespace
