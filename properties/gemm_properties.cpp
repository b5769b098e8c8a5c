// Properties of the emulated GEMM: exactness on integer inputs, the
// tensor-core model's reduction to fp32 accumulation, the size of the
// effect of summation order, and the fp16- and fp32-accumulation tiles'
// agreement with the portable loop on adversarial inputs.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <vector>

#include "check_count.h"
#include "emu/counters.h"
#include "emu/gemm_emu.h"
#include "emu/quantize.h"
#include "refs/gemm_ref.h"

namespace {

using namespace mpverify;
using emu::Accumulation;
using mpverify::properties::expect_checks;
using ops::GemmShape;

rc::Gen<GemmShape> small_shape(int max_k) {
  return rc::gen::apply([](int m, int n, int k, bool ta, bool tb) { return GemmShape{m, n, k, ta, tb}; },
                        rc::gen::inRange(1, 9), rc::gen::inRange(1, 9), rc::gen::inRange(1, max_k + 1),
                        rc::gen::arbitrary<bool>(), rc::gen::arbitrary<bool>());
}

// fp16 values over a wide exponent range (2^-12..2^12 times [-4, 4]), so that
// products in one dot product differ by many binades.
std::vector<float> fp16_normals(std::size_t n) {
  auto values = *rc::gen::container<std::vector<double>>(
      n, rc::gen::apply([](int v, int e) { return std::ldexp(v / 1000.0, e); }, rc::gen::inRange(-4000, 4001),
                        rc::gen::inRange(-12, 13)));
  std::vector<float> out(values.begin(), values.end());
  emu::quantize(out, out, emu::QuantizeSpec{formats::parse_format("fp16")});
  return out;
}

// Integers in [-8, 8] and k <= 32: every product (|p| <= 64) and every partial
// sum (|s| <= 2048) is an integer that fp16 and fp32 hold exactly, so the
// fp16-input / fp32-accumulate GEMM equals the FP32 reference exactly, in any
// summation order (Eigen's is blocked).
RC_GTEST_PROP(GemmProperties, IntegerInputsGiveTheExactProduct, ()) {
  auto& checks = expect_checks(100);
  const GemmShape s = *small_shape(32);
  auto integers = [](std::size_t n) {
    const auto v = *rc::gen::container<std::vector<int>>(n, rc::gen::inRange(-8, 9));
    return std::vector<float>(v.begin(), v.end());
  };
  const auto a = integers(s.a_size()), b = integers(s.b_size());
  std::vector<float> ref(s.c_size()), c(s.c_size());
  refs::gemm_ref(s, a, b, ref);
  emu::GemmPolicy policy;
  policy.accumulation = *rc::gen::element(Accumulation::fp32, Accumulation::fp16, Accumulation::tensor_core);
  emu::gemm_emu(s, a, b, c, policy);
  RC_ASSERT(c == ref);
  checks.count();
}

// With blocks of one product, round-to-nearest and alignment keeping 24 + 28
// bits, the tensor-core model is an fp32 FMA per step: a term far enough
// below the other to lose bits at the alignment (below 2^-28 of it) is below
// a quarter of an fp32 ulp of the larger, and 28 extra bits keep every bit of
// a term that could decide a tie, so the single RNE rounding of the block sum
// equals fl32(c + a*b). Hence bit-identical to the fp32-accumulation model.
RC_GTEST_PROP(GemmProperties, TensorCoreWithBlockOneAndRneIsFp32Accumulation, ()) {
  auto& checks = expect_checks(100);
  const GemmShape s = *small_shape(64);
  const auto a = fp16_normals(s.a_size()), b = fp16_normals(s.b_size());
  std::vector<float> plain(s.c_size()), tc(s.c_size());
  emu::GemmPolicy policy;
  policy.accumulation = Accumulation::fp32;
  emu::gemm_emu(s, a, b, plain, policy);
  policy.accumulation = Accumulation::tensor_core;
  policy.tensor_core = {1, 28, formats::Rounding::nearest_even};
  emu::gemm_emu(s, a, b, tc, policy);
  RC_ASSERT(tc == plain);
  checks.count();
}

// Permuting the k dimension changes an fp32-accumulated result, but each
// order is within gamma_k (|A||B|)_ij of the exact value (Higham 3.13), so two
// orders differ by at most 2 gamma_k (|A||B|)_ij.
RC_GTEST_PROP(GemmProperties, PermutingKStaysWithinTheBound, ()) {
  auto& checks = expect_checks(100);
  const int m = *rc::gen::inRange(1, 6), n = *rc::gen::inRange(1, 6), k = *rc::gen::inRange(2, 200);
  const GemmShape s{m, n, k};
  const auto a = fp16_normals(s.a_size()), b = fp16_normals(s.b_size());
  std::vector<int> order(static_cast<std::size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  const auto shuffled = *rc::gen::container<std::vector<int>>(static_cast<std::size_t>(k), rc::gen::arbitrary<int>());
  std::sort(order.begin(), order.end(), [&](int x, int y) { return shuffled[x] < shuffled[y] || (shuffled[x] == shuffled[y] && x < y); });
  std::vector<float> pa(a.size()), pb(b.size());
  for (int i = 0; i < m; ++i)
    for (int kk = 0; kk < k; ++kk) pa[static_cast<std::size_t>(i) * k + kk] = a[static_cast<std::size_t>(i) * k + order[kk]];
  for (int kk = 0; kk < k; ++kk)
    for (int j = 0; j < n; ++j) pb[static_cast<std::size_t>(kk) * n + j] = b[static_cast<std::size_t>(order[kk]) * n + j];
  std::vector<float> c(s.c_size()), cp(s.c_size());
  emu::GemmPolicy policy;
  emu::gemm_emu(s, a, b, c, policy);
  emu::gemm_emu(s, pa, pb, cp, policy);
  const double u = 0x1p-24, gamma = k * u / (1 - k * u);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double abs_ab = 0;
      for (int kk = 0; kk < k; ++kk)
        abs_ab += std::fabs(static_cast<double>(a[static_cast<std::size_t>(i) * k + kk]) * b[static_cast<std::size_t>(kk) * n + j]);
      const std::size_t ij = static_cast<std::size_t>(i) * n + j;
      RC_ASSERT(std::fabs(static_cast<double>(c[ij]) - cp[ij]) <= 2 * gamma * abs_ab);
    }
  RC_CLASSIFY(c != cp, "order changed the result");
  checks.count();
}

// fp16 values for the tiles' property, one family per case, each aimed at a
// branch of the tile's step: any finite fp16 (subnormals, overflow to inf and
// on to NaN through inf - inf), small integers (exact sums, ties past 2048,
// fp16 midpoints), few significant bits (midpoints), ReLU-like zeros of
// either sign (the zero-factor test), values near 2^-7 (sums around 2^-14),
// and a mix of tiny and large values (swamping). No NaN input: which NaN a
// NaN operand propagates may differ (README, "The emulated GEMM").
std::vector<float> tile_inputs(int family, std::size_t n) {
  auto fp16_bits = [](int exponent_lo, int exponent_hi) {
    return rc::gen::apply(
        [](bool negative, int exponent, int fraction) {
          const double magnitude =
              exponent == 0 ? std::ldexp(fraction, -24) : std::ldexp(1024 + fraction, exponent - 25);
          return static_cast<float>(negative ? -magnitude : magnitude);
        },
        rc::gen::arbitrary<bool>(), rc::gen::inRange(exponent_lo, exponent_hi + 1), rc::gen::inRange(0, 1024));
  };
  auto signed_zero = rc::gen::element(0.0f, -0.0f);
  switch (family) {
    case 0: return *rc::gen::container<std::vector<float>>(n, fp16_bits(0, 30));
    case 1: return *rc::gen::container<std::vector<float>>(n, rc::gen::map(rc::gen::inRange(-64, 65), [](int v) {
                     return static_cast<float>(v);
                   }));
    case 2: return *rc::gen::container<std::vector<float>>(n, rc::gen::apply([](int m, int e) {
                     return static_cast<float>(std::ldexp(m, e));
                   }, rc::gen::inRange(-7, 8), rc::gen::inRange(-12, 4)));
    case 3: return *rc::gen::container<std::vector<float>>(
        n, rc::gen::weightedOneOf<float>({{1, signed_zero}, {1, fp16_bits(10, 18)}}));
    case 4: return *rc::gen::container<std::vector<float>>(n, fp16_bits(7, 9));
    default: return *rc::gen::container<std::vector<float>>(
        n, rc::gen::weightedOneOf<float>({{4, fp16_bits(1, 12)}, {1, fp16_bits(20, 26)}}));
  }
}

// One GEMM three ways, as float bits: the SIMD tiles with counters, without, and the portable loop (simd off)
// with counters.
struct ThreeWays {
  std::vector<std::uint32_t> tiles, uncounted, portable;
  emu::CounterSet tile_counts, portable_counts;
};

ThreeWays three_ways(const GemmShape& s, const std::vector<float>& a, const std::vector<float>& b,
                     emu::GemmPolicy policy) {
  auto bits = [](const std::vector<float>& v) {
    std::vector<std::uint32_t> out(v.size());
    std::transform(v.begin(), v.end(), out.begin(), [](float x) { return std::bit_cast<std::uint32_t>(x); });
    return out;
  };
  ThreeWays r;
  std::vector<float> c(s.c_size());
  emu::gemm_emu(s, a, b, c, policy, &r.tile_counts);
  r.tiles = bits(c);
  emu::gemm_emu(s, a, b, c, policy);
  r.uncounted = bits(c);
  policy.simd = false;
  emu::gemm_emu(s, a, b, c, policy, &r.portable_counts);
  r.portable = bits(c);
  return r;
}

// The AVX-512 fp16-accumulation tiles (counted and uncounted) against the
// portable loop: the same bits and the same counts, on shapes that give whole
// tiles (4 x 32) and remainders. On a CPU without AVX-512 both sides are the
// portable loop and the property holds trivially.
RC_GTEST_PROP(GemmProperties, Fp16TilesEqualThePortableLoop, ()) {
  auto& checks = expect_checks(100);
  const GemmShape s{*rc::gen::inRange(4, 14), *rc::gen::inRange(32, 80), *rc::gen::inRange(1, 300)};
  const int family_a = *rc::gen::inRange(0, 6), family_b = *rc::gen::inRange(0, 6);
  const auto a = tile_inputs(family_a, s.a_size()), b = tile_inputs(family_b, s.b_size());
  emu::GemmPolicy policy;
  policy.accumulation = Accumulation::fp16;
  const ThreeWays r = three_ways(s, a, b, policy);
  RC_ASSERT(r.tiles == r.portable);
  RC_ASSERT(r.uncounted == r.portable);
  const emu::CounterSet &tile_counts = r.tile_counts, &portable_counts = r.portable_counts;
  RC_ASSERT(*tile_counts.find("gemm.accumulate") == *portable_counts.find("gemm.accumulate"));
  RC_CLASSIFY(portable_counts.find("gemm.accumulate")->swamped > 0, "swamping");
  RC_CLASSIFY(portable_counts.find("gemm.accumulate")->subnormal > 0, "subnormal results");
  checks.count();
}

// The AVX-512 fp32-accumulation tiles (counted and uncounted) against the
// portable loop: the same bits and the same "gemm.accumulate" counts, on the
// fp16 families above, taken as fp32 inputs scaled so that products also
// overflow fp32 (2^60: from 2^120 up), inputs become infinite (2^125: from
// 8 up; then inf * 0 and inf - inf make NaN) or products fall below 2^-149
// (2^-70); the last three send tiles to their exact step. Tiles of 8 x 32
// and remainders. Then the same with each step's inexact counted
// (count_step_inexact): again the same bits and counts both ways, and only
// inexact differs from the counts without it (0 there).
RC_GTEST_PROP(GemmProperties, Fp32TilesEqualThePortableLoop, ()) {
  auto& checks = expect_checks(100);
  const GemmShape s{*rc::gen::inRange(8, 20), *rc::gen::inRange(32, 80), *rc::gen::inRange(1, 300)};
  const int family_a = *rc::gen::inRange(0, 6), family_b = *rc::gen::inRange(0, 6);
  auto a = tile_inputs(family_a, s.a_size()), b = tile_inputs(family_b, s.b_size());
  const auto scale = rc::gen::element(1.0f, 0x1p60f, 0x1p125f, 0x1p-70f);
  const float scale_a = *scale, scale_b = *scale;
  for (auto& x : a) x *= scale_a;  // a power of two: exact, or inf beyond fp32's range
  for (auto& x : b) x *= scale_b;
  emu::GemmPolicy policy;
  policy.accumulation = Accumulation::fp32;
  policy.input = formats::parse_format("fp32");
  const ThreeWays r = three_ways(s, a, b, policy);
  RC_ASSERT(r.tiles == r.portable);
  RC_ASSERT(r.uncounted == r.portable);
  const emu::CounterSet &tile_counts = r.tile_counts, &portable_counts = r.portable_counts;
  const emu::Counters& p = *portable_counts.find("gemm.accumulate");
  RC_ASSERT(*tile_counts.find("gemm.accumulate") == p);
  RC_ASSERT(p.elements == static_cast<std::uint64_t>(s.m) * s.n * s.k);
  RC_ASSERT(p.inexact == 0u);
  policy.count_step_inexact = true;
  const ThreeWays ri = three_ways(s, a, b, policy);
  RC_ASSERT(ri.tiles == r.portable);
  RC_ASSERT(ri.uncounted == r.portable);
  RC_ASSERT(ri.portable == r.portable);
  const emu::Counters& pi = *ri.portable_counts.find("gemm.accumulate");
  RC_ASSERT(*ri.tile_counts.find("gemm.accumulate") == pi);
  emu::Counters rest = pi;
  rest.inexact = 0;
  RC_ASSERT(rest == p);
  RC_CLASSIFY(pi.inexact > 0 && pi.inexact < pi.elements, "some steps inexact, some exact");
  RC_CLASSIFY(p.swamped > 0, "swamping");
  RC_CLASSIFY(p.overflow > 0, "overflow");
  RC_CLASSIFY(p.nan_created > 0, "NaN created");
  RC_CLASSIFY(scale_a * scale_b < 0x1p-100f, "products below 2^-149");
  checks.count();
}

}  // namespace
