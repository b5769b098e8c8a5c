// The block-scaled GEMM (emu/block_scaled_gemm.h) against the reference written apart from it
// (refs/block_scaled_ref.h), bit for bit, on random GEMMs of every model and on crafted instructions (E8M0
// scales at 2^-127 and 2^127, saturated elements, zero blocks, NaN and infinity, K not a multiple of the
// block); cases worked by hand; the padding rule; and that the comparison fails for a model that is off by
// one fraction bit, applies the scales after the fused sum instead of inside it, or promotes with two
// roundings instead of DeepGEMM's fused multiply-add.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "emu/block_scaled_gemm.h"
#include "emu/mma_block_scaled.h"
#include "emu/mma_presets.h"
#include "emu/mma_terms.h"
#include "formats/encoding.h"
#include "refs/block_scaled_ref.h"

namespace {

using namespace mpverify;
using emu::BlockScaledAccumulation;
using emu::ScaledOperand;
using formats::parse_format;
using RefOperand = refs::BlockScaledOperandRef;

const emu::BlockScheme& scheme(const char* name) { return *emu::find_block_scheme(name); }

RefOperand::Scale ref_scale(const emu::BlockScheme& s) {
  return s.scale_format == emu::ScaleFormat::e8m0         ? RefOperand::Scale::e8m0
         : s.scale_format == emu::ScaleFormat::ue4m3_fp32 ? RefOperand::Scale::ue4m3
                                                          : RefOperand::Scale::fp32;
}

refs::BlockScaledRule ref_rule(BlockScaledAccumulation a) {
  return a == BlockScaledAccumulation::sm100_mxf8f6f4   ? refs::BlockScaledRule::mxf8f6f4
         : a == BlockScaledAccumulation::sm100_mxf4nvf4 ? refs::BlockScaledRule::mxf4nvf4
                                                        : refs::BlockScaledRule::hopper_fp8_blockwise;
}

// The reference's view of a laid-out operand: element values decoded from the codes.
struct RefView {
  std::vector<float> values;
  RefOperand op;
  RefView(const ScaledOperand& x, RefOperand::Scale s) {
    for (std::uint32_t c : x.codes) values.push_back(static_cast<float>(formats::to_double(x.element, c)));
    op = {x.element, s, x.rows, x.k, x.block, values, x.scales};
  }
};

std::vector<float> reference(const ScaledOperand& a, const ScaledOperand& b, RefOperand::Scale sa,
                             RefOperand::Scale sb, BlockScaledAccumulation model, float alpha) {
  const RefView ra(a, sa), rb(b, sb);
  std::vector<float> c(a.rows * b.rows);
  refs::block_scaled_gemm_ref(ra.op, rb.op, ref_rule(model), alpha, c);
  return c;
}

std::vector<float> emulate(const ScaledOperand& a, const ScaledOperand& b, BlockScaledAccumulation model, float alpha,
                           emu::BlockScaledGemmCounters* counters = nullptr) {
  std::vector<float> c(a.rows * b.rows);
  emu::block_scaled_multiply(a, b, alpha, model, c, counters);
  return c;
}

std::size_t bit_differences(const std::vector<float>& x, const std::vector<float>& y) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < x.size(); ++i) n += std::bit_cast<std::uint32_t>(x[i]) != std::bit_cast<std::uint32_t>(y[i]);
  return n;
}

// Normal values whose rows (along K) sit at scales 2^-12 .. 2^12, so that blocks get different scales.
std::vector<float> inputs(std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> binade(-12, 12);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; i += 7) {
    const float s = std::ldexp(1.0f, binade(rng));
    for (std::size_t j = i; j < std::min(n, i + 7); ++j) v[j] = normal(rng) * s;
  }
  return v;
}

struct Case {
  const char* a;
  const char* b;
  BlockScaledAccumulation model;
};

TEST(BlockScaledGemm, EmulatorEqualsTheReferenceOnRandomGemms) {
  using A = BlockScaledAccumulation;
  const Case cases[] = {{"mxfp8-e4m3", "mxfp8-e4m3", A::sm100_mxf8f6f4}, {"mxfp8-e4m3", "mxfp8-e5m2", A::sm100_mxf8f6f4},
                        {"mxfp6-e2m3", "mxfp4", A::sm100_mxf8f6f4},      {"mxfp6-e3m2", "mxfp8-e5m2", A::sm100_mxf8f6f4},
                        {"mxfp4", "mxfp4", A::sm100_mxf4nvf4},           {"nvfp4", "nvfp4", A::sm100_mxf4nvf4},
                        {"fp8-tile1x128", "fp8-block128x128", A::sm90_fp8_blockwise},
                        {"fp8-tile1x128", "fp8-tile1x128", A::sm90_fp8_blockwise},
                        {"fp8-tensor", "fp8-tensor", A::sm90_fp8_blockwise}};
  std::mt19937_64 rng(7);
  for (const Case& c : cases)
    for (const auto& [k, ta, tb] : {std::tuple{200, false, false}, std::tuple{40, true, false}, std::tuple{97, false, true}}) {
      const ops::GemmShape shape{5, 4, k, ta, tb};
      const auto a = inputs(shape.a_size(), rng), b = inputs(shape.b_size(), rng);
      const auto q = emu::quantize_operands(shape, a, b, scheme(c.a), scheme(c.b), {}, {},
                                            emu::block_scaled_k_granule(c.model), 128);
      const auto emulated = emulate(q.a, q.b, c.model, q.alpha);
      const auto expected = reference(q.a, q.b, ref_scale(scheme(c.a)), ref_scale(scheme(c.b)), c.model, q.alpha);
      EXPECT_EQ(bit_differences(emulated, expected), 0u) << c.a << " x " << c.b << " k " << k;
      std::vector<float> full(shape.c_size());
      emu::block_scaled_gemm(shape, a, b, full, {scheme(c.a), scheme(c.b), c.model, {}, {}});
      EXPECT_EQ(bit_differences(full, emulated), 0u) << c.a << " x " << c.b;
    }
}

// A 1 x 1 GEMM of one vector pair, for crafted cases.
ScaledOperand vector_operand(const char* element, std::vector<std::uint32_t> codes, std::vector<float> scales) {
  ScaledOperand x{parse_format(element), 1, codes.size(), codes.size() / scales.size(), std::move(codes),
                  std::move(scales)};
  return x;
}

void expect_equal_to_reference(const ScaledOperand& a, const ScaledOperand& b, RefOperand::Scale s,
                               BlockScaledAccumulation model, float alpha, const std::string& what) {
  const auto e = emulate(a, b, model, alpha), r = reference(a, b, s, s, model, alpha);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(e[0]), std::bit_cast<std::uint32_t>(r[0])) << what << ": " << e[0] << " vs " << r[0];
}

TEST(BlockScaledGemm, CraftedMxf8f6f4CasesMatchTheReference) {
  const float tiny = std::ldexp(1.0f, -127), huge = std::ldexp(1.0f, 127), nan = std::nanf("");
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<std::uint32_t> code(0, 255);
  const std::vector<std::pair<float, float>> scale_pairs = {{tiny, tiny}, {huge, huge}, {tiny, huge}, {1, 1},
                                                            {huge, 1},    {nan, 1},     {1, 0x1p-60f}};
  for (const auto& [sa, sb] : scale_pairs)
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<std::uint32_t> a(64), b(64);
      for (std::size_t i = 0; i < 64; ++i) {
        a[i] = trial % 4 == 0 ? 0x7Eu : code(rng);  // 0x7E: E4M3's largest, 448 (a saturated element)
        b[i] = trial % 5 == 0 ? 0u : code(rng);     // a block of zeros
      }
      if (trial == 7) a[3] = 0x7Fu;  // E4M3 NaN
      if (trial == 8) b[5] = 0x7Cu;  // E5M2 +inf
      if (trial == 9) a[5] = 0x00u, b[5] = 0xFCu;  // 0 x -inf
      const auto xa = vector_operand("fp8-e4m3", a, {sa, 1.0f}), xb = vector_operand("fp8-e5m2", b, {sb, sb});
      expect_equal_to_reference(xa, xb, RefOperand::Scale::e8m0, BlockScaledAccumulation::sm100_mxf8f6f4, 1.0f,
                                "scales " + std::to_string(sa) + ", " + std::to_string(sb) + " trial " +
                                    std::to_string(trial));
    }
}

TEST(BlockScaledGemm, CraftedMxf4nvf4CasesMatchTheReference) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<std::uint32_t> code(0, 15);
  const std::vector<float> ue4m3 = {448, 0, 0x1p-9f, 0x1p-6f, 1.75f, 3, std::nanf("")};
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::uint32_t> a(128), b(128);
    for (std::size_t i = 0; i < 128; ++i) a[i] = trial % 3 == 0 ? 0x7u : code(rng), b[i] = code(rng);  // 0x7: 6
    std::vector<float> sa(8), sb(8);
    for (std::size_t i = 0; i < 8; ++i) {
      sa[i] = ue4m3[(trial + i) % (trial % 11 == 0 ? 7 : 6)];
      sb[i] = ue4m3[(trial * 3 + i * 5) % 6];
    }
    expect_equal_to_reference(vector_operand("fp4-e2m1", a, sa), vector_operand("fp4-e2m1", b, sb),
                              RefOperand::Scale::ue4m3, BlockScaledAccumulation::sm100_mxf4nvf4,
                              trial % 2 ? 1.0f : 0x1.8p-20f, "nvfp4 trial " + std::to_string(trial));
    std::vector<float> ea(4), eb(4);
    for (std::size_t i = 0; i < 4; ++i) {
      ea[i] = std::ldexp(1.0f, trial % 2 ? 127 - static_cast<int>(i) * 40 : -127 + static_cast<int>(i) * 40);
      eb[i] = std::ldexp(1.0f, static_cast<int>((trial * 7 + i * 13) % 255) - 127);
    }
    expect_equal_to_reference(vector_operand("fp4-e2m1", a, ea), vector_operand("fp4-e2m1", b, eb),
                              RefOperand::Scale::e8m0, BlockScaledAccumulation::sm100_mxf4nvf4, 1.0f,
                              "mxfp4 trial " + std::to_string(trial));
  }
}

// c = 1, one product 1.75 x 1 with X_a = 2^-24: inside the fused sum the term sits at exponent -24 and is
// truncated to 3 x 2^-25 (F = 25), below fp32's last bit at 1: d = 1 exactly, toward zero. Had the scale been
// applied after (1 + fl32(1.75 x 2^-24) to nearest), d would be 1 + 2^-23.
TEST(BlockScaledGemm, Mxf8f6f4HandWorkedScaleInsideTheFusedSum) {
  const auto in = emu::mxf8f6f4_instruction(parse_format("fp8-e4m3"), parse_format("fp8-e4m3"));
  std::vector<std::uint32_t> a(32, 0u), b(32, 0u);
  a[0] = 0x3Eu;  // 1.75
  b[0] = 0x38u;  // 1
  const std::vector<float> sa{0x1p-24f}, sb{1.0f};
  emu::MmaCounts counts;
  const std::uint32_t d = emu::block_scaled_dot_add(in, a, b, sa, sb, 0x3F800000u, &counts);
  EXPECT_EQ(d, 0x3F800000u);
  EXPECT_EQ(counts.terms, 2u);            // c and the one non-zero product
  EXPECT_EQ(counts.terms_truncated, 1u);  // 3.5 x 2^-25 kept as 3 x 2^-25
  EXPECT_EQ(counts.roundings_inexact, 1u);
  EXPECT_EQ(1.0f + 1.75f * 0x1p-24f, 1.0f + 0x1p-23f);  // the scale-after result differs
  // 2^127 x 2^127 x 448 x 448 overflows to infinity although every operand is finite.
  a[0] = 0x7Eu;
  b[0] = 0x7Eu;
  const std::vector<float> big{0x1p127f};
  EXPECT_EQ(emu::block_scaled_dot_add(in, a, b, big, big, 0u, &counts), 0x7F800000u);
  EXPECT_EQ(counts.overflows, 1u);
  const std::vector<float> nan{std::nanf("")};
  EXPECT_EQ(emu::block_scaled_dot_add(in, a, b, nan, big, 0u, &counts), 0x7FFFFFFFu);
  EXPECT_EQ(counts.nans, 1u);
}

// Group 0: 16 x (6 x 6) = 576 with UE4M3 scales 448 and 448: 576 x 448^2 = 441 x 2^18, exact. Group 1: 1 x 0.5
// with scales 2^-9 (UE4M3's smallest, exponent -6 with significand 1/8): a term of exponent -12 whose value is
// 0.5 x 2^-18; E = 16, F = 35: its grid is 2^-19, so it is kept exactly, but fp32 toward zero drops it.
TEST(BlockScaledGemm, Mxf4nvf4HandWorkedGroups) {
  const auto in = emu::mxf4nvf4_instruction(parse_format("ue4m3"), 16);
  std::vector<std::uint32_t> a(64, 0u), b(64, 0u);
  for (std::size_t i = 0; i < 16; ++i) a[i] = b[i] = 0x7u;  // 6
  a[16] = 0x2u;                                             // 1
  b[16] = 0x1u;                                             // 0.5
  const std::vector<float> sa{448, 0x1p-9f, 1, 1}, sb{448, 0x1p-9f, 1, 1};
  emu::MmaCounts counts;
  EXPECT_EQ(std::bit_cast<float>(emu::block_scaled_dot_add(in, a, b, sa, sb, 0u, &counts)), 115605504.0f);
  EXPECT_EQ(counts.terms, 2u);
  EXPECT_EQ(counts.terms_truncated, 0u);
  EXPECT_EQ(counts.roundings_inexact, 1u);
}

TEST(BlockScaledGemm, PaddingKEqualsQuantizingTheZeroPaddedOperands) {
  using A = BlockScaledAccumulation;
  std::mt19937_64 rng(11);
  for (const Case& c : {Case{"mxfp8-e4m3", "mxfp6-e2m3", A::sm100_mxf8f6f4}, Case{"nvfp4", "nvfp4", A::sm100_mxf4nvf4},
                        Case{"mxfp4", "mxfp4", A::sm100_mxf4nvf4},
                        Case{"fp8-tile1x128", "fp8-block128x128", A::sm90_fp8_blockwise}}) {
    const int k = 40, granule = static_cast<int>(emu::block_scaled_k_granule(c.model));
    const int padded = (k + granule - 1) / granule * granule;  // 64 for mxf8f6f4's 32
    const ops::GemmShape shape{3, 5, k, false, false}, padded_shape{3, 5, padded, false, false};
    const auto a = inputs(shape.a_size(), rng), b = inputs(shape.b_size(), rng);
    std::vector<float> ap(padded_shape.a_size(), 0.0f), bp(padded_shape.b_size(), 0.0f);
    for (int i = 0; i < 3; ++i)
      for (int p = 0; p < k; ++p) ap[static_cast<std::size_t>(i * padded + p)] = a[static_cast<std::size_t>(i * k + p)];
    std::copy(b.begin(), b.end(), bp.begin());  // B is k x n: its first k rows
    std::vector<float> c1(15), c2(15);
    const emu::BlockScaledGemmPolicy policy{scheme(c.a), scheme(c.b), c.model, {}, {}};
    emu::BlockScaledGemmCounters n1, n2;
    emu::block_scaled_gemm(shape, a, b, c1, policy, &n1);
    emu::block_scaled_gemm(padded_shape, ap, bp, c2, policy, &n2);
    EXPECT_EQ(bit_differences(c1, c2), 0u) << c.a << " x " << c.b;
    EXPECT_EQ(n1.a.elements, 3u * k);  // the padding is not counted as quantized elements
    EXPECT_EQ(n1.accumulate, n2.accumulate);
  }
}

TEST(BlockScaledGemm, CountersAreTheQuantizationsAndTheInstructions) {
  std::mt19937_64 rng(13);
  const ops::GemmShape shape{4, 3, 300, false, false};
  const auto a = inputs(shape.a_size(), rng), b = inputs(shape.b_size(), rng);
  const emu::BlockScaledGemmPolicy policy{scheme("fp8-tile1x128"), scheme("fp8-block128x128"),
                                          BlockScaledAccumulation::sm90_fp8_blockwise, {}, {}};
  std::vector<float> c(shape.c_size());
  emu::BlockScaledGemmCounters n;
  emu::block_scaled_gemm(shape, a, b, c, policy, &n);
  const std::size_t a_shape[] = {4, 300};
  EXPECT_EQ(n.a, emu::block_quantize(a, a_shape, 1, scheme("fp8-tile1x128")).counters);
  EXPECT_EQ(n.promotions, 4u * 3u * 3u);           // K = 300 padded to 384: three blocks of 128
  EXPECT_EQ(n.accumulate.roundings, 4u * 3u * 12u);  // four wgmma per block
  EXPECT_GT(n.accumulate.terms_truncated, 0u);       // F = 13
}

TEST(BlockScaledGemm, RefusesSchemesTheModelCannotTake) {
  using A = BlockScaledAccumulation;
  for (const Case& c : {Case{"nvfp4", "mxfp8-e4m3", A::sm100_mxf8f6f4}, Case{"mxfp4", "nvfp4", A::sm100_mxf4nvf4},
                        Case{"mxfp8-e4m3", "mxfp8-e4m3", A::sm100_mxf4nvf4},
                        Case{"mxfp8-e4m3", "fp8-tile1x128", A::sm90_fp8_blockwise}})
    EXPECT_THROW(emu::validate(emu::BlockScaledGemmPolicy{scheme(c.a), scheme(c.b), c.model, {}, {}}),
                 std::invalid_argument)
        << c.a << " x " << c.b;
  EXPECT_EQ(emu::parse_block_scaled_accumulation("sm90.fp8-blockwise"), A::sm90_fp8_blockwise);
  EXPECT_FALSE(emu::parse_block_scaled_accumulation("sm90"));
}

// The comparison can fail: a model off by one fraction bit, or with the scales applied after the fused sum
// (each instruction from zero unscaled, then c + X_a X_b d in fp32 to nearest), differs from the reference.
TEST(BlockScaledGemm, TheComparisonCatchesAModelThatIsOff) {
  std::mt19937_64 rng(17);
  const ops::GemmShape shape{8, 8, 256, false, false};
  const auto a = inputs(shape.a_size(), rng), b = inputs(shape.b_size(), rng);
  for (const auto model : {BlockScaledAccumulation::sm100_mxf8f6f4, BlockScaledAccumulation::sm100_mxf4nvf4}) {
    const char* s = model == BlockScaledAccumulation::sm100_mxf8f6f4 ? "mxfp8-e4m3" : "mxfp4";
    auto q = emu::quantize_operands(shape, a, b, scheme(s), scheme(s), {}, {}, emu::block_scaled_k_granule(model), 128);
    // FP4 group terms (at most 20 bits) and c (24) lose bits to F = 35 only when their exponents lie 12 or more
    // binades apart: spread the block scales over 2^-30 .. 2^30 so that they do.
    if (model == BlockScaledAccumulation::sm100_mxf4nvf4)
      for (auto* x : {&q.a, &q.b})
        for (float& v : x->scales) v = std::ldexp(1.0f, static_cast<int>(rng() % 61) - 30);
    const auto expected = reference(q.a, q.b, ref_scale(scheme(s)), ref_scale(scheme(s)), model, q.alpha);
    auto in = model == BlockScaledAccumulation::sm100_mxf8f6f4
                  ? emu::mxf8f6f4_instruction(q.a.element, q.b.element)
                  : emu::mxf4nvf4_instruction(parse_format("e8m0"), 32);
    const auto k = static_cast<std::size_t>(in.model.k), per = k / in.block;
    for (const int dF : {-1, +1}) {
      auto off = in;
      off.model.fraction_bits += dF;
      std::vector<float> c(64);
      for (std::size_t i = 0; i < 8; ++i)
        for (std::size_t j = 0; j < 8; ++j) {
          std::uint32_t d = 0;
          for (std::size_t p = 0; p < 256; p += k)
            d = emu::block_scaled_dot_add(off, std::span(q.a.codes).subspan(i * 256 + p, k),
                                          std::span(q.b.codes).subspan(j * 256 + p, k),
                                          std::span(q.a.scales).subspan(i * 256 / in.block + p / in.block, per),
                                          std::span(q.b.scales).subspan(j * 256 / in.block + p / in.block, per), d);
          c[i * 8 + j] = q.alpha == 1.0f ? std::bit_cast<float>(d) : q.alpha * std::bit_cast<float>(d);
        }
      // One more fraction bit than F = 35 shows on random FP4 data only where a sum lands within 2^-35 of an
      // fp32 boundary: the crafted case below shows it instead.
      if (model == BlockScaledAccumulation::sm100_mxf4nvf4 && dF > 0) continue;
      EXPECT_GT(bit_differences(c, expected), 0u) << s << " F " << dF;
    }
  }
  // Two MXFP4 instructions: the first gives c = -1 x 2^-18 x 2^-18 = -2^-36 exactly, the second adds one product
  // 1 x 1 (scales 1). With F = 35 that c is shifted out and d = 1; with F = 36 it is kept, d = 1 - 2^-36, toward
  // zero 1 - 2^-24.
  std::vector<std::uint32_t> ca(128, 0u), cb(128, 0u);
  ca[0] = 0xAu;  // -1
  cb[0] = 0x2u;  // 1
  ca[64] = cb[64] = 0x2u;
  const std::vector<float> cs{0x1p-18f, 0x1p-18f, 1.0f, 1.0f};
  const auto xa = vector_operand("fp4-e2m1", ca, cs), xb = vector_operand("fp4-e2m1", cb, cs);
  const auto mx = BlockScaledAccumulation::sm100_mxf4nvf4;
  EXPECT_EQ(emulate(xa, xb, mx, 1.0f)[0], 1.0f);
  EXPECT_EQ(reference(xa, xb, RefOperand::Scale::e8m0, RefOperand::Scale::e8m0, mx, 1.0f)[0], 1.0f);
  auto f36 = emu::mxf4nvf4_instruction(parse_format("e8m0"), 32);
  f36.model.fraction_bits = 36;
  const std::uint32_t first = emu::block_scaled_dot_add(f36, std::span(ca).first(64), std::span(cb).first(64),
                                                        std::span(cs).first(2), std::span(cs).first(2), 0u);
  EXPECT_EQ(std::bit_cast<float>(first), -0x1p-36f);
  EXPECT_EQ(emu::block_scaled_dot_add(f36, std::span(ca).subspan(64), std::span(cb).subspan(64),
                                      std::span(cs).subspan(2), std::span(cs).subspan(2), first),
            0x3F7FFFFFu);
  // mxf8f6f4 with the scales applied after each instruction's fused sum.
  const auto q = emu::quantize_operands(shape, a, b, scheme("mxfp8-e4m3"), scheme("mxfp8-e4m3"), {}, {}, 32, 128);
  const auto in = emu::mxf8f6f4_instruction(q.a.element, q.b.element);
  std::vector<float> after(64);
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t j = 0; j < 8; ++j) {
      float d = 0;
      for (std::size_t p = 0; p < 256; p += 32) {
        emu::MmaCounts ignored;
        const float partial = std::bit_cast<float>(emu::detail::mma_fused_dot_add(
            in.model, std::span(q.a.codes).subspan(i * 256 + p, 32), std::span(q.b.codes).subspan(j * 256 + p, 32),
            0u, 0, ignored));
        d = d + q.a.scales[i * 8 + p / 32] * q.b.scales[j * 8 + p / 32] * partial;
      }
      after[i * 8 + j] = d;
    }
  EXPECT_GT(bit_differences(after, reference(q.a, q.b, RefOperand::Scale::e8m0, RefOperand::Scale::e8m0,
                                             BlockScaledAccumulation::sm100_mxf8f6f4, 1.0f)),
            0u);
}

// DeepGEMM's promotion is one fused multiply-add after an fp32 product of the two scales; a promotion that
// rounds s x partial first, or multiplies the scales into the partial one at a time, differs somewhere.
TEST(BlockScaledGemm, HopperPromotionIsOneFusedMultiplyAdd) {
  std::mt19937_64 rng(19);
  const ops::GemmShape shape{8, 8, 512, false, false};
  const auto a = inputs(shape.a_size(), rng), b = inputs(shape.b_size(), rng);
  const auto q = emu::quantize_operands(shape, a, b, scheme("fp8-tile1x128"), scheme("fp8-tile1x128"), {}, {}, 128, 128);
  const auto model = BlockScaledAccumulation::sm90_fp8_blockwise;
  const auto emulated = emulate(q.a, q.b, model, 1.0f);
  EXPECT_EQ(bit_differences(emulated, reference(q.a, q.b, RefOperand::Scale::fp32, RefOperand::Scale::fp32, model, 1.0f)), 0u);
  const emu::MmaModel& wgmma = emu::mma_preset("sm90.wgmma.k32.f32.e4m3");
  std::vector<float> two_roundings(64), one_at_a_time(64);
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t j = 0; j < 8; ++j) {
      float x = 0, y = 0;
      for (std::size_t p = 0; p < 512; p += 128) {
        const float partial = std::bit_cast<float>(emu::mma_dot(
            wgmma, std::span(q.a.codes).subspan(i * 512 + p, 128), std::span(q.b.codes).subspan(j * 512 + p, 128), 0u));
        const float sa = q.a.scales[i * 4 + p / 128], sb = q.b.scales[j * 4 + p / 128];
        const float s = sa * sb, product = s * partial;
        x = x + product;
        const float scaled = partial * sa;
        y = std::fmaf(scaled, sb, y);
      }
      two_roundings[i * 8 + j] = x;
      one_at_a_time[i * 8 + j] = y;
    }
  EXPECT_GT(bit_differences(two_roundings, emulated), 0u);
  EXPECT_GT(bit_differences(one_at_a_time, emulated), 0u);
}

TEST(BlockScaledGemm, OffsetZeroIsTheInstructionModel) {
  const emu::MmaModel& m = emu::mma_preset("sm100.tcgen05.k32.f32.e4m3.e5m2");
  std::mt19937_64 rng(23);
  std::uniform_int_distribution<std::uint32_t> code(0, 255), word;
  for (int t = 0; t < 2000; ++t) {
    std::vector<std::uint32_t> a(32), b(32);
    for (auto& x : a) x = code(rng);
    for (auto& x : b) x = code(rng);
    const std::uint32_t c = word(rng) & 0x8FFFFFFFu;
    emu::MmaCounts n1, n2;
    EXPECT_EQ(emu::detail::mma_fused_dot_add(m, a, b, c, 0, n1), emu::mma_dot_add(m, a, b, c, &n2));
    EXPECT_EQ(n1, n2);
  }
}

}  // namespace
