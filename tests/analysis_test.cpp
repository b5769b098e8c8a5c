// The per-scale analysis: hand-worked fp16 cases, PyTorch's fp32 product
// (double rounding) on a crafted value, and the one-pass sweep against the
// brute-force definition on every threshold and its neighbours and on seeded
// random tensors, for several formats and scales, float and double inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "analysis/scale_stats.h"
#include "analysis/scale_sweep.h"
#include "analysis/scaled_rounding.h"
#include "analysis/threshold_counter.h"
#include "formats/format.h"
#include "record/tensor_stats.h"

namespace {

using namespace mpverify;
using analysis::ScaleStats;

const float inf = std::numeric_limits<float>::infinity();
const float nan = std::numeric_limits<float>::quiet_NaN();

ScaleStats brute(std::span<const float> x, const formats::Format& f, double scale) {
  ScaleStats s;
  s.scale = scale;
  analysis::add_brute_force(x, f, s);
  return s;
}

ScaleStats brute(std::span<const double> x, const formats::Format& f, double scale) {
  ScaleStats s;
  s.scale = scale;
  analysis::add_brute_force(x, f, s);
  return s;
}

TEST(ScaledRounding, HandWorkedFp16) {
  const formats::Format fp16 = formats::parse_format("fp16");
  // fp16: smallest subnormal 2^-24; 2^-25 is the midpoint to 0 and ties to even (0);
  // smallest normal 2^-14; largest 65504, and 65520 (midpoint to 2^16) rounds to inf.
  const std::vector<float> x = {0.0f, -0.0f, 0x1p-25f, std::nextafter(0x1p-25f, 1.0f), 0x1p-15f, 0x1p-14f,
                                65504.0f, std::nextafter(65520.0f, 0.0f), 65520.0f, -1e30f, inf, nan};
  const ScaleStats s = brute(x, fp16, 1.0);
  EXPECT_EQ(s.count, 12u);
  EXPECT_EQ(s.zeros_in, 2u);
  EXPECT_EQ(s.nan_or_inf_in, 2u);
  EXPECT_EQ(s.underflow_to_zero, 1u);  // 2^-25
  EXPECT_EQ(s.subnormal, 2u);          // nextafter(2^-25) -> 2^-24, 2^-15
  EXPECT_EQ(s.overflow, 2u);           // 65520, -1e30
  EXPECT_EQ(s.max_abs, 1e30f);
  EXPECT_EQ(s.histogram.at(-25), 2u);  // 2^-25 and its successor
  EXPECT_EQ(s.histogram.at(15), 3u);   // 65504, 65520-, 65520
  // At scale 2^-4, 2^-15 -> 2^-19 (subnormal), 2^-14 -> 2^-18 (subnormal), 2^-25 -> 2^-29 (zero),
  // 65520 -> 4095 (no overflow); -1e30 * 2^-4 still overflows.
  const ScaleStats t = brute(x, fp16, 0x1p-4);
  EXPECT_EQ(t.underflow_to_zero, 2u);
  EXPECT_EQ(t.subnormal, 2u);
  EXPECT_EQ(t.overflow, 1u);
  EXPECT_EQ(t.histogram.at(-29), 2u);
  // log2(65504 / (fl32(1e30) * 2^-4)): both sides are a few correctly rounded log2s of
  // magnitude ~80, each within an ulp (1.4e-14) of the truth; 1e-12 is 70 ulps.
  EXPECT_NEAR(t.headroom_log2(fp16), std::log2(65504.0) - std::log2(static_cast<double>(1e30f) * 0x1p-4), 1e-12);
  EXPECT_EQ(brute(std::vector<float>{65504.0f}, fp16, 0x1p-4).headroom_log2(fp16), 4.0);  // a power-of-two ratio: exact
}

TEST(ScaledRounding, ProductIsRoundedToFloatFirstAsInPyTorch) {
  const formats::Format fp16 = formats::parse_format("fp16");
  // x = 2^-25 * fl32(1/3) = 0x1.555556p-27: x * 3 = 2^-25 (1 + 2^-25) exactly, which
  // rounds to the subnormal 2^-24 in one rounding, but fl32(x * 3) = 2^-25 (a tie to
  // even at 1 + 2^-25) and then fp16's tie at 2^-25 goes to 0.
  const float x = 0x1.555556p-27f;
  ASSERT_EQ(static_cast<double>(x) * 3.0, 0x1p-25 * (1 + 0x1p-25));
  ASSERT_EQ(x * 3.0f, 0x1p-25f);
  const analysis::ScaledOutcome o = analysis::scale_and_round(x, 3.0f, fp16);
  EXPECT_TRUE(o.underflow_to_zero);
  EXPECT_FALSE(o.subnormal);
  // The exact-product recorder (record::tensor_stats) rounds once: a subnormal there.
  const record::TensorStats r = record::tensor_stats(std::span<const float>(&x, 1), fp16, 3.0);
  EXPECT_EQ(r.counters.subnormal, 1u);
  // The product can itself overflow float: 2^127 * 4 is inf in float.
  EXPECT_TRUE(analysis::scale_and_round(0x1p127f, 4.0f, formats::parse_format("bf16")).overflow);
  // A double tensor goes through float on its way to fp16, as torch's .half() of a
  // float64 tensor does: 2^-25 (1 + 2^-40) alone rounds to the subnormal 2^-24, but
  // float32 first makes it 2^-25, which ties to 0.
  EXPECT_TRUE(analysis::scale_and_round(0x1p-25 * (1 + 0x1p-40), 1.0, fp16).underflow_to_zero);
  EXPECT_TRUE(analysis::scale_and_round(0x1p-24, 1.0, fp16).subnormal);
  EXPECT_THROW(analysis::check_scale(0.1), std::invalid_argument);  // not a float value
  EXPECT_THROW(analysis::check_scale(-1), std::invalid_argument);
  EXPECT_NO_THROW(analysis::check_scale(65536));
}

TEST(ScaledRounding, AgreesWithTheRecorderForPowerOfTwoScales) {
  // Where x * S is exactly a float (power-of-two S, x normal), the fp32 product is
  // the exact product and both definitions must count alike.
  std::mt19937 rng(3);
  std::vector<float> x;
  for (int i = 0; i < 20000; ++i) {
    const float m = std::ldexp(1.0f + static_cast<float>(rng() % 1024) / 1024.0f, static_cast<int>(rng() % 80) - 50);
    x.push_back(rng() % 2 ? m : -m);
  }
  for (const char* name : {"fp16", "bf16", "fp8-e4m3", "fp8-e5m2"}) {
    const formats::Format f = formats::parse_format(name);
    for (const double scale : {1.0, 256.0, 65536.0}) {
      const ScaleStats s = brute(x, f, scale);
      const record::TensorStats r = record::tensor_stats(x, f, scale);
      EXPECT_EQ(s.underflow_to_zero, r.counters.underflow_to_zero) << name << " " << scale;
      EXPECT_EQ(s.subnormal, r.counters.subnormal) << name << " " << scale;
      EXPECT_EQ(s.overflow, r.counters.overflow) << name << " " << scale;
      EXPECT_EQ(s.histogram, r.histogram) << name << " " << scale;
    }
  }
}

TEST(ThresholdCounter, CountsBelowEachThreshold) {
  const std::vector<std::uint32_t> t = {1, 0x00100000, 0x3f800000, 0x3f800001, 0x7f800000, 0x7f800001};
  analysis::ThresholdCounter<std::uint32_t> c(t);
  // 0, -0, 2^-149, 1.0, -1.0, nextafter(1), 2, inf, nan: below 1: 2 zeros; below
  // 0x00100000 (a subnormal): + 2^-149; below 1.0: 3; below 1.0+: 5; below inf: 7; below nan: 8.
  const std::vector<float> x = {0.0f, -0.0f, 0x1p-149f, 1.0f, -1.0f, std::nextafter(1.0f, 2.0f), 2.0f, inf, nan};
  c.add_raw(reinterpret_cast<const std::byte*>(x.data()), x.size());
  EXPECT_EQ(c.below(), (std::vector<std::uint64_t>{2, 3, 3, 5, 7, 8}));
  EXPECT_EQ(c.max_finite(), std::bit_cast<std::uint32_t>(2.0f));
  EXPECT_THROW(analysis::ThresholdCounter<std::uint32_t>({5, 3}), std::invalid_argument);
  EXPECT_THROW(analysis::ThresholdCounter<std::uint32_t>({0}), std::invalid_argument);
}

// Every threshold of every scale, its neighbours, and special values.
template <class T, class Bits>
void add_boundaries(const analysis::ScaleThresholds<Bits>& t, std::vector<T>& x) {
  std::vector<Bits> ts = {t.nonzero, t.normal, t.overflow};
  ts.insert(ts.end(), t.edge.begin(), t.edge.end());
  for (const Bits b : ts)
    for (const Bits d : {Bits{0}, Bits{1}, Bits{2}}) {
      for (const Bits v : {static_cast<Bits>(b - d), static_cast<Bits>(b + d)}) {
        const T val = std::bit_cast<T>(v);
        if (!std::isnan(val)) {
          x.push_back(val);
          x.push_back(-val);
        }
      }
    }
}

TEST(ScaleSweep, EqualsBruteForceOnBoundariesAndRandomValues) {
  const std::vector<double> scales = {1.0, 8.0, 1024.0, 65536.0, 0x1p-20, 3.0, 0.75, 0x1p100};
  std::mt19937_64 rng(20261122);
  int compared = 0;
  for (const char* name : {"fp16", "bf16", "fp8-e4m3", "fp8-e5m2", "e5m7", "fp8-e4m3:saturate", "fp16:ftz"}) {
    const formats::Format f = formats::parse_format(name);
    const analysis::SweepPlan plan(f, scales);
    std::vector<float> xf = {0.0f, -0.0f, inf, -inf, nan, 0x1p-149f, std::numeric_limits<float>::max(), 1.0f};
    std::vector<double> xd = {0.0, -0.0, 1e-320, 1e300, std::numeric_limits<double>::infinity(), 1.0};
    for (const double s : scales) {
      add_boundaries(analysis::float_thresholds(f, static_cast<float>(s)), xf);
      add_boundaries(analysis::double_thresholds(f, s), xd);
    }
    for (int i = 0; i < 20000; ++i) {
      xf.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));  // every exponent, NaNs included
      const double m = std::ldexp(1.0 + static_cast<double>(rng() % 4096) / 4096.0, static_cast<int>(rng() % 120) - 80);
      xf.push_back(static_cast<float>(rng() % 2 ? m : -m));                    // the range gradients live in
      xd.push_back(rng() % 2 ? m : -m);
    }
    analysis::ScaleSweep sweep(plan);
    sweep.add(std::span<const float>(xf).first(xf.size() / 2));  // in two chunks, as files stream
    sweep.add(std::span<const float>(xf).subspan(xf.size() / 2));
    const std::vector<ScaleStats> fast = sweep.results();
    analysis::ScaleSweep dsweep(plan);
    dsweep.add(xd);
    const std::vector<ScaleStats> dfast = dsweep.results();
    ASSERT_EQ(fast.size(), scales.size());
    for (std::size_t i = 0; i < scales.size(); ++i) {
      EXPECT_EQ(fast[i], brute(xf, f, scales[i])) << name << " scale " << scales[i];
      EXPECT_EQ(dfast[i], brute(xd, f, scales[i])) << name << " scale " << scales[i] << " (double)";
      compared += 2;
    }
    // Some of every category occur, so the comparison means something.
    const ScaleStats& one = fast[0];
    EXPECT_GT(one.underflow_to_zero, 0u) << name;
    EXPECT_GT(one.overflow, 0u) << name;
    EXPECT_GT(one.nan_or_inf_in, 0u) << name;
    if (f.subnormals) {
      EXPECT_GT(one.subnormal, 0u) << name;
    }
  }
  EXPECT_EQ(compared, 7 * 8 * 2);
}

// Thresholds that split bins in every way the counter distinguishes: twenty
// inside bin 0 (float subnormals, as the exponent-bin edges of scale 1 are),
// several inside the bin of 1.0, bin boundaries (not split), the largest
// finite value, infinity and the NaNs.
std::vector<std::uint32_t> awkward_float_thresholds() {
  std::vector<std::uint32_t> t;
  for (std::uint32_t p = 1; p <= 21; ++p) t.push_back(p);
  for (const std::uint32_t p : {0x00100000u, 0x3f800000u, 0x3f800001u, 0x3f800002u, 0x3f87ffffu, 0x3f900000u,
                                0x40000000u, 0x40012345u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u, 0x7fc00000u})
    t.push_back(p);
  return t;
}

// Seeded float32 bit patterns: any pattern (NaNs and infinities included),
// each threshold and its neighbours with either sign, zeros of both signs,
// tiny subnormals, and values near 1.
std::vector<std::uint32_t> awkward_float_values(std::size_t n, std::uint64_t seed) {
  const std::vector<std::uint32_t> t = awkward_float_thresholds();
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> x(n);
  for (std::uint32_t& v : x) {
    const std::uint32_t sign = rng() % 2 ? 0x80000000u : 0u;
    switch (rng() % 6) {
      case 0: v = static_cast<std::uint32_t>(rng()); break;
      case 1: v = sign | (t[rng() % t.size()] + static_cast<std::uint32_t>(rng() % 3) - 1u); break;
      case 2: v = sign; break;
      case 3: v = sign | static_cast<std::uint32_t>(rng() % 40); break;
      case 4: v = sign | static_cast<std::uint32_t>(0x3f800000u + rng() % 0x200000u - 0x100000u); break;
      default: v = sign | (0x7f800000u + static_cast<std::uint32_t>(rng() % 4)); break;  // inf or NaN
    }
  }
  return x;
}

template <class Bits>
std::vector<std::uint64_t> brute_below(const std::vector<Bits>& values, const std::vector<Bits>& thresholds) {
  constexpr Bits magnitude = static_cast<Bits>(~Bits{0} >> 1);
  std::vector<std::uint64_t> out;
  for (const Bits t : thresholds) {
    std::uint64_t c = 0;
    for (const Bits v : values) c += (v & magnitude) < t;
    out.push_back(c);
  }
  return out;
}

std::uint32_t brute_max_finite(const std::vector<std::uint32_t>& values) {
  std::uint32_t mx = 0;
  for (const std::uint32_t v : values)
    if ((v & 0x7fffffffu) < 0x7f800000u) mx = std::max(mx, v & 0x7fffffffu);
  return mx;
}

// Lengths around the vector width (16) and the block (4096), fed in two
// uneven pieces, so that tails and block ends are crossed on both paths.
const std::vector<std::size_t> awkward_lengths = {0, 1, 15, 16, 17, 31, 33, 4095, 4096, 4097, 8192 + 16 + 7, 20011};

std::vector<analysis::ScanPath> float_paths() {
  std::vector<analysis::ScanPath> p = {analysis::ScanPath::portable};
  if (analysis::cpu_has_avx512_scan()) p.push_back(analysis::ScanPath::avx512);
  return p;
}

TEST(ThresholdCounter, EachScanPathEqualsBruteForceAcrossTailsAndSplitBins) {
  const std::vector<std::uint32_t> t = awkward_float_thresholds();
  for (const std::size_t n : awkward_lengths) {
    const std::vector<std::uint32_t> x = awkward_float_values(n, 7 + n);
    const std::vector<std::uint64_t> expected = brute_below(x, t);
    for (const analysis::ScanPath path : float_paths())
      for (const analysis::BinLayout layout : {analysis::BinLayout::automatic, analysis::BinLayout::coarse}) {
        analysis::ThresholdCounter<std::uint32_t> c(t, path, layout);
        ASSERT_EQ(c.path(), path);
        // the awkward thresholds' fraction fields at or above the smallest
        // normal take 8 values: 0, 1, 2, 0x12345, 0x7ffff, 0x100000, 0x400000, 0x7fffff
        ASSERT_EQ(c.aligned(), layout == analysis::BinLayout::automatic);
        const std::size_t first = n / 3 + (n % 2);
        c.add_raw(reinterpret_cast<const std::byte*>(x.data()), first);
        c.add_raw(reinterpret_cast<const std::byte*>(x.data() + first), n - first);
        const std::string what = "n " + std::to_string(n) + " path " + std::to_string(static_cast<int>(path)) +
                                 (c.aligned() ? " aligned" : " coarse");
        EXPECT_EQ(c.count(), n);
        EXPECT_EQ(c.below(), expected) << what;
        EXPECT_EQ(c.max_finite(), brute_max_finite(x)) << what;
      }
  }
}

TEST(ThresholdCounter, AllZerosAndAllNonFinite) {
  const std::vector<std::uint32_t> t = awkward_float_thresholds();
  for (const analysis::ScanPath path : float_paths())
  for (const analysis::BinLayout layout : {analysis::BinLayout::automatic, analysis::BinLayout::coarse}) {
    std::vector<std::uint32_t> zeros(4133);
    for (std::size_t i = 0; i < zeros.size(); i += 2) zeros[i] = 0x80000000u;  // -0 too
    analysis::ThresholdCounter<std::uint32_t> z(t, path, layout);
    z.add_raw(reinterpret_cast<const std::byte*>(zeros.data()), zeros.size());
    EXPECT_EQ(z.below(), std::vector<std::uint64_t>(t.size(), zeros.size()));  // 0 lies below every threshold
    EXPECT_EQ(z.max_finite(), 0u);

    const std::vector<std::uint32_t> nonfinite = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffffffffu, 0x7f800001u};
    std::vector<std::uint32_t> x;
    for (int i = 0; i < 1000; ++i) x.push_back(nonfinite[static_cast<std::size_t>(i) % nonfinite.size()]);
    analysis::ThresholdCounter<std::uint32_t> c(t, path, layout);
    c.add_raw(reinterpret_cast<const std::byte*>(x.data()), x.size());
    EXPECT_EQ(c.max_finite(), 0u);  // no finite value seen
    const std::vector<std::uint64_t> below = c.below();
    // Thresholds ..., 0x7f800000 (inf), 0x7f800001, 0x7fc00000: 400 infinities, then 200
    // at 0x7f800001 (below 0x7fc00000), 400 at or above 0x7fc00000.
    ASSERT_EQ(below.size(), t.size());
    EXPECT_EQ(below[t.size() - 4], 0u);
    EXPECT_EQ(below[t.size() - 3], 0u);
    EXPECT_EQ(below[t.size() - 2], 400u);
    EXPECT_EQ(below[t.size() - 1], 600u);
  }
}

// One block scan's inputs and outputs for both paths (portable _p, AVX-512
// _v): m awkward values, room for the bins and the side list (+ 16: whole
// vector stores), and a maximum carried in from earlier blocks.
struct ScanCase {
  std::vector<std::uint32_t> x;
  std::vector<std::uint16_t> bin_p, bin_v;
  std::vector<std::uint32_t> side_p, side_v;
  std::uint32_t max_p = 5, max_v = 5;
  ScanCase(std::size_t m, std::uint64_t seed)
      : x(awkward_float_values(m, seed)), bin_p(m + 1), bin_v(m + 1), side_p(m + 16), side_v(m + 16) {}
  const std::byte* in() const { return reinterpret_cast<const std::byte*>(x.data()); }
};

// The rule for SIMD kernels: the AVX-512 scan and its portable twin give the
// same bins, the same side list in the same order and the same maximum.
TEST(ThresholdCounter, Avx512ScanEqualsPortableBitForBit) {
  if (!analysis::cpu_has_avx512_scan()) GTEST_SKIP() << "this CPU has no AVX-512";
  using C = analysis::ThresholdCounter<std::uint32_t>;
  // Split bins from the awkward thresholds: 0 (inside: 2..21), 0x3f8, 0x400, 0x7f7, 0x7f8 (0x7f800001).
  std::vector<std::uint32_t> split_bits((C::bins + 1 + 31) / 32);
  for (const std::size_t b : {0u, 0x3f8u, 0x400u, 0x7f7u, 0x7f8u, 0x7fcu}) split_bits[b / 32] |= 1u << (b % 32);
  std::size_t total_side = 0;
  for (const std::size_t m : {0u, 1u, 15u, 16u, 17u, 47u, 1000u, 4096u}) {
    ScanCase sc(m, 100 + m);
    const std::size_t kp = analysis::detail::scan_block_portable<std::uint32_t>(
        sc.in(), m, split_bits.data(), sc.bin_p.data(), sc.side_p.data(), sc.max_p);
    const std::size_t kv = analysis::detail::scan_block_f32_avx512(sc.in(), m, split_bits.data(), sc.bin_v.data(),
                                                                   sc.side_v.data(), sc.max_v);
    ASSERT_EQ(kp, kv) << m;
    EXPECT_EQ(sc.bin_p, sc.bin_v) << m;
    EXPECT_TRUE(std::equal(sc.side_p.begin(), sc.side_p.begin() + static_cast<std::ptrdiff_t>(kp), sc.side_v.begin()))
        << m;
    EXPECT_EQ(sc.max_p, sc.max_v) << m;
    EXPECT_EQ(sc.max_p, std::max(5u, brute_max_finite(sc.x))) << m;
    // Independently of both: the side list holds exactly the non-zero magnitudes in split bins.
    std::vector<std::uint32_t> want;
    for (std::size_t i = 0; i < m; ++i) {
      const std::uint32_t a = sc.x[i] & 0x7fffffffu;
      EXPECT_EQ(sc.bin_p[i], a == 0 ? C::bins : a >> C::shift) << m << " " << i;
      if (a != 0 && ((split_bits[(a >> C::shift) / 32] >> ((a >> C::shift) % 32)) & 1u)) want.push_back(a);
    }
    EXPECT_EQ(std::vector<std::uint32_t>(sc.side_p.begin(), sc.side_p.begin() + static_cast<std::ptrdiff_t>(kp)), want)
        << m;
    total_side += kp;
  }
  EXPECT_GT(total_side, 100u);  // the side list was exercised
}

// The aligned scan: AVX-512 and portable give the same bins, histogram, side
// list and maximum, and both give what the layout says, worked out here directly.
TEST(ThresholdCounter, AlignedScanEqualsPortableAndTheLayout) {
  const std::vector<std::uint32_t> cuts = {0, 1, 2, 0x12345, 0x7fffff};  // 5 cuts: 8 bins per binade
  const int cut_log2 = 3;
  std::size_t total_side = 0;
  for (const std::size_t m : {0u, 1u, 15u, 16u, 17u, 47u, 1000u, 4096u}) {
    ScanCase sc(m, 300 + m);
    const std::size_t stride = 2049;
    std::vector<std::uint64_t> hist_p(4 * stride, 1), hist_v(4 * stride, 1);  // counts carried in from earlier blocks
    const std::size_t kp = analysis::detail::scan_block_aligned_portable(
        sc.in(), m, cuts.data(), 5, cut_log2, sc.bin_p.data(), {hist_p.data(), stride}, sc.side_p.data(), sc.max_p);
    std::vector<std::uint64_t> want_hist(4 * stride, 1);
    for (std::size_t i = 0; i < m; ++i) ++want_hist[(i % 4) * stride + sc.bin_p[i]];
    EXPECT_EQ(hist_p, want_hist) << m;
    std::vector<std::uint32_t> want_side;
    for (std::size_t i = 0; i < m; ++i) {
      const std::uint32_t a = sc.x[i] & 0x7fffffffu, e = a >> 23, f = a & 0x7fffffu;
      const std::uint32_t cut = f == 0 ? 0 : f == 1 ? 1 : f < 0x12345 ? 2 : f < 0x7fffff ? 3 : 4;
      EXPECT_EQ(sc.bin_p[i], (e << cut_log2) + cut) << m << " " << i;
      if (a != 0 && e == 0) want_side.push_back(a);
    }
    EXPECT_EQ(std::vector<std::uint32_t>(sc.side_p.begin(), sc.side_p.begin() + static_cast<std::ptrdiff_t>(kp)),
              want_side);
    EXPECT_EQ(sc.max_p, std::max(5u, brute_max_finite(sc.x))) << m;
    total_side += kp;
    if (!analysis::cpu_has_avx512_scan()) continue;
    const std::size_t kv = analysis::detail::scan_block_aligned_f32_avx512(
        sc.in(), m, cuts.data(), 5, cut_log2, sc.bin_v.data(), {hist_v.data(), stride}, sc.side_v.data(), sc.max_v);
    ASSERT_EQ(kp, kv) << m;
    EXPECT_EQ(sc.bin_p, sc.bin_v) << m;
    EXPECT_EQ(hist_p, hist_v) << m;
    EXPECT_TRUE(std::equal(sc.side_p.begin(), sc.side_p.begin() + static_cast<std::ptrdiff_t>(kp), sc.side_v.begin()))
        << m;
    EXPECT_EQ(sc.max_p, sc.max_v) << m;
  }
  EXPECT_GT(total_side, 100u);  // the side list (subnormals) was exercised
}

// Nine fraction values: the aligned layout would need 16 bins per binade,
// so the counter keeps the coarse one, and still counts right.
TEST(ThresholdCounter, TooManyFractionValuesKeepTheCoarseLayout) {
  std::vector<std::uint32_t> t;
  for (std::uint32_t f = 0; f < 7; ++f) t.push_back(0x3f800000u + 3 * f);  // 0, 3, ..., 18
  t.push_back(0x40000005u);                                                // with 0 and 1: nine
  analysis::ThresholdCounter<std::uint32_t> c(t);
  EXPECT_FALSE(c.aligned());
  t.pop_back();
  EXPECT_TRUE(analysis::ThresholdCounter<std::uint32_t>(t).aligned());
  t.push_back(0x40000005u);
  const std::vector<std::uint32_t> x = awkward_float_values(5000, 17);
  c.add_raw(reinterpret_cast<const std::byte*>(x.data()), x.size());
  EXPECT_EQ(c.below(), brute_below(x, t));
}

TEST(ThresholdCounter, DoubleEqualsBruteForceAndRefusesAvx512) {
  // Thresholds inside double bin 0 and inside the bin of 1.0, and infinity.
  const std::vector<std::uint64_t> t = {1, 2, 3, 0x3ff0000000000000ull, 0x3ff0000000000001ull, 0x3ff0000000001000ull,
                                        0x7ff0000000000000ull, 0x7ff0000000000001ull};
  std::mt19937_64 rng(11);
  std::vector<std::uint64_t> x;
  for (int i = 0; i < 5003; ++i) {
    const std::uint64_t sign = rng() % 2 ? 0x8000000000000000ull : 0;
    const std::uint64_t pick = t[rng() % t.size()] + rng() % 3 - 1;
    x.push_back(sign | (rng() % 4 == 0 ? rng() >> 1 : rng() % 4 == 0 ? 0 : pick));
  }
  analysis::ThresholdCounter<std::uint64_t> c(t);
  EXPECT_EQ(c.path(), analysis::ScanPath::portable);
  c.add_raw(reinterpret_cast<const std::byte*>(x.data()), x.size());
  EXPECT_EQ(c.below(), brute_below(x, t));
  EXPECT_THROW(analysis::ThresholdCounter<std::uint64_t>(t, analysis::ScanPath::avx512), std::invalid_argument);
}

// A large add_raw split between threads counts the same as one thread, and
// as the definition; the parts end inside blocks and vectors (odd length).
TEST(ThresholdCounter, ThreadsCountTheSame) {
  using C = analysis::ThresholdCounter<std::uint32_t>;
  const std::vector<std::uint32_t> t = awkward_float_thresholds();
  const std::vector<std::uint32_t> x = awkward_float_values(3 * C::min_per_thread + 4096 + 123, 99);
  const std::vector<std::uint64_t> expected = brute_below(x, t);
  for (const std::size_t threads : {1u, 2u, 3u, 4u})
  for (const analysis::BinLayout layout : {analysis::BinLayout::automatic, analysis::BinLayout::coarse}) {
    C c(t, analysis::ScanPath::automatic, layout);
    c.set_threads(threads);
    c.add_raw(reinterpret_cast<const std::byte*>(x.data()), x.size());
    EXPECT_EQ(c.count(), x.size());
    EXPECT_EQ(c.below(), expected) << threads << " threads";
    EXPECT_EQ(c.max_finite(), brute_max_finite(x)) << threads << " threads";
  }
  C c(t);
  EXPECT_THROW(c.set_threads(0), std::invalid_argument);
}

}  // namespace
