// Properties of the tensor-core instruction-model GEMM (emu/mma_gemm.h): its vector kernels (the one chosen
// at run time, and AVX2 forced where the CPU would choose AVX-512) give the scalar model's bits and counts,
// and the same as each other, element by element, on inputs aimed at each rule of the model
// (cancellation, c dominating, subnormals, products with a significand of 2 or more, overflow, NaN and
// infinity, exponent spreads that leave the kernel's range, sums near the output's ties, which catch a
// double rounding), for every preset and for custom models.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "check_count.h"
#include "emu/gemm_emu.h"
#include "emu/mma_gemm.h"
#include "emu/mma_gemm_simd.h"
#include "emu/mma_presets.h"
#include "explain.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"

namespace {

using namespace mpverify;
using mpverify::properties::expect_checks;
using mpverify::properties::explain;

constexpr int kFamilies = 10;
const char* const kFamilyNames[kFamilies] = {"any finite", "typical",  "cancelling", "c dominating",
                                             "significands near 2", "tiny", "near overflow", "specials",
                                             "near ties", "tiny normal products"};

// One operand value of format f for a family, from rng; kk is the position along k (c dominating: the
// first instruction's products are large, the rest small).
float operand(const formats::Format& f, int family, int kk, int k, std::mt19937_64& rng) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  if (family == 8) {  // near ties: sums of powers of two 11..25 binades apart (fp16's half ulp and below)
    const int exponents[] = {0, -1, -11, -12, -13, -24, -25};
    formats::Flags flags;
    const double v = uniform(0, 2) == 0 ? 0.0 : std::ldexp(uniform(0, 1) ? 1.0 : -1.0, exponents[uniform(0, 6)]);
    return formats::to_float(f, formats::from_double(f, v, {}, flags), flags);
  }
  const int top = (1 << f.exponent_bits) - 2;  // the largest finite exponent field (IEEE-like formats)
  const int bias = f.bias;
  std::uint32_t field = 0, fraction = static_cast<std::uint32_t>(uniform(0, (1 << f.mantissa_bits) - 1));
  switch (family) {
    case 0: field = static_cast<std::uint32_t>(uniform(0, top)); break;
    case 1: field = static_cast<std::uint32_t>(uniform(bias - 3, bias + 3)); break;
    case 2: field = static_cast<std::uint32_t>(bias + uniform(0, 1)); fraction &= 0x3u; break;  // few values
    case 3: field = static_cast<std::uint32_t>(kk < k ? std::min(top, bias + 8) : bias - uniform(4, 12)); break;
    case 4: field = static_cast<std::uint32_t>(bias + uniform(0, 1));
            fraction |= (1u << f.mantissa_bits) - (1u << (f.mantissa_bits / 2)); break;  // products near 4
    case 5: field = static_cast<std::uint32_t>(uniform(0, 2)); break;  // subnormals and zeros
    case 6: field = static_cast<std::uint32_t>(uniform(top - 2, top)); break;
    // products of 2^-126 to 2^-114 where the exponent range allows (bf16, tf32): the kernels hold them, and
    // the alignment's factor 2^(F - E) exceeds 2^127 (AVX2 scales in two steps); else the least normals
    case 9: field = static_cast<std::uint32_t>(bias >= 63 ? uniform(bias - 63, bias - 58) : uniform(1, 3)); break;
    default: field = static_cast<std::uint32_t>(uniform(bias - 4, bias + 4)); break;
  }
  field = std::min<std::uint32_t>(std::max(field, 0u), static_cast<std::uint32_t>(top));
  if (uniform(0, 9) == 0) field = 0, fraction = 0;  // zeros everywhere: the model gives them exponent -126
  std::uint32_t bits = (field << f.mantissa_bits) | fraction;
  if (uniform(0, 1)) bits |= f.sign_mask();
  formats::Flags flags;
  float v = formats::to_float(f, bits, flags);
  if (family == 7 && uniform(0, 60) == 0) {
    const float specials[] = {__builtin_nanf(""), __builtin_inff(), -__builtin_inff()};
    v = specials[uniform(0, 2)];
  }
  if (!(v == v) && family != 7) v = 0;  // formats whose top field holds NaN (E4M3): only the specials family
  return v;
}

// A model: any preset, or a custom one over fp16, bf16 or FP8 operands with any k, F and output.
emu::MmaModel model(std::mt19937_64& rng) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const auto& presets = emu::mma_presets();
  if (uniform(0, 2) > 0) return presets[static_cast<std::size_t>(uniform(0, static_cast<int>(presets.size()) - 1))];
  const char* names[] = {"fp16", "bf16", "fp8-e4m3", "fp8-e5m2"};
  const formats::Format a = formats::parse_format(names[uniform(0, 3)]), b = formats::parse_format(names[uniform(0, 3)]);
  const auto output = static_cast<emu::MmaOutput>(uniform(0, 2));
  const bool split = uniform(0, 1) == 1;
  const int k = uniform(1, 32) * (split ? 2 : 1);
  const formats::Format c = formats::parse_format(output == emu::MmaOutput::fp16_nearest_even ? "fp16" : "fp32");
  return emu::mma_custom(a, b, c, k, uniform(8, 40), split, output);
}

// A promotion interval for the model: none (two cases in three), else 1 to 4 instructions' products where
// mma_dot takes one (an fp32 output), so that the shapes' k (up to 96) promote several times and end with a
// partial chain.
int promotion_interval(const emu::MmaModel& m, std::mt19937_64& rng) {
  if (m.c.exponent_bits != 8 || std::uniform_int_distribution<int>(0, 2)(rng) != 0) return 0;
  return m.k * std::uniform_int_distribution<int>(1, 4)(rng);
}

struct Case {
  ops::GemmShape shape;
  std::vector<float> a, b;
  int family;
};

// Shapes up to 9 x 40 (three column tiles, the last partial) x 96, and values of one family.
Case make_case(const formats::Format& fa, const formats::Format& fb, int instruction_k, std::mt19937_64& rng) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Case c{{uniform(1, 9), uniform(1, 40), uniform(1, 96)}, {}, {}, uniform(0, kFamilies - 1)};
  c.a.resize(c.shape.a_size());
  c.b.resize(c.shape.b_size());
  for (int i = 0; i < c.shape.m; ++i)
    for (int kk = 0; kk < c.shape.k; ++kk) c.a[static_cast<std::size_t>(i) * c.shape.k + kk] = operand(fa, c.family, kk, instruction_k, rng);
  for (int kk = 0; kk < c.shape.k; ++kk)
    for (int j = 0; j < c.shape.n; ++j) {
      float& v = c.b[static_cast<std::size_t>(kk) * c.shape.n + j];
      v = operand(fb, c.family, kk, instruction_k, rng);
      // cancelling: column j's second half negates its first, over the same magnitudes of A
      if (c.family == 2 && kk >= c.shape.k / 2 && kk - c.shape.k / 2 < c.shape.k / 2)
        v = -c.b[static_cast<std::size_t>(kk - c.shape.k / 2) * c.shape.n + j];
    }
  if (c.family == 2)
    for (int i = 0; i < c.shape.m; ++i)
      for (int kk = c.shape.k / 2; kk - c.shape.k / 2 < c.shape.k / 2; ++kk)
        c.a[static_cast<std::size_t>(i) * c.shape.k + kk] = c.a[static_cast<std::size_t>(i) * c.shape.k + kk - c.shape.k / 2];
  return c;
}

using emu::detail::MmaPath;

const char* path_name(MmaPath p) {
  switch (p) {
    case MmaPath::automatic: return "automatic";
    case MmaPath::scalar: return "scalar model";
    case MmaPath::avx2: return "AVX2";
    case MmaPath::avx512: return "AVX-512";
  }
  return "?";
}

// mma_gemm's path forced for a scope (restored on a failed assertion's exception too).
struct ForcedPath {
  MmaPath previous;
  explicit ForcedPath(MmaPath p) : previous(emu::detail::force_mma_path(p)) {}
  ~ForcedPath() { emu::detail::force_mma_path(previous); }
  ForcedPath(const ForcedPath&) = delete;
  ForcedPath& operator=(const ForcedPath&) = delete;
};

// One generated case (model, promotion, family, shape) on two paths: every element's bits and all seven
// counts must be the same. Returns the elements `path`'s kernel gave (with a kernel as the reference, it
// must have given the same number).
std::size_t paths_agree(MmaPath path, MmaPath reference) {
  const std::uint64_t seed = *rc::gen::arbitrary<std::uint64_t>();  // every choice below comes from it
  std::mt19937_64 rng(seed);
  const emu::MmaModel m = model(rng);
  const bool swapped = (rng() & 1) != 0;
  const Case c = make_case(swapped ? m.b : m.a, swapped ? m.a : m.b, m.k, rng);
  const int promotion = promotion_interval(m, rng);
  std::vector<float> fast(c.shape.c_size()), slow(c.shape.c_size());
  emu::MmaCounts fast_counts, slow_counts;
  auto run = [&](MmaPath p, std::vector<float>& out, emu::MmaCounts& counts) {
    const ForcedPath forced(p);
    return emu::mma_gemm(c.shape, c.a, c.b, out, m, swapped, promotion, p != MmaPath::scalar, counts);
  };
  const std::size_t kernel = run(path, fast, fast_counts), reference_kernel = run(reference, slow, slow_counts);
  const char* const p = path_name(path);
  const char* const r = path_name(reference);
  for (std::size_t e = 0; e < fast.size(); ++e)
    PROP_ASSERT(std::bit_cast<std::uint32_t>(fast[e]) == std::bit_cast<std::uint32_t>(slow[e]), "seed ", seed, " model ",
                m.name, " promotion ", promotion, " family ", kFamilyNames[c.family], " element ", e, ": ", p, " ",
                fast[e], ", ", r, " ", slow[e]);
  PROP_ASSERT(fast_counts == slow_counts, "seed ", seed, " model ", m.name, " promotion ", promotion, " family ",
              kFamilyNames[c.family], ", ", p, " vs ", r, ": terms ",
              fast_counts.terms, " vs ", slow_counts.terms, ", truncated ", fast_counts.terms_truncated, " vs ",
              slow_counts.terms_truncated, ", shifted out ", fast_counts.terms_shifted_out, " vs ",
              slow_counts.terms_shifted_out, ", roundings ", fast_counts.roundings, " vs ", slow_counts.roundings,
              ", inexact ", fast_counts.roundings_inexact, " vs ", slow_counts.roundings_inexact, ", overflows ",
              fast_counts.overflows, " vs ", slow_counts.overflows, ", nans ", fast_counts.nans, " vs ",
              slow_counts.nans);
  if (reference != MmaPath::scalar)
    PROP_ASSERT(kernel == reference_kernel, "seed ", seed, " model ", m.name, ": ", p, " gave ", kernel, " elements, ",
                r, " ", reference_kernel);
  RC_CLASSIFY(kernel == 0, "scalar model only");
  RC_CLASSIFY(kernel > 0 && kernel < fast.size(), "kernel and scalar model");
  RC_CLASSIFY(kernel == fast.size(), "kernel only");
  RC_TAG(kFamilyNames[c.family]);
  RC_CLASSIFY(promotion > 0, "promotion");
  return kernel;
}

// The vector kernel (where this CPU has one) against the scalar model: every element's bits and every count.
RC_GTEST_PROP(MmaGemmProperties, KernelGivesTheScalarModelsBitsAndCounts, ()) {
  auto& checks = expect_checks(2000);  // elements the kernel gave, over 100 cases
  checks.count(paths_agree(MmaPath::automatic, MmaPath::scalar));  // elements the scalar model confirmed
}

// The AVX2 kernel, forced on a CPU that would choose AVX-512, against the scalar model.
TEST(MmaGemmProperties, Avx2KernelGivesTheScalarModelsBitsAndCounts) {
  if (!emu::detail::mma_path_available(MmaPath::avx2)) GTEST_SKIP() << "no AVX2, FMA and F16C on this CPU";
  EXPECT_TRUE(rc::check("the AVX2 kernel gives the scalar model's bits and counts", [] {
    auto& checks = expect_checks(2000);  // elements the AVX2 kernel gave, over 100 cases
    checks.count(paths_agree(MmaPath::avx2, MmaPath::scalar));
  }));
}

// The two kernels on the same cases: the same bits, counts and elements given (a difference in which
// elements go to the scalar model would hide behind the scalar model's equal result in the properties above).
TEST(MmaGemmProperties, Avx2AndAvx512KernelsAgree) {
  if (!emu::detail::mma_path_available(MmaPath::avx2) || !emu::detail::mma_path_available(MmaPath::avx512))
    GTEST_SKIP() << "this CPU lacks AVX2 or AVX-512: nothing to compare";
  EXPECT_TRUE(rc::check("the AVX2 and AVX-512 kernels agree", [] {
    auto& checks = expect_checks(2000);  // elements both kernels gave, over 100 cases
    checks.count(paths_agree(MmaPath::avx2, MmaPath::avx512));
  }));
}

// Through gemm_emu: the simd flag changes neither C nor any counter site (Hopper's wgmma, fp16 and bf16).
RC_GTEST_PROP(MmaGemmProperties, SimdFlagChangesNothingInGemmEmu, ()) {
  auto& checks = expect_checks(100);
  emu::GemmPolicy policy;
  std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());  // every choice below comes from this seed
  policy.input = formats::parse_format((rng() & 1) ? "fp16" : "bf16");
  policy.accumulation = emu::Accumulation::mma;
  policy.mma = emu::mma_for_architecture("hopper", policy.input, policy.input, formats::parse_format("fp32"));
  const Case c = make_case(policy.input, policy.input, policy.mma->k, rng);
  policy.promotion_interval = promotion_interval(*policy.mma, rng);
  std::vector<float> fast(c.shape.c_size()), scalar(c.shape.c_size());
  emu::CounterSet fast_counters, scalar_counters;
  emu::gemm_emu(c.shape, c.a, c.b, fast, policy, &fast_counters);
  policy.simd = false;
  emu::gemm_emu(c.shape, c.a, c.b, scalar, policy, &scalar_counters);
  for (std::size_t e = 0; e < fast.size(); ++e)
    PROP_ASSERT(std::bit_cast<std::uint32_t>(fast[e]) == std::bit_cast<std::uint32_t>(scalar[e]), "element ", e);
  PROP_ASSERT(fast_counters.sites() == scalar_counters.sites(), "family ", kFamilyNames[c.family]);
  checks.count();
}

// The typical-elements check of one path (forced by the caller).
void typical_elements(const char* path, properties::CheckCount& checks) {
  struct Run {
    const char* name;
    int promotion;  // DeepSeek-V3's 128 over k = 300: two promotions and a partial chain
  };
  for (const Run run : {Run{"sm90.wgmma.k16.f32.bf16", 0}, Run{"sm80.mma.m16n8k16.f16.f16", 0},
                        Run{"sm90.wgmma.k16.f32.f16", 128}}) {
    const std::string name = std::string(run.name) + " (" + path + ")";
    const emu::MmaModel& m = emu::mma_preset(run.name);
    const ops::GemmShape s{20, 37, run.promotion > 0 ? 300 : 100};
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal;
    std::vector<float> a(s.a_size()), b(s.b_size());
    formats::Flags flags;
    for (float& v : a) v = formats::to_float(m.a, formats::from_double(m.a, normal(rng), {}, flags), flags);
    for (float& v : b) v = formats::to_float(m.b, formats::from_double(m.b, normal(rng), {}, flags), flags);
    std::vector<float> fast(s.c_size()), scalar(s.c_size());
    emu::MmaCounts fast_counts, scalar_counts;
    EXPECT_EQ(emu::mma_gemm(s, a, b, fast, m, false, run.promotion, true, fast_counts), s.c_size()) << name;
    emu::mma_gemm(s, a, b, scalar, m, false, run.promotion, false, scalar_counts);
    EXPECT_EQ(fast, scalar) << name;
    EXPECT_EQ(fast_counts, scalar_counts) << name;
    EXPECT_GT(fast_counts.terms_truncated, 0u) << name << ": the data must exercise the truncation";
    checks.count();
  }
}

// Typical data at a benchmark-like shape: each kernel this CPU has must give (almost) every element, or the
// speed claim would be the scalar model's; and the result is still the scalar model's.
TEST(MmaGemmProperties, KernelGivesTypicalElements) {
  if (!emu::detail::mma_path_available(MmaPath::avx2) && !emu::detail::mma_path_available(MmaPath::avx512))
    GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU: the scalar model gives every element";
  auto& checks = expect_checks(3);
  for (const MmaPath path : {MmaPath::avx512, MmaPath::avx2}) {
    if (!emu::detail::mma_path_available(path)) continue;
    const ForcedPath forced(path);
    typical_elements(path_name(path), checks);
  }
}

}  // namespace
