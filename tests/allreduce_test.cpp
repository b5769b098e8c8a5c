// The all-reduce orders (collective/allreduce.h) held against a transcription
// of their definitions written here: its own rounding to a format (exact
// double arithmetic and nearbyint on the scaled value, or integer division
// for quotients), its own chunk sizes (numpy.array_split's rule), a tree
// built as lists of level sums. Inputs are kept where every sum of two
// format values is exact in double (checked), so each addition of the
// transcription is one correct rounding. Also: the fast block kernel against
// the emulator's generic routines (bits and counters, special values
// included), hand-worked swamping cases, the exact sum, FSDP's factors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "collective/allreduce.h"
#include "collective/exact_sum.h"
#include "collective/synthetic.h"
#include "formats/format.h"

namespace {

using namespace mpverify;
using collective::Algorithm;
using collective::Divide;
using formats::Format;

// --- the transcription's arithmetic ------------------------------------------

// x rounded to nearest-even in f (exact for any double x): the quantum of x's
// binade (the subnormal spacing below the normal range), x scaled to it,
// nearbyint under the default rounding mode. Beyond the largest finite value:
// infinity for IEEE formats (the tests keep other formats below it).
double ref_round(double x, const Format& f) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e = std::max(std::ilogb(x), f.emin());
  const double quantum = std::ldexp(1.0, e - f.mantissa_bits);
  const double r = std::nearbyint(x / quantum) * quantum;
  if (std::fabs(r) > f.max_finite()) {
    EXPECT_TRUE(f.has_infinity()) << "the test keeps " << f.name << " below its largest value";
    return std::copysign(std::numeric_limits<double>::infinity(), r);
  }
  return r;
}

// q / d rounded to nearest-even in f, by integer division: |q| = M * 2^E.
double ref_round_quotient(double q, std::uint64_t d, const Format& f) {
  if (q == 0) return q;
  int ex = 0;
  const double fr = std::frexp(std::fabs(q), &ex);
  const auto M = static_cast<std::uint64_t>(std::ldexp(fr, 53));
  const int E = ex - 53;
  const double dd = static_cast<double>(d);
  int e = std::ilogb(q) - std::ilogb(dd);  // 2^e <= |q| / d < 2^(e+1), by exact comparisons
  while (std::ldexp(dd, e + 1) <= std::fabs(q)) ++e;
  while (std::ldexp(dd, e) > std::fabs(q)) --e;
  const int k = std::max(e, f.emin()) - f.mantissa_bits;  // the quantum 2^k
  __extension__ using u128 = unsigned __int128;
  u128 num = M, den = d;
  if (E - k >= 0) num <<= (E - k);
  else den <<= (k - E);
  u128 t = num / den;
  const u128 rem = num % den;
  if (2 * rem > den || (2 * rem == den && (t & 1))) ++t;
  return std::copysign(std::ldexp(static_cast<double>(t), k), q);
}

// The exact sum of two format values, checked exact in double.
double exact_sum(double a, double b) {
  const double s = a + b;
  EXPECT_TRUE(!std::isfinite(s) || (s - a == b && s - b == a)) << a << " + " << b << " is not exact in double";
  return s;
}

struct RefCounts {
  std::uint64_t additions = 0, inexact = 0, updates = 0, swamped = 0, input_inexact = 0;
};

struct Reference {
  const Format& f;
  RefCounts counts;
  double input(float x) {
    const double q = ref_round(x, f);
    counts.input_inexact += q != x;
    return q;
  }
  double add(double w, double u) {  // fl(w + u), w the partial sum
    const double exact = exact_sum(w, u);
    const double r = ref_round(exact, f);
    ++counts.additions;
    counts.inexact += r != exact;
    counts.updates += u != 0;
    counts.swamped += u != 0 && w != 0 && r == w;
    return r;
  }
};

// numpy.array_split: the first n % N pieces have one more element.
std::vector<std::size_t> split_starts(std::size_t n, std::size_t N) {
  std::vector<std::size_t> starts{0};
  for (std::size_t c = 0; c < N; ++c) starts.push_back(starts.back() + n / N + (c < n % N ? 1 : 0));
  return starts;
}

std::vector<double> ref_ring(const std::vector<float>& x, std::size_t N, std::size_t n, std::size_t first_offset,
                             Reference& ref) {
  std::vector<double> out(n);
  const std::vector<std::size_t> starts = split_starts(n, N);
  for (std::size_t c = 0; c < N; ++c)
    for (std::size_t i = starts[c]; i < starts[c + 1]; ++i) {
      const std::size_t first = (c + first_offset) % N;
      double acc = ref.input(x[first * n + i]);
      for (std::size_t j = 1; j < N; ++j) acc = ref.add(acc, ref.input(x[((first + j) % N) * n + i]));
      out[i] = acc;
    }
  return out;
}

std::vector<double> ref_tree(const std::vector<float>& x, std::size_t N, std::size_t n, Reference& ref) {
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<double> level;
    for (std::size_t r = 0; r < N; ++r) level.push_back(ref.input(x[r * n + i]));
    while (level.size() > 1) {
      std::vector<double> up;
      for (std::size_t k = 0; k + 1 < level.size(); k += 2) up.push_back(ref.add(level[k], level[k + 1]));
      if (level.size() % 2) up.push_back(level.back());
      level = up;
    }
    out[i] = level[0];
  }
  return out;
}

// Inputs whose every pairwise sum stays exact in double: magnitudes
// log-uniform in [lo, hi], random signs, some exact zeros.
std::vector<float> inputs(std::size_t count, double lo, double hi, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> e(std::log2(lo), std::log2(hi));
  std::vector<float> v(count);
  for (auto& x : v) x = (rng() % 16 == 0) ? 0.0f : static_cast<float>(std::exp2(e(rng)) * ((rng() & 1) ? -1 : 1));
  return v;
}

// Magnitudes for a format: down into its subnormals, up to where N of them
// cannot overflow, and within a span that keeps every sum exact in double:
// partial sums up to N * hi, addends' last bits down to lo * 2^-(p-1), all
// within 53 bits.
std::pair<double, double> range_for(const Format& f, std::size_t N) {
  const double hi = std::min(0x1p10, f.max_finite() / (2.0 * static_cast<double>(N)));
  const int growth = static_cast<int>(std::ceil(std::log2(static_cast<double>(N)))) + 1;
  const int span = std::min(24, 53 - f.precision() - growth - 1);
  const double lo = std::max(f.min_normal() / 4, std::ldexp(hi, -span));
  return {lo, hi};
}

collective::AllreduceSpec spec_of(const Format& f, Algorithm a, Divide d = Divide::none) {
  collective::AllreduceSpec s;
  s.rounding = emu::QuantizeSpec{f};
  s.algorithm = a;
  s.divide = d;
  return s;
}

void expect_same_values(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(static_cast<double>(got[i]), want[i]) << what << ", element " << i;
}

const std::vector<std::string> kFormats = {"fp32", "bf16", "fp16", "fp8-e5m2", "fp8-e4m3"};
const std::vector<std::size_t> kRanks = {2, 3, 5, 8, 33, 100, 257};

std::vector<std::size_t> lengths_for(std::size_t N) { return {1, N - 1, N + 3, 3 * N + 1, 517}; }

// --- the orders against the transcription -------------------------------------

TEST(Allreduce, OrdersMatchTheirDefinitions) {
  std::uint64_t seed = 1;
  for (const std::string& name : kFormats) {
    const Format f = formats::parse_format(name);
    for (const std::size_t N : kRanks)
      for (const std::size_t n : lengths_for(N)) {
        if (n == 0) continue;
        const auto [lo, hi] = range_for(f, N);
        const std::vector<float> x = inputs(N * n, lo, hi, ++seed);
        for (const Algorithm a : {Algorithm::ring, Algorithm::tree, Algorithm::reduce_scatter}) {
          Reference ref{f, {}};
          const std::vector<double> want = a == Algorithm::tree ? ref_tree(x, N, n, ref)
                                           : ref_ring(x, N, n, a == Algorithm::ring ? 0 : 1, ref);
          const collective::AllreduceResult got = collective::allreduce({x, N, n}, spec_of(f, a));
          const std::string what = name + " " + std::string(collective::to_string(a)) + " N=" + std::to_string(N) +
                                   " n=" + std::to_string(n);
          expect_same_values(got.values, want, what);
          EXPECT_EQ(got.counters.additions.elements, (N - 1) * n) << what;
          EXPECT_EQ(got.counters.additions.elements, ref.counts.additions) << what;
          EXPECT_EQ(got.counters.additions.inexact, ref.counts.inexact) << what;
          EXPECT_EQ(got.counters.additions.addends_nonzero, ref.counts.updates) << what;
          EXPECT_EQ(got.counters.additions.swamped, ref.counts.swamped) << what;
          EXPECT_EQ(got.counters.inputs.elements, N * n) << what;
          EXPECT_EQ(got.counters.inputs.inexact, ref.counts.input_inexact) << what;
        }
      }
  }
}

TEST(Allreduce, DivisionsMatchTheirDefinitions) {
  const Format f = formats::parse_format("bf16");
  for (const std::size_t N : {2, 3, 6, 8, 12, 100}) {
    const std::size_t n = 2 * N + 5;
    const auto [lo, hi] = range_for(f, N);
    const std::vector<float> x = inputs(N * n, lo, hi, 40 + N);
    const std::uint64_t pre = collective::fsdp_predivide_factor(N);
    const double premul = ref_round(static_cast<float>(1.0 / static_cast<double>(N)), f);
    for (const Divide d : {Divide::before, Divide::after, Divide::split, Divide::premul}) {
      // The reference's inputs: each rounded, then divided or multiplied and rounded again.
      std::vector<float> prepared(x.size());
      for (std::size_t k = 0; k < x.size(); ++k) {
        const double q = ref_round(x[k], f);
        double v = q;
        if (d == Divide::before) v = ref_round_quotient(q, N, f);
        if (d == Divide::split) v = ref_round_quotient(q, pre, f);
        if (d == Divide::premul) v = ref_round(q * premul, f);
        prepared[k] = static_cast<float>(v);
      }
      Reference ref{f, {}};
      std::vector<double> want = ref_ring(prepared, N, n, 0, ref);  // prepared values are exact in the format
      for (double& v : want) {
        if (d == Divide::after) v = ref_round_quotient(v, N, f);
        if (d == Divide::split) v = ref_round_quotient(v * static_cast<double>(pre), N, f);  // v / (N / pre)
      }
      const collective::AllreduceResult got = collective::allreduce({x, N, n}, spec_of(f, Algorithm::ring, d));
      expect_same_values(got.values, want, "divide " + std::string(collective::to_string(d)) + " N=" + std::to_string(N));
      EXPECT_EQ(got.divisors.total(), N);
    }
  }
}

TEST(Allreduce, PerRankScalingMatchesItsDefinition) {
  for (const std::string name : {"fp8-e4m3", "fp8-e5m2"}) {
    const Format f = formats::parse_format(name);
    for (const std::size_t N : {2, 5, 16}) {
      const std::size_t n = 3 * N + 2;
      std::vector<float> x = inputs(N * n, 0x1p-20, 0x1p-4, 90 + N);
      for (std::size_t k = 0; k < n; ++k) x[k] *= 64;  // rank 0 larger: it sets the shared scale
      // The shared scale: for each rank the largest 2^k with amax * 2^k * N <= max (a downward search), the smallest.
      double shared = std::numeric_limits<double>::infinity();
      for (std::size_t r = 0; r < N; ++r) {
        double amax = 0;
        for (std::size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[r * n + i])));
        int k = 400;
        while (std::ldexp(amax, k) * static_cast<double>(N) > f.max_finite()) --k;
        shared = std::min(shared, std::ldexp(1.0, k));
      }
      std::vector<float> scaled(x.size());
      for (std::size_t k = 0; k < x.size(); ++k) scaled[k] = static_cast<float>(static_cast<double>(x[k]) * shared);
      Reference ref{f, {}};
      std::vector<double> want = ref_ring(scaled, N, n, 0, ref);
      for (double& v : want) v /= shared;
      collective::AllreduceSpec s = spec_of(f, Algorithm::ring);
      s.scaling = collective::Scaling::per_rank;
      const collective::AllreduceResult got = collective::allreduce({x, N, n}, s);
      EXPECT_EQ(got.scale, shared);
      expect_same_values(got.values, want, name + " per-rank N=" + std::to_string(N));
      EXPECT_EQ(got.counters.additions.overflow, 0u);
    }
  }
}

// --- hand-worked cases -----------------------------------------------------------

TEST(Allreduce, Fp16SwampingHandWorked) {
  // fp16 spacing at 2048 is 2: 2048 + 1 = 2049 is a tie between 2048 and 2050; to even: 2048.
  const Format fp16 = formats::parse_format("fp16");
  const std::vector<float> x = {2048.0f, 1.0f};
  for (const Algorithm a : {Algorithm::ring, Algorithm::tree}) {
    const auto r = collective::allreduce({x, 2, 1}, spec_of(fp16, a));
    EXPECT_EQ(r.values[0], 2048.0f);
    EXPECT_EQ(r.counters.additions.swamped, 1u);  // w = 2048 (rank 0's partial), u = 1 lost
    EXPECT_EQ(r.counters.additions.inexact, 1u);
  }
  // The reduce-scatter starts chunk 0 at rank 1: w = 1, u = 2048; the result is not w, so no lost update.
  const auto rs = collective::allreduce({x, 2, 1}, spec_of(fp16, Algorithm::reduce_scatter));
  EXPECT_EQ(rs.values[0], 2048.0f);
  EXPECT_EQ(rs.counters.additions.swamped, 0u);
  // Its error against the exact sum 2049: -1, half an ulp of fp16 at 2049 (ulp 2).
  const auto e = collective::compare_to_exact({x, 2, 1}, rs.values, 1, fp16);
  EXPECT_EQ(e.error[0], -1.0);
  EXPECT_EQ(e.summary.max_ulp_error, 0.5);
  EXPECT_DOUBLE_EQ(e.summary.max_rel_error, 1.0 / 2049.0);
}

TEST(Allreduce, RingOrderDecidesWhatIsLost) {
  // bf16 (8 bits): 256 + 1 = 257 ties to 256. Four ranks, n = 4: chunk c starts at rank c.
  // x = [[256]*4, [1]*4, [1]*4, [1]*4] (rank rows). Chunk 0: 256+1=256, +1=256, +1=256 (3 lost).
  // Chunk 1: 1+1=2, +1=3, +256=259 -> 260 (a tie between 258 and 260; 260 is even): none lost.
  // Chunk 2: 1+1=2, +256=258, +1=259 -> 260 (the same tie): none lost.
  // Chunk 3: 1+256=257 -> 256 (lost), +1 = 256 (lost), +1 = 256 (lost).
  const Format bf16 = formats::parse_format("bf16");
  std::vector<float> x(16, 1.0f);
  for (int i = 0; i < 4; ++i) x[static_cast<std::size_t>(i)] = 256.0f;
  const auto r = collective::allreduce({x, 4, 4}, spec_of(bf16, Algorithm::ring));
  EXPECT_EQ(r.values, (std::vector<float>{256, 260, 260, 256}));
  EXPECT_EQ(r.counters.additions.swamped, 5u);  // chunk 0: 3; chunk 3: 1 + 256 -> 256 is not w = 1; then 2
}

TEST(Allreduce, OverflowAndNonFiniteAreCounted) {
  const Format fp16 = formats::parse_format("fp16");
  const std::vector<float> x = {60000.0f, 1.0f, std::numeric_limits<float>::quiet_NaN(),
                                60000.0f, 2.0f, 1.0f};
  const auto r = collective::allreduce({x, 2, 3}, spec_of(fp16, Algorithm::ring));
  EXPECT_TRUE(std::isinf(r.values[0]));
  EXPECT_EQ(r.values[1], 3.0f);
  EXPECT_TRUE(std::isnan(r.values[2]));
  EXPECT_EQ(r.counters.additions.overflow, 1u);
  const auto e = collective::compare_to_exact({x, 2, 3}, r.values, 1, fp16);
  EXPECT_EQ(e.summary.nonfinite_results, 1u);
  EXPECT_EQ(e.summary.nonfinite_inputs, 1u);
  EXPECT_EQ(e.summary.compared, 1u);
}

TEST(Allreduce, ChunksAreNumpyArraySplit) {
  // numpy.array_split(range(10), 4): sizes 3, 3, 2, 2; (range(2), 5): 1, 1, 0, 0, 0.
  const std::vector<std::pair<std::size_t, std::size_t>> want = {{0, 3}, {3, 6}, {6, 8}, {8, 10}};
  for (std::size_t c = 0; c < 4; ++c) {
    EXPECT_EQ(collective::ring_chunk(10, 4, c).begin, want[c].first);
    EXPECT_EQ(collective::ring_chunk(10, 4, c).end, want[c].second);
  }
  EXPECT_EQ(collective::ring_chunk(2, 5, 1).end, 2u);
  EXPECT_EQ(collective::ring_chunk(2, 5, 4).begin, 2u);
  EXPECT_EQ(collective::ring_chunk(2, 5, 4).end, 2u);
}

TEST(Allreduce, FsdpPredivideFactorsAsPyTorch) {
  // f = 1; while N % f == 0 and N / f > f: f *= 2 (worked by hand).
  EXPECT_EQ(collective::fsdp_predivide_factor(1), 1u);
  EXPECT_EQ(collective::fsdp_predivide_factor(2), 2u);
  EXPECT_EQ(collective::fsdp_predivide_factor(6), 4u);  // 6 % 4 != 0 ends it: postdivide 1.5
  EXPECT_EQ(collective::fsdp_predivide_factor(8), 4u);
  EXPECT_EQ(collective::fsdp_predivide_factor(16), 4u);
  EXPECT_EQ(collective::fsdp_predivide_factor(1024), 32u);
}

// --- the fast kernel against the generic routines --------------------------------

std::vector<float> awkward_inputs(const Format& f, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<double> specials = {0.0, -0.0, f.min_normal(), f.min_subnormal(), f.min_normal() * 0.75,
                                        f.max_finite(), f.max_finite() * 0.999, f.max_finite() * 1.01,
                                        std::numeric_limits<double>::infinity(), std::nan(""), 1.0, 3.0};
  std::uniform_real_distribution<double> e(std::log2(f.min_subnormal()) - 2, std::log2(f.max_finite()) + 1);
  std::vector<float> v(count);
  for (auto& x : v) {
    const std::uint64_t pick = rng() % 8;
    const double m = pick == 0 ? specials[rng() % specials.size()] : std::exp2(e(rng));
    x = static_cast<float>((rng() & 1) ? -m : m);
  }
  return v;
}

void expect_same_counters(const emu::Counters& a, const emu::Counters& b, const std::string& what) {
  EXPECT_EQ(a.elements, b.elements) << what;
  EXPECT_EQ(a.zeros_in, b.zeros_in) << what;
  EXPECT_EQ(a.nonfinite_in, b.nonfinite_in) << what;
  EXPECT_EQ(a.inexact, b.inexact) << what;
  EXPECT_EQ(a.underflow, b.underflow) << what;
  EXPECT_EQ(a.underflow_to_zero, b.underflow_to_zero) << what;
  EXPECT_EQ(a.subnormal, b.subnormal) << what;
  EXPECT_EQ(a.overflow, b.overflow) << what;
  EXPECT_EQ(a.nan_created, b.nan_created) << what;
  EXPECT_EQ(a.addends_nonzero, b.addends_nonzero) << what;
  EXPECT_EQ(a.swamped, b.swamped) << what;
}

TEST(Allreduce, FastKernelMatchesGenericRoutines) {
  std::uint64_t seed = 500;
  for (const Format& f : formats::presets()) {
    std::vector<Format> fs = {f};
    if (f.name == "fp16") fs.push_back(formats::parse_format("fp32"));
    for (const Format& g : fs)
      for (const std::size_t N : {2, 7, 64}) {
        const std::size_t n = 1500;
        const std::vector<float> x = awkward_inputs(g, N * n, ++seed);
        for (const Algorithm a : {Algorithm::ring, Algorithm::tree})
          for (const Divide d : {Divide::none, Divide::before, Divide::split, Divide::premul}) {
            collective::AllreduceSpec s = spec_of(g, a, d);
            const auto fast = collective::allreduce({x, N, n}, s);
            s.path = collective::KernelPath::generic;
            const auto generic = collective::allreduce({x, N, n}, s);
            const std::string what = g.name + " N=" + std::to_string(N) + " " + std::string(collective::to_string(a)) +
                                     " divide " + std::string(collective::to_string(d));
            for (std::size_t i = 0; i < n; ++i)
              ASSERT_EQ(std::bit_cast<std::uint32_t>(fast.values[i]), std::bit_cast<std::uint32_t>(generic.values[i]))
                  << what << " element " << i;
            expect_same_counters(fast.counters.inputs, generic.counters.inputs, what + " inputs");
            expect_same_counters(fast.counters.division, generic.counters.division, what + " division");
            expect_same_counters(fast.counters.additions, generic.counters.additions, what + " additions");
          }
      }
  }
}

TEST(Allreduce, FastKernelCoversTheCommonFormats) {
  collective::FastFormat ff;
  for (const std::string name : {"fp32", "bf16", "fp16", "fp8-e4m3", "fp8-e5m2"})
    EXPECT_TRUE(collective::fast_format(emu::QuantizeSpec{formats::parse_format(name)}, ff)) << name;
  emu::QuantizeSpec stochastic{formats::parse_format("bf16")};
  stochastic.rounding = formats::Rounding::stochastic;
  EXPECT_FALSE(collective::fast_format(stochastic, ff));
}

TEST(Allreduce, StochasticRoundingIsReproducible) {
  const Format bf16 = formats::parse_format("bf16");
  const std::vector<float> x = collective::synthetic_gradients(8, 300, 3);
  collective::AllreduceSpec s = spec_of(bf16, Algorithm::ring);
  s.rounding.rounding = formats::Rounding::stochastic;
  s.rounding.seed = 11;
  const auto a = collective::allreduce({x, 8, 300}, s), b = collective::allreduce({x, 8, 300}, s);
  EXPECT_EQ(a.values, b.values);
  s.rounding.seed = 12;
  EXPECT_NE(collective::allreduce({x, 8, 300}, s).values, a.values);
}

// --- the exact sum ------------------------------------------------------------------

TEST(ExactSum, CancellationAndRange) {
  collective::ExactSum s;
  s.add(0x1p100);
  s.add(1.0);
  s.add(-0x1p100);
  s.add(0x1p-149);
  EXPECT_EQ(s.value(), 1.0);  // the exact 1 + 2^-149, rounded to double
  collective::ExactSum t;
  t.add(-3.0);
  t.add(0x1p-149);
  EXPECT_EQ(t.value(), -3.0);
  collective::ExactSum u;
  u.add(0x1p-149);
  u.add(0x1p-149);
  EXPECT_EQ(u.value(), 0x1p-148);
  collective::ExactSum v;
  for (int i = 0; i < 4096; ++i) v.add(static_cast<double>(std::numeric_limits<float>::max()));
  EXPECT_EQ(v.value(), 4096.0 * static_cast<double>(std::numeric_limits<float>::max()));
  EXPECT_FALSE(v.add(std::nan("")));
}

TEST(ExactSum, MatchesLongDoubleWhereThatIsExact) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> m(-(1 << 23), 1 << 23), e(-10, 10);
  for (int trial = 0; trial < 200; ++trial) {
    collective::ExactSum s;
    long double want = 0;  // bits from 2^-33 to 2^16: long double's 64-bit significand (and double's 53) hold every sum
    for (int k = 0; k < 50; ++k) {
      const double x = std::ldexp(static_cast<double>(m(rng)), e(rng) - 23);
      s.add(x);
      want += x;
    }
    EXPECT_EQ(s.value(), static_cast<double>(want));
  }
}

}  // namespace
