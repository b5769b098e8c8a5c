// Stochastic rounding: unbiased with the probability rounding.h defines,
// reproducible from its seed, chunkable by index; and the Philox generator
// behind it against Random123's known answers.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "check_count.h"
#include "emu/quantize.h"
#include "explain.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/philox.h"
#include "generators.h"

namespace {

namespace fm = mpverify::formats;
namespace emu = mpverify::emu;
namespace gen = mpverify::properties::gen;
using fm::Flags;
using fm::Format;
using fm::Rounding;
using mpverify::properties::Bits;
using mpverify::properties::Exact;
using mpverify::properties::expect_checks;
using mpverify::properties::explain;

// --- exact binomial test -------------------------------------------------------------

// P(K = i) for K ~ Binomial(n, p), 0 < p < 1, through log-gamma in long
// double: lgammal(20001) is about 1.8e5, and long double's 64-bit significand
// keeps the log's absolute error near 1e-14, so each term is accurate to a
// relative 1e-13, far finer than the 1e-6 the test resolves.
long double binomial_pmf(int n, int i, long double p) {
  const long double log_pmf = std::lgammal(n + 1.0L) - std::lgammal(i + 1.0L) - std::lgammal(n - i + 1.0L) +
                              i * std::log(p) + (n - i) * std::log1p(-p);
  return std::exp(log_pmf);
}

// Two-sided p-value of k successes in n trials: twice the smaller tail,
// P(K <= k) or P(K >= k), capped at 1. Under the null hypothesis the chance
// that it falls below alpha is at most alpha (each tail contributes at most
// alpha/2), which is what makes it a test at level alpha.
long double binomial_two_sided_p_value(int n, int k, long double p) {
  long double lower = 0, upper = 0;
  for (int i = 0; i <= n; ++i) {
    const long double term = binomial_pmf(n, i, p);
    if (i <= k) lower += term;
    if (i >= k) upper += term;
  }
  return std::min(1.0L, 2 * std::min(lower, upper));
}

// --- 12. unbiased ----------------------------------------------------------------------

// x = sign * (base + fraction * quantum), where base is a value of the format
// and quantum its spacing there, so the discarded fraction is known exactly
// by construction: fraction = numerator / 2^32.
struct UnbiasedCase {
  const char* what;
  Format format;
  double base;
  double quantum;
  std::uint64_t numerator;  // of the fraction, over 2^32
  int random_bits;
  bool negative;

  double x() const {
    const double magnitude = base + std::ldexp(static_cast<double>(numerator), -32) * quantum;  // exact
    return negative ? -magnitude : magnitude;
  }
  // rounding.h: F = floor(fraction * 2^bits), up with probability F / 2^bits.
  long double probability() const {
    const std::uint64_t f = numerator >> (32 - random_bits);
    return std::ldexp(static_cast<long double>(f), -random_bits);
  }
  bool fraction_fits() const { return numerator % (std::uint64_t{1} << (32 - random_bits)) == 0; }
};

std::vector<UnbiasedCase> unbiased_cases() {
  const Format fp16 = fm::parse_format("fp16");
  const Format bf16 = fm::parse_format("bf16");
  const Format e4m3 = fm::parse_format("fp8-e4m3");
  constexpr std::uint64_t half = 1ull << 31, quarter = 1ull << 30, three_eighths = 3ull << 29;
  constexpr std::uint64_t third = 0x55555555ull;  // 1/3 truncated to 32 bits
  return {
      {"fp16 1 + q/2", fp16, 1.0, 0x1p-10, half, 32, false},
      {"fp16 -(1 + q/4)", fp16, 1.0, 0x1p-10, quarter, 32, true},
      {"fp16 1.5 + 3q/8", fp16, 1.5, 0x1p-10, three_eighths, 32, false},
      {"fp16 -(1024 + q/3)", fp16, 1024.0, 1.0, third, 32, true},
      {"fp16 1 + 2^-20 q (tiny fraction)", fp16, 1.0, 0x1p-10, 1ull << 12, 32, false},
      {"fp16 1 + (1 - 2^-32) q", fp16, 1.0, 0x1p-10, 0xffffffffull, 32, false},
      {"fp16 subnormal 5 + 3/8 units", fp16, 5 * 0x1p-24, 0x1p-24, three_eighths, 32, false},
      {"fp16 below the smallest subnormal, negative", fp16, 0.0, 0x1p-24, quarter, 32, true},
      {"fp16 4 random bits: 3/8 + 2^-10 truncates to 6/16", fp16, 1.0, 0x1p-10, three_eighths + (1ull << 22), 4, false},
      {"fp16 1 random bit: 3/4 truncates to 1/2", fp16, 2.0, 0x1p-9, 3ull << 30, 1, true},
      {"fp16 4 random bits: 2^-6 truncates to 0", fp16, 1.0, 0x1p-10, 1ull << 26, 4, false},
      {"bf16 -(3 + q/3)", bf16, 3.0, 0x1p-6, third, 32, true},
      {"bf16 subnormal 3 + 1/2 units", bf16, 3 * 0x1p-133, 0x1p-133, half, 32, false},
      {"fp8-e4m3 240 + q/3", e4m3, 240.0, 16.0, third, 32, false},
      {"fp8-e4m3 -(2^-8 + 1/4 units) (subnormal)", e4m3, 0x1p-8, 0x1p-9, quarter, 16, true},
  };
}

// With fixed seeds the test is deterministic: it either always passes or
// always fails. The significance level 1e-6 per case bounds the probability
// that a correct implementation would have been rejected for seeds chosen
// at random; for these seeds it passes or not once and for all.
TEST(StochasticRounding, UnbiasedWithDefinedProbability) {
  constexpr int kDraws = 20000;
  constexpr long double kAlpha = 1e-6L;
  const auto cases = unbiased_cases();
  auto& checks = expect_checks(cases.size() * (kDraws + 2));
  std::uint64_t seed = 0x5eed0000;
  for (const UnbiasedCase& c : cases) {
    SCOPED_TRACE(c.what);
    const Format& f = c.format;
    const double x = c.x();
    Flags ignored;
    const std::uint32_t low = fm::from_double(f, x, gen::context(Rounding::toward_zero), ignored);
    const std::uint32_t high = fm::from_double(f, x, gen::context(c.negative ? Rounding::down : Rounding::up), ignored);
    const double distance = (std::fabs(x) - std::fabs(fm::to_double(f, low))) /
                            (std::fabs(fm::to_double(f, high)) - std::fabs(fm::to_double(f, low)));
    // The library's neighbours of x are the ones the construction assumes.
    ASSERT_EQ(distance, std::ldexp(static_cast<double>(c.numerator), -32)) << "x = " << Exact{x};
    checks.count();
    const long double p = c.probability();
    if (c.fraction_fits()) {
      EXPECT_EQ(p, static_cast<long double>(distance));
    }
    checks.count();

    int ups = 0;
    ++seed;
    for (int i = 0; i < kDraws; ++i) {
      const auto rc = gen::context(Rounding::stochastic, fm::stochastic_draw(seed, 7, static_cast<std::uint64_t>(i)),
                                   c.random_bits);
      Flags flags;
      const std::uint32_t r = fm::from_double(f, x, rc, flags);
      ASSERT_TRUE(r == low || r == high) << "draw " << i << ": " << Bits{f, r} << " is neither neighbour "
                                         << Bits{f, low} << ", " << Bits{f, high};
      ups += r == high;
      checks.count();
    }
    // Printed so that a passing run shows how close each case came.
    const long double p_value = 0 < p && p < 1 ? binomial_two_sided_p_value(kDraws, ups, p) : 1;
    std::cout << c.what << ": " << ups << " of " << kDraws << " away from zero, p = " << static_cast<double>(p)
              << ", two-sided p-value " << static_cast<double>(p_value) << "\n";
    if (p == 0) {
      EXPECT_EQ(ups, 0);
    } else if (p == 1) {
      EXPECT_EQ(ups, kDraws);
    } else {
      EXPECT_GE(p_value, kAlpha) << ups << " of " << kDraws << " rounded away from zero; expected about "
                                 << static_cast<double>(p * kDraws) << " (p = " << static_cast<double>(p) << ")";
    }
  }
}

// The test must be able to reject: a count far from n*p gives a tiny
// p-value, one at n*p does not.
TEST(StochasticRounding, BinomialTestRejectsABiasedCount) {
  auto& checks = expect_checks(3);
  EXPECT_LT(binomial_two_sided_p_value(20000, 10400, 0.5L), 1e-6L);  // 5.7 standard deviations
  EXPECT_GT(binomial_two_sided_p_value(20000, 10000, 0.5L), 0.99L);
  EXPECT_LT(binomial_two_sided_p_value(20000, 5, 0.375L), 1e-6L);
  checks.count(3);
}

// --- 13. replay from the seed --------------------------------------------------------------

// Values whose every rounding is a coin toss: a fraction in [1/2, 3/4) of a
// quantum, so that the probability of rounding up, F / 2^bits, lies in
// [1/2, 3/4) for every number of random bits (with one bit, F = 1: exactly 1/2).
std::vector<float> coin_toss_values(const Format& f, std::size_t n) {
  std::vector<float> values;
  for (std::size_t i = 0; i < n; ++i) {
    // Below the largest finite magnitude, so that both neighbours are finite
    // and distinct.
    const std::uint32_t base = *rc::gen::suchThat(
        gen::finite_bits(f), [&f](std::uint32_t b) { return (b & ~f.sign_mask()) < f.max_finite_bits(); });
    const int j = *gen::uniform(0, 63);
    const double v = fm::to_double(f, base);
    // Exact, and exact as a float: at most 11 + 8 significant bits, and no
    // finer than 2^-144 (the smallest quantum of these formats is 2^-136).
    const double step = gen::quantum_above(f, v) * (128 + j) / 256;
    values.push_back(static_cast<float>(std::signbit(v) ? v - step : v + step));
  }
  return values;
}

std::vector<std::uint32_t> bits_of(std::span<const float> values) {
  std::vector<std::uint32_t> bits;
  for (float v : values) bits.push_back(std::bit_cast<std::uint32_t>(v));
  return bits;
}

std::vector<std::uint32_t> quantized(std::span<const float> in, const emu::QuantizeSpec& spec) {
  std::vector<float> out(in.size());
  emu::quantize(in, out, spec);
  return bits_of(out);
}

// The same seed replays bit for bit; another seed or stream gives other
// bits (each element agrees by chance with probability at most 5/8, so 256
// or more agree with probability below 1e-52); element i uses draw
// (seed, stream, first_index + i), so chunks with matching first_index
// reproduce a single call.
RC_GTEST_PROP(StochasticProperties, ReplaysFromSeed, ()) {
  auto& checks = expect_checks(100 * 5);
  emu::QuantizeSpec spec;
  spec.format = *gen::format();
  spec.rounding = Rounding::stochastic;
  spec.random_bits = *gen::uniform(1, 32);
  spec.seed = *gen::uniform<std::uint64_t>(0, 0xffffffffffffull);
  spec.stream = *gen::uniform<std::uint64_t>(0, 1000);
  spec.first_index = *gen::uniform<std::uint64_t>(0, 1ull << 40);
  const Format& f = spec.format;
  const std::vector<float> in = coin_toss_values(f, static_cast<std::size_t>(*gen::uniform(256, 1024)));

  const auto once = quantized(in, spec);
  PROP_ASSERT(quantized(in, spec) == once, f, " seed ", spec.seed, ": a second run differs");
  checks.count();

  for (std::size_t i = 0; i < in.size(); ++i) {
    auto rc = gen::context(Rounding::stochastic, fm::stochastic_draw(spec.seed, spec.stream, spec.first_index + i),
                           spec.random_bits);
    Flags flags;
    const std::uint32_t bits = fm::from_float(f, in[i], rc, flags);
    Flags ignored;
    const float expected = fm::to_float(f, bits, ignored);
    PROP_ASSERT(once[i] == std::bit_cast<std::uint32_t>(expected), f, " element ", i, " ", Exact{in[i]},
                ": quantize gives ", Exact{std::bit_cast<float>(once[i])},
                ", draw (seed, stream, first_index + i) gives ", Bits{f, bits});
  }
  checks.count();

  emu::QuantizeSpec other_seed = spec;
  other_seed.seed = spec.seed + 1 + *gen::uniform<std::uint64_t>(0, 1000);
  PROP_ASSERT(quantized(in, other_seed) != once, f, " seeds ", spec.seed, " and ", other_seed.seed, " agree on all ",
              in.size(), " coin tosses");
  checks.count();
  emu::QuantizeSpec other_stream = spec;
  other_stream.stream = spec.stream + 1;
  PROP_ASSERT(quantized(in, other_stream) != once, f, " streams ", spec.stream, " and ", other_stream.stream,
              " agree on all ", in.size(), " coin tosses");
  checks.count();

  const std::size_t split = static_cast<std::size_t>(*gen::uniform<std::uint64_t>(0, in.size()));
  emu::QuantizeSpec second = spec;
  second.first_index = spec.first_index + split;
  auto chunked = quantized(std::span(in).first(split), spec);
  const auto rest = quantized(std::span(in).subspan(split), second);
  chunked.insert(chunked.end(), rest.begin(), rest.end());
  PROP_ASSERT(chunked == once, f, " split at ", split, ": chunks differ from one call");
  checks.count();
}

// --- 14. Philox known answers ----------------------------------------------------------------

// Random123's kat_vectors for philox4x32_10 (counter words, key words,
// expected output), as published with Salmon et al., SC'11, and reproduced
// by independent implementations (TensorFlow's Philox tests among them).
TEST(Philox, Random123KnownAnswers) {
  struct Vector {
    std::array<std::uint32_t, 4> counter;
    std::array<std::uint32_t, 2> key;
    std::array<std::uint32_t, 4> expected;
  };
  const Vector vectors[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  auto& checks = expect_checks(std::size(vectors));
  for (const Vector& v : vectors) {
    const auto got = fm::philox4x32_10(v.counter, v.key);
    EXPECT_EQ(got, v.expected) << std::hex << "counter " << v.counter[0] << " " << v.counter[1] << " " << v.counter[2]
                               << " " << v.counter[3] << " key " << v.key[0] << " " << v.key[1] << ": got " << got[0]
                               << " " << got[1] << " " << got[2] << " " << got[3];
    checks.count();
  }
}

}  // namespace
