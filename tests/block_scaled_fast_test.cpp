// The fast path of the block-scaled GEMM (emu/block_scaled_fast.h) against the scalar instruction models it
// stands in for, bit for bit and counter for counter (every MmaCounts field, promotions, promotions_inexact):
// every model with every scheme pairing it takes, transposed and not, K not a multiple of the granule, on
// inputs of many magnitudes (blocks spanning wide exponent ranges, so that terms are truncated and shifted
// out; subnormal elements; zero blocks), on operands whose scales sit at the formats' extremes (E8M0 2^-127
// and 2^127, UE4M3 0 and subnormal, fp32 scales whose product is subnormal or overflows) and whose codes or
// scales are NaN or infinite, which the fast path hands to the scalar model. The comparison can fail: a fast
// path whose F is off by one differs from the scalar path on the same operands.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "emu/block_scaled_fast.h"
#include "emu/block_scaled_gemm.h"
#include "formats/encoding.h"

namespace mpverify::emu {

// gtest prints the counters that differ rather than their bytes.
void PrintTo(const MmaCounts& n, std::ostream* os) {
  *os << "{terms " << n.terms << ", truncated " << n.terms_truncated << ", shifted out " << n.terms_shifted_out
      << ", roundings " << n.roundings << ", inexact " << n.roundings_inexact << ", overflows " << n.overflows
      << ", nans " << n.nans << "}";
}

}  // namespace mpverify::emu

namespace {

using namespace mpverify;
using A = emu::BlockScaledAccumulation;
using emu::ScaledOperand;

const emu::BlockScheme& scheme(const char* name) { return *emu::find_block_scheme(name); }

struct PathRun {
  std::vector<std::uint32_t> bits;
  emu::BlockScaledGemmCounters n;
  std::size_t fast = 0;  // elements the fast path computed itself
};

PathRun run(const ScaledOperand& a, const ScaledOperand& b, float alpha, A model, bool fast) {
  PathRun r;
  std::vector<float> c(a.rows * b.rows);
  r.fast = emu::detail::block_scaled_multiply_path(a, b, alpha, model, c, r.n, fast);
  for (float x : c) r.bits.push_back(std::bit_cast<std::uint32_t>(x));
  return r;
}

std::size_t bit_differences(const PathRun& x, const PathRun& y) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < x.bits.size(); ++i) n += x.bits[i] != y.bits[i];
  return n;
}

bool same_counts(const PathRun& x, const PathRun& y) {
  return x.n.accumulate == y.n.accumulate && x.n.promotions == y.n.promotions &&
         x.n.promotions_inexact == y.n.promotions_inexact;
}

// What the twin comparisons saw, summed over a test: the fast path must have run, and on inputs where the
// alignment truncates and shifts terms out.
struct Seen {
  std::size_t elements = 0, fast = 0;
  emu::MmaCounts counts;
};

// The fast path equals the scalar path on these operands: every output's bits and every counter.
void expect_twins(const ScaledOperand& a, const ScaledOperand& b, float alpha, A model, const std::string& what,
                  Seen& seen) {
  const PathRun scalar = run(a, b, alpha, model, false), fast = run(a, b, alpha, model, true);
  EXPECT_EQ(scalar.fast, 0u);
  EXPECT_EQ(bit_differences(scalar, fast), 0u) << what;
  EXPECT_EQ(fast.n.accumulate, scalar.n.accumulate) << what;
  EXPECT_EQ(fast.n.promotions, scalar.n.promotions) << what;
  EXPECT_EQ(fast.n.promotions_inexact, scalar.n.promotions_inexact) << what;
  seen.elements += fast.bits.size();
  seen.fast += fast.fast;
  seen.counts += scalar.n.accumulate;
}

// Values of many magnitudes: each stretch of 7 elements (along K or across it, as the layout falls) is normal
// values at one binade in 2^-12 .. 2^12, values log-uniform over 2^-40 .. 2^20 (a block spanning more
// binades than its elements hold, giving subnormal elements and terms that are truncated or shifted out),
// or zeros; every 5th row of 40 or more elements starts with a run of 40 zeros (a zero block along K when
// the row runs along K).
std::vector<float> inputs(std::size_t n, std::size_t row, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> binade(-12, 12), kind(0, 5);
  std::uniform_real_distribution<double> log2_magnitude(-40, 20);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; i += 7) {
    const int k = kind(rng);
    const float s = std::ldexp(1.0f, binade(rng));
    for (std::size_t j = i; j < std::min(n, i + 7); ++j)
      v[j] = k == 0   ? 0.0f
             : k <= 2 ? normal(rng) * s
                      : static_cast<float>(std::exp2(log2_magnitude(rng)) * ((rng() & 1) ? -1.0 : 1.0));
  }
  for (std::size_t r = 0; row >= 40 && r * row < n; r += 5)
    for (std::size_t j = r * row; j < r * row + 40; ++j) v[j] = 0.0f;
  return v;
}

struct Pairing {
  const char* a;
  const char* b;
  A model;
};

std::vector<Pairing> pairings() {
  std::vector<Pairing> p;
  const char* mx[] = {"mxfp8-e4m3", "mxfp8-e5m2", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp4"};
  for (const char* a : mx)
    for (const char* b : mx) p.push_back({a, b, A::sm100_mxf8f6f4});
  p.push_back({"mxfp4", "mxfp4", A::sm100_mxf4nvf4});
  p.push_back({"nvfp4", "nvfp4", A::sm100_mxf4nvf4});
  const char* fp8[] = {"fp8-tile1x128", "fp8-block128x128", "fp8-tensor"};
  for (const char* a : fp8)
    for (const char* b : fp8) p.push_back({a, b, A::sm90_fp8_blockwise});
  return p;
}

std::string name(const Pairing& p) { return std::string(p.a) + " x " + p.b + " on " + std::string(to_string(p.model)); }

emu::ScaledOperands quantized(const Pairing& p, const ops::GemmShape& shape, std::mt19937_64& rng) {
  const auto row = [](bool transposed, int across, int along) { return static_cast<std::size_t>(transposed ? across : along); };
  const auto a = inputs(shape.a_size(), row(shape.transpose_a, shape.m, shape.k), rng);
  const auto b = inputs(shape.b_size(), row(shape.transpose_b, shape.k, shape.n), rng);
  return emu::quantize_operands(shape, a, b, scheme(p.a), scheme(p.b), {}, {}, emu::block_scaled_k_granule(p.model),
                                128);
}

TEST(BlockScaledFast, EqualsTheScalarModelsOnRandomGemmsOfEveryPairing) {
  std::mt19937_64 rng(29);
  Seen seen;
  for (const Pairing& p : pairings())
    for (const auto& [k, ta, tb] : {std::tuple{200, false, false}, std::tuple{97, true, false},
                                    std::tuple{333, false, true}, std::tuple{256, true, true}}) {
      const ops::GemmShape shape{6, 5, k, ta, tb};
      const auto q = quantized(p, shape, rng);
      expect_twins(q.a, q.b, q.alpha, p.model, name(p) + " k " + std::to_string(k), seen);
    }
  EXPECT_GT(seen.fast, seen.elements * 9 / 10);  // the fast path computed (nearly) everything
  EXPECT_GT(seen.counts.terms_truncated, 0u);
  EXPECT_GT(seen.counts.terms_shifted_out, 0u);
  EXPECT_GT(seen.counts.roundings_inexact, 0u);
}

// A scale drawn for a crafted operand: mostly moderate, often at the format's extremes, rarely NaN (or, for
// fp32 scales, infinite, zero or subnormal).
float crafted_scale(emu::ScaleFormat f, std::mt19937_64& rng, bool specials) {
  const int pick = static_cast<int>(rng() % 16);
  const bool special = specials && pick == 15;
  switch (f) {
    case emu::ScaleFormat::e8m0: {
      if (special) return std::nanf("");
      const int extremes[] = {-127, 127, -126, 126, -60, 60, -100, 100};
      return std::ldexp(1.0f, pick < 8 ? extremes[pick] : static_cast<int>(rng() % 41) - 20);
    }
    case emu::ScaleFormat::ue4m3_fp32: {
      if (special) return std::nanf("");
      const float values[] = {448, 0, 0x1p-9f, 0x1p-6f, 0x1.cp-7f, 240, 1.75f, 0.5f};
      if (pick < 8) return values[pick];
      static const formats::Format ue4m3 = formats::parse_format("ue4m3");
      return static_cast<float>(formats::to_double(ue4m3, static_cast<std::uint32_t>(rng() % 127)));
    }
    case emu::ScaleFormat::fp32: {
      const float values[] = {0x1p-140f, 0x1p100f, 0x1p-70f, 0x1p60f, 1.0f, 0x1.fffffep127f, 0x1p-126f, 0.0f};
      if (special) return (rng() & 1) ? std::nanf("") : INFINITY;
      if (pick < 8) return values[pick] * ((rng() & 3) == 0 ? -1.0f : 1.0f);
      return static_cast<float>(std::exp2(std::uniform_real_distribution<double>(-30, 30)(rng)));
    }
  }
  return 1.0f;
}

// Codes of x's format: in each block, all finite codes uniformly, all zeros, only the smallest magnitudes
// (subnormals), or one code at the largest magnitude among the smallest ones (a block spanning its format's
// range); with `specials`, NaN or infinite codes where the format has them, in a few rows.
void craft_codes(ScaledOperand& x, std::mt19937_64& rng, bool specials) {
  std::vector<std::uint32_t> finite, small, special;
  double largest = 0;
  for (std::uint32_t code = 0; code < (1u << x.element.width()); ++code) {
    const double v = formats::to_double(x.element, code);
    if (!std::isfinite(v)) special.push_back(code);
    else finite.push_back(code), largest = std::max(largest, std::fabs(v));
  }
  for (std::uint32_t code : finite)
    if (std::fabs(formats::to_double(x.element, code)) <= largest * 0x1p-6) small.push_back(code);
  for (std::size_t row = 0; row < x.rows; ++row)
    for (std::size_t p = 0; p < x.k; p += 32) {
      const int kind = static_cast<int>(rng() % 4);
      for (std::size_t t = p; t < p + 32; ++t) {
        const std::vector<std::uint32_t>& from = kind == 2 || (kind == 3 && t != p + rng() % 32) ? small : finite;
        x.codes[row * x.k + t] = kind == 1 ? 0u : from[rng() % from.size()];
      }
    }
  if (specials && !special.empty())
    for (std::size_t row = 1; row < x.rows; row += 3) x.codes[row * x.k + rng() % x.k] = special[rng() % special.size()];
}

void craft(ScaledOperand& x, const emu::BlockScheme& s, std::mt19937_64& rng, bool specials) {
  craft_codes(x, rng, specials);
  for (float& v : x.scales) v = crafted_scale(s.scale_format, rng, specials);
}

TEST(BlockScaledFast, EqualsTheScalarModelsOnCraftedCodesAndExtremeScales) {
  std::mt19937_64 rng(31);
  Seen seen;
  for (const Pairing& p : pairings())
    for (const bool specials : {false, true})
      for (int trial = 0; trial < 3; ++trial) {
        const ops::GemmShape shape{7, 6, 200 + trial * 64, trial == 1, trial == 2};
        auto q = quantized(p, shape, rng);
        craft(q.a, scheme(p.a), rng, specials);
        craft(q.b, scheme(p.b), rng, specials);
        // The NVFP4 epilogue: 1, a typical alpha, and ones that push fl32(alpha d) to the edges of fp32.
        const float alphas[] = {1.0f, q.alpha, 0x1p-100f, 0x1p90f, 0x1.8p-20f};
        const float alpha = p.model == A::sm100_mxf4nvf4 ? alphas[trial + (specials ? 2 : 0)] : 1.0f;
        expect_twins(q.a, q.b, alpha, p.model, name(p) + (specials ? " with NaN/inf" : "") + " trial " +
                                                   std::to_string(trial), seen);
      }
  EXPECT_GT(seen.fast, seen.elements / 4);
  EXPECT_LT(seen.fast, seen.elements);  // some elements went to the scalar model
  EXPECT_GT(seen.counts.terms_shifted_out, 0u);
  EXPECT_GT(seen.counts.overflows, 0u);
  EXPECT_GT(seen.counts.nans, 0u);
}

// Longer K, the shapes the benchmark and training use (fewer, larger GEMMs), on the plain quantized inputs:
// every element on the fast path.
TEST(BlockScaledFast, TakesEveryElementOfOrdinaryGemms) {
  std::mt19937_64 rng(37);
  for (const Pairing& p : {Pairing{"mxfp8-e4m3", "mxfp8-e4m3", A::sm100_mxf8f6f4},
                           Pairing{"nvfp4", "nvfp4", A::sm100_mxf4nvf4},
                           Pairing{"fp8-tile1x128", "fp8-block128x128", A::sm90_fp8_blockwise}}) {
    const ops::GemmShape shape{16, 12, 1024, false, true};
    std::normal_distribution<float> normal;
    std::vector<float> a(shape.a_size()), b(shape.b_size());
    for (float& x : a) x = normal(rng);
    for (float& x : b) x = normal(rng) * 0.01f;
    const auto q = emu::quantize_operands(shape, a, b, scheme(p.a), scheme(p.b), {}, {},
                                          emu::block_scaled_k_granule(p.model), 128);
    Seen seen;
    expect_twins(q.a, q.b, q.alpha, p.model, name(p), seen);
    EXPECT_EQ(seen.fast, seen.elements) << name(p);
    // block_scaled_gemm (the public entry) takes the fast path and gives the same.
    std::vector<float> c(shape.c_size());
    emu::BlockScaledGemmCounters n;
    emu::block_scaled_gemm(shape, a, b, c, {scheme(p.a), scheme(p.b), p.model, {}, {}}, &n);
    const PathRun scalar = run(q.a, q.b, q.alpha, p.model, false);
    for (std::size_t i = 0; i < c.size(); ++i) EXPECT_EQ(std::bit_cast<std::uint32_t>(c[i]), scalar.bits[i]) << i;
    EXPECT_EQ(n.accumulate, scalar.n.accumulate);
  }
}

// Operands the models refuse are refused on the fast path too (the element goes to the scalar model, which
// throws), and an empty K gives the same zeros and counts on both paths.
TEST(BlockScaledFast, RefusesWhatTheScalarModelsRefuse) {
  std::mt19937_64 rng(43);
  const Pairing mx{"mxfp8-e4m3", "mxfp8-e4m3", A::sm100_mxf8f6f4}, nv{"nvfp4", "nvfp4", A::sm100_mxf4nvf4};
  for (const Pairing& p : {mx, nv}) {
    auto q = quantized(p, ops::GemmShape{3, 3, 128, false, false}, rng);
    auto bad_scale = q, bad_code = q;
    bad_scale.b.scales[5] = 3.0f;  // not a power of two (E8M0)
    if (p.model == A::sm100_mxf4nvf4) bad_scale.b.scales[5] = 0.3f;  // not a UE4M3 value
    bad_code.a.codes[7] = 1u << bad_code.a.element.width();  // wider than the format
    for (const bool fast : {false, true}) {
      EXPECT_THROW(run(bad_scale.a, bad_scale.b, q.alpha, p.model, fast), std::invalid_argument) << name(p);
      EXPECT_THROW(run(bad_code.a, bad_code.b, q.alpha, p.model, fast), std::invalid_argument) << name(p);
    }
  }
  for (const Pairing& p : pairings()) {
    const ScaledOperand a{scheme(p.a).element, 2, 0, 32, {}, {}}, b{scheme(p.b).element, 3, 0, 32, {}, {}};
    const PathRun scalar = run(a, b, 0.5f, p.model, false), fast = run(a, b, 0.5f, p.model, true);
    EXPECT_EQ(bit_differences(scalar, fast), 0u) << name(p);
    EXPECT_TRUE(same_counts(scalar, fast)) << name(p);
  }
}

// The comparison can fail: the fast arithmetic with F one bit off differs from the scalar model in the bits
// (and the counts) of the same operands, for every model.
TEST(BlockScaledFast, AFastPathWithFOffByOneIsCaught) {
  std::mt19937_64 rng(41);
  for (const Pairing& p : {Pairing{"mxfp8-e4m3", "mxfp6-e3m2", A::sm100_mxf8f6f4},
                           Pairing{"mxfp4", "mxfp4", A::sm100_mxf4nvf4},
                           Pairing{"fp8-tile1x128", "fp8-block128x128", A::sm90_fp8_blockwise}}) {
    const ops::GemmShape shape{8, 8, 512, false, false};
    auto q = quantized(p, shape, rng);
    // FP4 group terms lose bits to F = 35 only when their scales lie 12 or more binades apart.
    if (p.model == A::sm100_mxf4nvf4)
      for (auto* x : {&q.a, &q.b})
        for (float& v : x->scales) v = std::ldexp(1.0f, static_cast<int>(rng() % 61) - 30);
    const PathRun scalar = run(q.a, q.b, q.alpha, p.model, false);
    const emu::detail::BlockScaledScalar model(q.a, q.b, q.alpha, p.model);
    for (const int dF : {-1, +1}) {
      PathRun off;
      std::vector<float> c(64);
      off.fast = emu::detail::block_scaled_multiply_fast(model, c, off.n, dF);
      for (float x : c) off.bits.push_back(std::bit_cast<std::uint32_t>(x));
      EXPECT_GT(off.fast, 0u);
      EXPECT_FALSE(same_counts(off, scalar)) << name(p) << " F " << dF;
      EXPECT_GT(bit_differences(off, scalar), 0u) << name(p) << " F " << dF;
    }
  }
}

}  // namespace
