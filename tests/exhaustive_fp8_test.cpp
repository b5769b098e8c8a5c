// Exhaustive FP8 tests: every operand pair (add, sub, mul, div), every
// operand (sqrt) and every operand triple (fma) of the FP8 formats, in every
// rounding mode and both tininess rules, compared bit for bit and flag for
// flag against the exact oracle (tests/oracle/). ctest label "exhaustive".
#include <gtest/gtest.h>

#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "formats/arithmetic.h"
#include "formats/format.h"
#include "formats/rounding.h"
#include "oracle/compare.h"
#include "oracle/exact_oracle.h"

namespace {

using mpverify::formats::Format;
using mpverify::formats::parse_format;
using mpverify::formats::Rounding;
using mpverify::formats::RoundingContext;
using mpverify::formats::Tininess;
using mpverify::oracle::Oracle;
using mpverify::oracle::Result;
using mpverify::oracle::testing::Lcg;
using mpverify::oracle::testing::Op;
using mpverify::oracle::testing::parallel_for;
using mpverify::oracle::testing::Tally;

constexpr Tininess kTininess[] = {Tininess::after_rounding, Tininess::before_rounding};
// Stochastic rounding is checked with several draws per case, at several
// resolutions of the discarded fraction.
constexpr int kStochasticBits[] = {32, 32, 5, 1};
constexpr std::uint64_t kDeterministicModes = 6;
constexpr std::uint64_t kDraws = std::size(kStochasticBits);
constexpr std::uint64_t kContextsPerCase = 2 * (kDeterministicModes + kDraws);  // x2: tininess rules

// Runs `check(rc)` for every rounding context of one case: both tininess
// rules, the six deterministic modes, and kDraws stochastic draws from rng.
template <class Check>
void for_each_context(Lcg& rng, Check check) {
  for (Tininess t : kTininess) {
    RoundingContext rc;
    rc.tininess = t;
    for (Rounding mode : mpverify::formats::all_roundings) {
      rc.mode = mode;
      if (mode != Rounding::stochastic) {
        check(rc);
        continue;
      }
      for (int bits : kStochasticBits) {
        rc.random_bits = bits;
        rc.random = rng.next32();
        check(rc);
      }
    }
  }
}

std::string format_label(const testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// --- every pair, every unary operand ---------------------------------------------

class ExhaustiveFp8Pairs : public testing::TestWithParam<std::string> {};

TEST_P(ExhaustiveFp8Pairs, AddSubMulDiv) {
  const Format f = parse_format(GetParam());
  ASSERT_EQ(f.width(), 8);
  const Oracle& o = Oracle::for_format(f);
  Tally tally;
  for (Op op : {Op::add, Op::sub, Op::mul, Op::div}) {
    parallel_for(256, [&](std::uint32_t a) {
      Lcg rng(0xF8000000ull + (static_cast<std::uint64_t>(op) << 8) + a);
      Tally::Counter count(tally);
      for (std::uint32_t b = 0; b < 256; ++b)
        for_each_context(rng, [&](const RoundingContext& rc) { count.compare_op(op, f, o, a, b, 0, rc); });
    });
  }
  EXPECT_EQ(tally.mismatches(), 0u) << tally.report();
  EXPECT_EQ(tally.compared(), 4u * 256u * 256u * kContextsPerCase);
}

TEST_P(ExhaustiveFp8Pairs, Sqrt) {
  const Format f = parse_format(GetParam());
  const Oracle& o = Oracle::for_format(f);
  Tally tally;
  Lcg rng(0xF8005C07ull);
  {
    Tally::Counter count(tally);
    for (std::uint32_t a = 0; a < 256; ++a)
      for_each_context(rng, [&](const RoundingContext& rc) { count.compare_op(Op::sqrt, f, o, a, 0, 0, rc); });
  }
  EXPECT_EQ(tally.mismatches(), 0u) << tally.report();
  EXPECT_EQ(tally.compared(), 256u * kContextsPerCase);
}

// --- conversions into FP8 -------------------------------------------------------

// Doubles around every rounding boundary of the format: each value, each
// midpoint, their neighbouring doubles, quarter points, both signs; the
// overflow point and beyond; zeros, infinities, NaNs with payloads; extremes.
std::vector<double> conversion_inputs(const Oracle& o) {
  std::vector<double> v;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> points;
  for (std::size_t i = 0; i <= o.finite_count(); ++i) {  // includes the overflow point
    const double x = static_cast<double>(o.table_value(i));
    points.push_back(x);
    if (i < o.finite_count()) {
      const double next = static_cast<double>(o.table_value(i + 1));
      points.push_back((x + next) / 2);
      points.push_back(x + (next - x) / 4);
      points.push_back(x + 3 * (next - x) / 4);
    }
  }
  const double top = static_cast<double>(o.overflow_point());
  for (double x : {top * 1.5, top * 2, top * 1024, 1e300, std::numeric_limits<double>::max(),
                   std::numeric_limits<double>::min(), std::numeric_limits<double>::denorm_min(), 1e-300,
                   static_cast<double>(o.table_value(1)) / 1024})
    points.push_back(x);
  for (double x : points) {
    for (double y : {x, std::nextafter(x, inf), std::nextafter(x, 0.0), std::nextafter(std::nextafter(x, inf), inf)}) {
      v.push_back(y);
      v.push_back(-y);
    }
  }
  v.push_back(inf);
  v.push_back(-inf);
  for (std::uint64_t u : {0x7FF8000000000000ull, 0xFFF8000000000000ull, 0x7FF0000000000001ull,
                          0xFFF0000000000001ull, 0x7FF4000000000000ull, 0x7FFDEADBEEF00000ull,
                          0xFFF5555555555555ull, 0x7FFFFFFFFFFFFFFFull})
    v.push_back(std::bit_cast<double>(u));
  return v;
}

std::string double_hex(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llX", static_cast<unsigned long long>(std::bit_cast<std::uint64_t>(x)));
  return buf;
}

TEST_P(ExhaustiveFp8Pairs, FromDoubleAndFloat) {
  const Format f = parse_format(GetParam());
  const Oracle& o = Oracle::for_format(f);
  const std::vector<double> inputs = conversion_inputs(o);
  Tally tally;
  Lcg rng(0xF8C0417Eull);
  std::uint64_t floats = 0;
  {
  Tally::Counter count(tally);
  for (double x : inputs) {
    for_each_context(rng, [&](const RoundingContext& rc) {
      Result got;
      got.bits = mpverify::formats::from_double(f, x, rc, got.flags);
      count.compare(f, "from_double", double_hex(x), rc, o.from_double(x, rc), got);
    });
    // The same input as a float, when it is one (NaN payloads excepted).
    const float xf = static_cast<float>(x);
    if (!std::isnan(x) && static_cast<double>(xf) == x) {
      ++floats;
      for_each_context(rng, [&](const RoundingContext& rc) {
        Result got;
        got.bits = mpverify::formats::from_float(f, xf, rc, got.flags);
        count.compare(f, "from_float", double_hex(x), rc, o.from_float(xf, rc), got);
      });
    }
  }
  for (std::uint32_t u : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFA00000u, 0x7FBFFFFFu, 0x7FE12345u}) {
    ++floats;
    const float xf = std::bit_cast<float>(u);
    for_each_context(rng, [&](const RoundingContext& rc) {
      Result got;
      got.bits = mpverify::formats::from_float(f, xf, rc, got.flags);
      count.compare(f, "from_float", mpverify::oracle::testing::hex_bits(u, 32), rc, o.from_float(xf, rc), got);
    });
  }
  }
  EXPECT_EQ(tally.mismatches(), 0u) << tally.report();
  EXPECT_GT(floats, 1000u);
  EXPECT_EQ(tally.compared(), (inputs.size() + floats) * kContextsPerCase);
}

INSTANTIATE_TEST_SUITE_P(Formats, ExhaustiveFp8Pairs,
                         testing::Values("fp8-e4m3", "fp8-e5m2", "fp8-e4m3fnuz", "fp8-e5m2fnuz",
                                         "fp8-e4m3:saturate", "fp8-e5m2:saturate", "fp8-e5m2:nan",
                                         "fp8-e4m3:ftz", "fp8-e5m2:ftz"),
                         format_label);

// --- every triple (fma) ------------------------------------------------------------

class ExhaustiveFp8Fma : public testing::TestWithParam<std::string> {};

// 2^24 triples in rne, rtz, up, down, odd, rna and stochastic (one draw per
// case, 32 bits) with tininess after rounding, plus rne with tininess before.
TEST_P(ExhaustiveFp8Fma, AllTriples) {
  const Format f = parse_format(GetParam());
  ASSERT_EQ(f.width(), 8);
  const Oracle& o = Oracle::for_format(f);
  Tally tally;
  constexpr std::uint64_t kContexts = 8;
  parallel_for(256, [&](std::uint32_t a) {
    Lcg rng(0xF8F3A000ull + a);
    RoundingContext rc;
    Tally::Counter count(tally);
    for (std::uint32_t b = 0; b < 256; ++b) {
      for (std::uint32_t c = 0; c < 256; ++c) {
        auto check = [&] { count.compare_op(Op::fma, f, o, a, b, c, rc); };
        rc.tininess = Tininess::after_rounding;
        for (Rounding mode : mpverify::formats::all_roundings) {
          rc.mode = mode;
          rc.random_bits = 32;
          rc.random = mode == Rounding::stochastic ? rng.next32() : 0;
          check();
        }
        rc.mode = Rounding::nearest_even;
        rc.tininess = Tininess::before_rounding;
        check();
      }
    }
  });
  EXPECT_EQ(tally.mismatches(), 0u) << tally.report();
  EXPECT_EQ(tally.compared(), (1ull << 24) * kContexts);
}

INSTANTIATE_TEST_SUITE_P(Formats, ExhaustiveFp8Fma, testing::Values("fp8-e4m3", "fp8-e5m2"), format_label);

// The fnuz variants and the before-rounding tininess rule in the directed
// modes: every triple in one mode each, to keep the runtime in check.
struct FmaSweep {
  const char* format;
  Rounding mode;
  Tininess tininess;
};

void PrintTo(const FmaSweep& s, std::ostream* os) {
  *os << s.format << " " << mpverify::formats::to_string(s.mode)
      << (s.tininess == Tininess::after_rounding ? " tininess=after" : " tininess=before");
}

class ExhaustiveFp8FmaSweep : public testing::TestWithParam<FmaSweep> {};

TEST_P(ExhaustiveFp8FmaSweep, AllTriplesOneMode) {
  const FmaSweep s = GetParam();
  const Format f = parse_format(s.format);
  const Oracle& o = Oracle::for_format(f);
  Tally tally;
  parallel_for(256, [&](std::uint32_t a) {
    RoundingContext rc;
    rc.mode = s.mode;
    rc.tininess = s.tininess;
    Tally::Counter count(tally);
    for (std::uint32_t b = 0; b < 256; ++b)
      for (std::uint32_t c = 0; c < 256; ++c) count.compare_op(Op::fma, f, o, a, b, c, rc);
  });
  EXPECT_EQ(tally.mismatches(), 0u) << tally.report();
  EXPECT_EQ(tally.compared(), 1ull << 24);
}

INSTANTIATE_TEST_SUITE_P(
    Sweeps, ExhaustiveFp8FmaSweep,
    testing::Values(FmaSweep{"fp8-e4m3fnuz", Rounding::nearest_even, Tininess::after_rounding},
                    FmaSweep{"fp8-e5m2fnuz", Rounding::nearest_even, Tininess::after_rounding},
                    FmaSweep{"fp8-e4m3fnuz", Rounding::down, Tininess::after_rounding},
                    FmaSweep{"fp8-e5m2fnuz", Rounding::up, Tininess::after_rounding},
                    FmaSweep{"fp8-e4m3", Rounding::up, Tininess::before_rounding},
                    FmaSweep{"fp8-e5m2", Rounding::toward_zero, Tininess::before_rounding}),
    [](const testing::TestParamInfo<FmaSweep>& param_info) {
      const FmaSweep& p = param_info.param;
      std::string s = std::string(p.format) + "_" + std::string(mpverify::formats::to_string(p.mode)) +
                      (p.tininess == Tininess::after_rounding ? "_after" : "_before");
      for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

}  // namespace
