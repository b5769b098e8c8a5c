// The reference tensor-core GEMM (refs/mma_ref.h) against what an H200 computed (the recordings of
// tests/data/mma_recorded_h200: one mma.sync per k, in K order), against cases worked out by hand, and
// against the emulator on adversarial operands. The instruction descriptions here are the test's own, from
// the recordings' names and MMA-Sim's Hopper rule (F = 25, one fused operation; FP8 through fp16), not the
// library's presets.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "emu/gemm_emu.h"
#include "emu/mma_presets.h"
#include "formats/encoding.h"
#include "formats/arithmetic.h"
#include "refs/mma_ref.h"

namespace {

using namespace mpverify;
using formats::Format;
using formats::parse_format;
using Instruction = refs::TensorCoreInstruction;

// The Hopper instruction that a recording's name spells: mma.m16n8kK.OUT.A[.B] (mma.sync) or wgmma.kK.OUT.A[.B]
// (wgmma: F = 13 and E8M13 results for FP8, MMA-Sim's rule, F = 25 otherwise; mma.sync FP8 goes through fp16).
Instruction hopper_instruction(const std::string& name) {
  std::vector<std::string> parts;
  std::stringstream in(name);
  for (std::string p; std::getline(in, p, '.');) parts.push_back(p);
  const bool wgmma = parts[0] == "wgmma";
  const auto format_of = [](const std::string& t) {
    return parse_format(t == "f16" ? "fp16" : t == "e4m3" ? "fp8-e4m3" : t == "e5m2" ? "fp8-e5m2" : t);
  };
  Instruction i;
  i.k = std::stoi(parts[1].substr(parts[1].find('k') + 1));
  i.a = format_of(parts[3]);
  i.b = parts.size() > 4 ? format_of(parts[4]) : i.a;
  i.c = parse_format(parts[2] == "f16" ? "fp16" : "fp32");
  const bool fp8 = i.a.width() == 8;
  i.fraction_bits = wgmma && fp8 ? 13 : 25;
  i.output = parts[2] == "f16"   ? Instruction::Output::fp16_nearest_even
             : wgmma && fp8      ? Instruction::Output::e8m13_toward_zero
                                 : Instruction::Output::fp32_toward_zero;
  i.fp8_through_fp16 = fp8 && !wgmma;
  return i;
}

float value(const Format& f, std::uint32_t bits) { return static_cast<float>(formats::to_double(f, bits)); }

// The result's bits in the accumulator's format (NaNs compared as bits: the GPU's canonical NaN).
std::uint32_t bits_of(const Format& c, float x) {
  if (c.exponent_bits == 8) return std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return 0x7C00u | (std::bit_cast<std::uint32_t>(x) >> 13 & 0x3FFu) | (std::signbit(x) ? 0x8000u : 0u);
  formats::Flags exact;
  return formats::from_double(c, x, {}, exact);
}

TEST(MmaRef, ReproducesEveryRecordedH200Case) {
  const std::filesystem::path dir = std::filesystem::path(MPVERIFY_SOURCE_DIR) / "tests/data/mma_recorded_h200";
  std::size_t files = 0, cases = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (!file.ends_with(".txt.gz")) continue;
    const std::string name = file.substr(0, file.rfind(".k"));  // INSTRUCTION.kK.txt.gz
    const Instruction in = hopper_instruction(name);
    FILE* pipe = popen(("gzip -dc '" + entry.path().string() + "'").c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    char line[16384];
    std::size_t failures = 0;
    while (std::fgets(line, sizeof line, pipe)) {
      std::vector<std::uint32_t> f;
      std::stringstream fields(line);
      for (std::string h; fields >> h;) f.push_back(static_cast<std::uint32_t>(std::stoul(h, nullptr, 16)));
      const std::size_t K = (f.size() - 2) / 2;
      std::vector<float> a(K), b(K);
      for (std::size_t i = 0; i < K; ++i) a[i] = value(in.a, f[i]), b[i] = value(in.b, f[K + i]);
      const float d = refs::dot_mma_ref(a, b, value(in.c, f[2 * K]), in);
      failures += bits_of(in.c, d) != f[2 * K + 1];
      ++cases;
    }
    pclose(pipe);
    EXPECT_EQ(failures, 0u) << file;
    ++files;
  }
  EXPECT_EQ(files, 38u);  // 24 mma.sync, 14 wgmma
  EXPECT_GE(cases, 38u * 500u);
}

// One product of 2^-30 beside c = 1: F = 25 keeps nothing of it (it lies below 2^(0 - 25)), F = 40 keeps
// it, and the fp32 output toward zero then drops it again; c = 1 + 2^-23 with F = 40 and a product of
// -2^-30 gives 1 + 2^-23 - 2^-30, which toward zero is 1.
TEST(MmaRef, TruncationAndTheOutputRoundingByHand) {
  Instruction in = hopper_instruction("mma.m16n8k8.f32.f16");
  const std::vector<float> a{0x1p-15f, 0, 0, 0, 0, 0, 0, 0}, b{0x1p-15f, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(refs::dot_mma_ref(a, b, 1.0f, in), 1.0f);
  in.fraction_bits = 40;
  EXPECT_EQ(refs::dot_mma_ref(a, b, 1.0f, in), 1.0f);
  const std::vector<float> minus{-0x1p-15f, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(refs::dot_mma_ref(minus, b, 1.0f + 0x1p-23f, in), 1.0f);
  in.fraction_bits = 25;  // -2^-30 is shifted out entirely: the sum stays 1 + 2^-23
  EXPECT_EQ(refs::dot_mma_ref(minus, b, 1.0f + 0x1p-23f, in), 1.0f + 0x1p-23f);
  // E8M13: 1 + 2^-20 keeps 13 fraction bits: 1 (2^-20 is bit 20 below the point).
  in.output = Instruction::Output::e8m13_toward_zero;
  EXPECT_EQ(refs::dot_mma_ref(std::vector<float>(8, 0.0f), std::vector<float>(8, 0.0f), 1.0f + 0x1p-20f, in), 1.0f);
}

TEST(MmaRef, SpecialsOverflowAndZeros) {
  const Instruction in = hopper_instruction("mma.m16n8k8.f32.bf16");
  const float inf = INFINITY, big = 0x1p127f;
  std::vector<float> a(8, 0.0f), b(8, 0.0f);
  a[0] = inf;  // inf * 0: NaN, the canonical 0x7FFFFFFF
  EXPECT_EQ(std::bit_cast<std::uint32_t>(refs::dot_mma_ref(a, b, 0.0f, in)), 0x7FFFFFFFu);
  b[0] = -1;  // -inf
  EXPECT_EQ(refs::dot_mma_ref(a, b, 0.0f, in), -inf);
  EXPECT_TRUE(std::isnan(refs::dot_mma_ref(a, b, inf, in)));  // -inf + inf
  a[0] = big, b[0] = 2, a[1] = big, b[1] = 1;  // 2^128 + 2^127 of finite operands: infinite, not clamped
  EXPECT_EQ(refs::dot_mma_ref(a, b, 0.0f, in), inf);
  a[0] = 1, b[0] = 1, a[1] = -1, b[1] = 1;  // an exact zero is +0, whatever the signs
  EXPECT_FALSE(std::signbit(refs::dot_mma_ref(a, b, -0.0f, in)));
}

// Promotion: every 8 elements the chain's result is added into an fp32 accumulator (starting at c) to
// nearest-even. Chains of 1 and then of p = 1.5 * 2^-12 * 2^-12 = 0.75 * 2^-23: in one chain 1 + p is rounded
// toward zero to 1; promoted, 1 + p is rounded to nearest, to 1 + 2^-23.
TEST(MmaRef, PromotionAddsEachChainIntoAnFp32Accumulator) {
  const Instruction in = hopper_instruction("mma.m16n8k8.f32.f16");
  std::vector<float> a(16, 0.0f), b(16, 0.0f);
  a[0] = 1, b[0] = 1;
  a[8] = 1.5f * 0x1p-12f, b[8] = 0x1p-12f;
  EXPECT_EQ(refs::dot_mma_ref(a, b, 0.0f, in), 1.0f);
  EXPECT_EQ(refs::dot_mma_ref(a, b, 0.0f, in, 8), 1.0f + 0x1p-23f);
  EXPECT_EQ(refs::dot_mma_ref(a, b, 0.0f, in, 16), 1.0f);  // one promotion at the end: one chain
}

// Random operands of format f: a quarter any encoding (NaN, infinities and subnormals included), the rest
// values of a narrow exponent range, every other product the negation of the one before (cancellation).
std::vector<std::uint32_t> operands(const Format& f, std::size_t n, std::mt19937_64& rng, bool negate_pairs) {
  std::vector<std::uint32_t> v(n);
  const bool wide = rng() % 4 == 0;
  std::normal_distribution<double> normal(0.0, 4.0);
  formats::Flags ignored;
  for (std::size_t i = 0; i < n; ++i) {
    if (wide) v[i] = static_cast<std::uint32_t>(rng()) & ((f.width() == 32 ? 0u : 1u << f.width()) - 1u);
    else if (negate_pairs && i % 2 == 1) v[i] = v[i - 1] ^ f.sign_mask();
    else v[i] = formats::from_double(f, std::ldexp(normal(rng), static_cast<int>(rng() % 7) - 3), {}, ignored);
  }
  return v;
}

Instruction as_reference(const emu::MmaModel& m) {
  using Output = Instruction::Output;
  return {m.a, m.b, m.c, m.k, m.fraction_bits, m.split_halves, m.fp8_through_fp16,
          m.output == emu::MmaOutput::fp16_nearest_even   ? Output::fp16_nearest_even
          : m.output == emu::MmaOutput::e8m13_toward_zero ? Output::e8m13_toward_zero
                                                          : Output::fp32_toward_zero};
}

// Every preset: the emulator's integer implementation and this reference agree bit for bit on chains of two
// instructions (with and without promotion where the output is fp32), on 400 adversarial cases each.
TEST(MmaRef, AgreesWithTheEmulatorOnEveryPreset) {
  std::mt19937_64 rng(20261126);
  std::size_t checked = 0;
  for (const emu::MmaModel& m : emu::mma_presets()) {
    const Instruction in = as_reference(m);
    const bool fp32_out = m.c.exponent_bits == 8;
    std::size_t failures = 0;
    for (int t = 0; t < 400; ++t) {
      const std::size_t K = 2 * static_cast<std::size_t>(m.k);
      const auto a = operands(m.a, K, rng, t % 2 == 0), b = operands(m.b, K, rng, false);
      const std::uint32_t c = operands(m.c, 1, rng, false)[0];
      const int promotion = fp32_out && t % 3 == 0 ? m.k : 0;
      const std::uint32_t expected = emu::mma_dot(m, a, b, c, promotion);
      std::vector<float> av(K), bv(K);
      for (std::size_t i = 0; i < K; ++i) av[i] = value(m.a, a[i]), bv[i] = value(m.b, b[i]);
      const std::uint32_t got = bits_of(m.c, refs::dot_mma_ref(av, bv, value(m.c, c), in, promotion));
      if (got != expected && failures++ < 3)
        ADD_FAILURE() << m.name << " case " << t << ": emulator " << std::hex << expected << ", reference " << got;
      ++checked;
    }
    EXPECT_EQ(failures, 0u) << m.name;
  }
  EXPECT_GE(checked, 80u * 400u);
}

}  // namespace
