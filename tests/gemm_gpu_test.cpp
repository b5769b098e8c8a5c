// The GPU GEMM (cuBLAS) against the reference and the emulator. Skipped with
// the reason where there is no device; never passes silently.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "compare/compare.h"
#include "emu/gemm_emu.h"
#include "emu/quantize.h"
#include "gpu/device.h"
#include "gpu/gemm_fp8_gpu.h"
#include "gpu/gemm_gpu.h"
#include "gpu/gemm_mma_chain.h"
#include "gpu/mma_probe.h"
#include "emu/mma_presets.h"
#include "refs/gemm_ref.h"

namespace {

using namespace mpverify;
using gpu::GemmCompute;
using ops::GemmShape;

#define SKIP_WITHOUT_GPU()                                                        \
  do {                                                                            \
    if (const std::string reason = gpu::gpu_unavailable_reason(); !reason.empty()) \
      GTEST_SKIP() << reason;                                                     \
  } while (0)

TEST(GemmGpu, IntegerInputsAreBitExactInEveryCompute) {
  SKIP_WITHOUT_GPU();
  // Integers in [-8, 8], k = 32: every product and partial sum is an integer
  // of magnitude <= 2048, exact in fp16, bf16 inputs, tf32 and fp32.
  const GemmShape s{48, 40, 32};
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(-8, 8);
  std::vector<float> a(s.a_size()), b(s.b_size()), ref(s.c_size()), c(s.c_size());
  for (auto& x : a) x = static_cast<float>(small(rng));
  for (auto& x : b) x = static_cast<float>(small(rng));
  refs::gemm_ref(s, a, b, ref);
  int computes = 0;
  for (auto compute : {GemmCompute::fp32_pedantic, GemmCompute::tf32, GemmCompute::fp16_fp32_accumulate,
                       GemmCompute::fp16_fp16_accumulate, GemmCompute::bf16_fp32_accumulate}) {
    gpu::gemm_gpu(s, a, b, c, compute);
    const auto cmp = compare::compare(ref, c, formats::parse_format("fp32"),
                                      compare::Tolerance::bit_exact("integer inputs: all arithmetic exact"));
    EXPECT_TRUE(cmp.passed) << gpu::to_string(compute) << ": " << cmp.failure;
    ++computes;
  }
  EXPECT_EQ(computes, 5);
}

// cuBLASLt's FP8 GEMM, laid out as it requires (both operands K-major): integers in [-8, 8] are E4M3 and
// E5M2 values, and with k = 32 every product and partial sum (|.| <= 2048) is exact even with 13 fraction
// bits kept, so any accumulation gives the exact product; a layout mistake cannot.
TEST(GemmFp8Gpu, IntegerInputsAreExactInEveryPairingAndMode) {
  SKIP_WITHOUT_GPU();
  const GemmShape s{48, 32, 32};
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-8, 8);
  std::vector<float> a(s.a_size()), b(s.b_size()), ref(s.c_size()), c(s.c_size());
  for (auto& x : a) x = static_cast<float>(small(rng));
  for (auto& x : b) x = static_cast<float>(small(rng));
  refs::gemm_ref(s, a, b, ref);
  const formats::Format e4m3 = formats::parse_format("fp8-e4m3"), e5m2 = formats::parse_format("fp8-e5m2");
  for (const auto& [fa, fb] : {std::pair{e4m3, e4m3}, std::pair{e4m3, e5m2}, std::pair{e5m2, e4m3}})
    for (const bool fast : {true, false}) {
      gpu::gemm_fp8_gpu(s, a, fa, b, fb, c, fast);
      const auto cmp = compare::compare(ref, c, formats::parse_format("fp32"),
                                        compare::Tolerance::bit_exact("integer inputs: all arithmetic exact"));
      EXPECT_TRUE(cmp.passed) << fa.name << " x " << fb.name << (fast ? " fast" : "") << ": " << cmp.failure;
    }
}

// The shapes and formats cuBLASLt's FP8 GEMM cannot take are refused before any device is needed.
TEST(GemmFp8Gpu, RefusesWhatCublasLtCannotRun) {
  const formats::Format e4m3 = formats::parse_format("fp8-e4m3"), fp16 = formats::parse_format("fp16");
  EXPECT_THROW(gpu::check_fp8_gemm(GemmShape{16, 16, 24}, e4m3, e4m3), std::invalid_argument);
  EXPECT_THROW(gpu::check_fp8_gemm(GemmShape{16, 16, 32, true, false}, e4m3, e4m3), std::invalid_argument);
  EXPECT_THROW(gpu::check_fp8_gemm(GemmShape{16, 16, 32}, fp16, e4m3), std::invalid_argument);
  EXPECT_THROW(gpu::check_fp8_gemm(GemmShape{16, 16, 32}, e4m3, formats::parse_format("e4m3")), std::invalid_argument);
  EXPECT_NO_THROW(gpu::check_fp8_gemm(GemmShape{16, 16, 32}, e4m3, formats::parse_format("fp8-e5m2")));
  EXPECT_NO_THROW(gpu::check_fp8_gemm(GemmShape{16, 16, 32}, formats::parse_format("fp8-e5m2"), e4m3));
  // cuBLASLt has no E5M2 x E5M2 kernel: refused by name, before any device is needed.
  const formats::Format e5m2 = formats::parse_format("fp8-e5m2");
  try {
    gpu::check_fp8_gemm(GemmShape{16, 16, 32}, e5m2, e5m2);
    ADD_FAILURE() << "fp8-e5m2 x fp8-e5m2 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fp8-e5m2 x fp8-e5m2"), std::string::npos) << e.what();
  }
}

TEST(GemmGpu, TransposesMatchTheReference) {
  SKIP_WITHOUT_GPU();
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const GemmShape s{7, 5, 3, ta, tb};
      std::vector<float> a(s.a_size()), b(s.b_size()), ref(s.c_size()), c(s.c_size());
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3;
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) - 2;
      refs::gemm_ref(s, a, b, ref);
      gpu::gemm_gpu(s, a, b, c, GemmCompute::fp32_pedantic);
      EXPECT_EQ(c, ref) << "transpose_a " << ta << " transpose_b " << tb;
    }
}

// Random fp16 inputs: the emulator's plain fp32-accumulation model and its
// tensor-core model against cuBLAS with tensor cores. Both must lie within the
// gamma_k bound of the FP64 result; the bit-identical fractions are recorded
// (as test properties in the XML output) for the report.
TEST(GemmGpu, EmulatorAgainstCublasFp16) {
  SKIP_WITHOUT_GPU();
  const GemmShape s{256, 256, 256};
  std::mt19937_64 rng(17);
  std::normal_distribution<double> normal;
  std::vector<float> a(s.a_size()), b(s.b_size());
  for (auto& x : a) x = static_cast<float>(normal(rng));
  for (auto& x : b) x = static_cast<float>(normal(rng));
  const auto fp16 = formats::parse_format("fp16"), fp32 = formats::parse_format("fp32");
  emu::quantize(a, a, emu::QuantizeSpec{fp16});
  emu::quantize(b, b, emu::QuantizeSpec{fp16});
  std::vector<float> hw(s.c_size()), plain(s.c_size()), tc(s.c_size());
  gpu::gemm_gpu(s, a, b, hw, GemmCompute::fp16_fp32_accumulate);
  emu::GemmPolicy policy;
  emu::gemm_emu(s, a, b, plain, policy);
  policy.accumulation = emu::Accumulation::tensor_core;
  policy.tensor_core = {8, 3, formats::Rounding::toward_zero};  // A100/H100-like block of 8 fp16 products
  emu::gemm_emu(s, a, b, tc, policy);
  // Bound against FP64: per block, the truncation to fp32 loses < 2^-23 of
  // the block sum and the alignment drops < 2^-(23+extra) of the largest term
  // from each of the block+1 terms (9 * 2^-26 < 2^-22 for 8 and 3), so every
  // block is within 2^-21 of the sum of its terms' magnitudes; summed over at
  // most k blocks this is gamma_k(2^-21) || |A||B| ||_F / ||C||_F normwise.
  // The plain fp32 model (u = 2^-24) is well inside it.
  std::vector<double> c64(s.c_size());
  refs::gemm_ref_fp64(s, a, b, c64);
  const auto bound = compare::Tolerance::normwise(compare::gamma(s.k, 0x1p-21) * refs::gemm_condition(s, a, b),
                                                  "gamma_k(2^-21) || |A||B| ||_F / ||C||_F (tensor-core model)");
  for (const auto* side : {&hw, &plain, &tc}) {
    const auto cmp = compare::compare(std::span<const double>(c64), *side, fp32, bound);
    EXPECT_TRUE(cmp.passed) << cmp.failure;
  }
  const auto exact = compare::Tolerance::bit_exact("emulator against hardware");
  const auto plain_vs_hw = compare::compare(plain, hw, fp32, exact);
  const auto tc_vs_hw = compare::compare(tc, hw, fp32, exact);
  RecordProperty("device", gpu::describe_device().name);
  RecordProperty("bit_identical_plain_fp32_accumulation", std::to_string(plain_vs_hw.bit_identical_fraction));
  RecordProperty("bit_identical_tensor_core_model", std::to_string(tc_vs_hw.bit_identical_fraction));
  std::printf("bit-identical vs cuBLAS fp16/fp32acc: plain %.4f, tensor-core model %.4f\n",
              plain_vs_hw.bit_identical_fraction, tc_vs_hw.bit_identical_fraction);
}

}  // namespace

namespace {

// The presets of the device's own architecture that the chained GEMM is held to bit for bit (with the
// promotion interval each is used with), or none.
std::vector<std::pair<const char*, int>> presets_of_this_device() {
  switch (gpu::describe_device().compute_capability) {
    case 80: return {{"sm80.mma.m16n8k16.f32.f16", 0}, {"sm80.mma.m16n8k16.f32.bf16", 0}};
    case 89: return {{"sm89.mma.m16n8k16.f32.f16", 0}, {"sm89.mma.m16n8k32.f32.e4m3", 128}};
    case 90: return {{"sm90.wgmma.k16.f32.f16", 0}, {"sm90.wgmma.k16.f32.bf16", 0}, {"sm90.wgmma.k32.f32.e4m3", 128}};
    default: return {};
  }
}

TEST(GemmGpu, ChainedInstructionEqualsTheEmulatorOnItsArchitecture) {
  SKIP_WITHOUT_GPU();
  const auto presets = presets_of_this_device();
  if (presets.empty()) GTEST_SKIP() << "no preset of this device's architecture is held to the hardware here";
  const GemmShape s{32, 24, 256, false, true};
  std::string not_run;  // the presets whose instruction this device or build cannot run, and why
  for (const auto& [name, promotion] : presets) {
    const emu::MmaModel& m = emu::mma_preset(name);
    if (const std::string why = gpu::mma_probe_device_reason(m); !why.empty()) {
      not_run.append("\n  ").append(name).append(": ").append(why);
      continue;
    }
    emu::GemmPolicy policy;
    policy.input = m.a;
    policy.input_b = m.b;
    policy.accumulation = emu::Accumulation::mma;
    policy.mma = m;
    policy.promotion_interval = promotion;
    policy.output = formats::parse_format("fp32");
    std::mt19937_64 rng(11);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> a(s.a_size()), b(s.b_size()), emulated(s.c_size()), chained(s.c_size());
    for (auto& x : a) x = dist(rng);
    for (auto& x : b) x = dist(rng);
    a = emu::quantized_copy(a, m.a);
    b = emu::quantized_copy(b, m.b);
    emu::gemm_emu(s, a, b, emulated, policy);
    gpu::gemm_mma_chain(s, a, b, chained, m, m.a, m.b, promotion);
    const auto cmp = compare::compare(emulated, chained, policy.output,
                                      compare::Tolerance::bit_exact("the model of this architecture's instruction"));
    EXPECT_TRUE(cmp.passed) << name << ": " << cmp.failure;
  }
  // After the checks, so a failure above still fails: a partial run says what it left out.
  if (!not_run.empty()) GTEST_SKIP() << "not run here:" << not_run;
}

}  // namespace
