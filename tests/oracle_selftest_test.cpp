// Sanity checks of the exact oracle (tests/oracle/) against facts worked out
// by hand from IEEE 754 and the formats table (refs: shared/reference/
// formats.md), and against the x86 F16C conversion instruction. Nothing
// expected here is produced by the oracle or by the emulator.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "emu/cpu_features.h"
#include "formats/format.h"
#include "formats/rounding.h"
#include "oracle/exact_oracle.h"

namespace {

using mpverify::formats::Flags;
using mpverify::formats::Format;
using mpverify::formats::parse_format;
using mpverify::formats::Rounding;
using mpverify::formats::RoundingContext;
using mpverify::formats::Tininess;
using mpverify::oracle::Oracle;
using mpverify::oracle::Result;

constexpr std::uint8_t NX = Flags::inexact;
constexpr std::uint8_t UF = Flags::underflow;
constexpr std::uint8_t OF = Flags::overflow;
constexpr std::uint8_t DZ = Flags::infinite;
constexpr std::uint8_t NV = Flags::invalid;

constexpr Rounding RNE = Rounding::nearest_even;
constexpr Rounding RTZ = Rounding::toward_zero;
constexpr Rounding UP = Rounding::up;
constexpr Rounding DOWN = Rounding::down;
constexpr Rounding RNA = Rounding::nearest_away;
constexpr Rounding ODD = Rounding::odd;
constexpr Rounding SR = Rounding::stochastic;

RoundingContext ctx(Rounding mode, Tininess t = Tininess::after_rounding) {
  RoundingContext rc;
  rc.mode = mode;
  rc.tininess = t;
  return rc;
}

std::string hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%X", v);
  return buf;
}

// One conversion fact: from_double(x) in `mode` gives `bits` and `flags`.
struct ConvCase {
  double x;
  Rounding mode;
  std::uint32_t bits;
  std::uint8_t flags;
  Tininess tininess = Tininess::after_rounding;
};

// Checks the cases and returns how many were checked.
std::size_t check_conversions(const Oracle& o, const std::vector<ConvCase>& cases) {
  std::size_t n = 0;
  for (const ConvCase& c : cases) {
    const Result r = o.from_double(c.x, ctx(c.mode, c.tininess));
    EXPECT_EQ(hex(r.bits), hex(c.bits)) << o.format().name << " from_double(" << c.x << " = "
                                        << std::hexfloat << c.x << std::defaultfloat
                                        << ") mode " << static_cast<int>(c.mode);
    EXPECT_EQ(hex(r.flags.bits), hex(c.flags)) << o.format().name << " from_double(" << std::hexfloat
                                               << c.x << std::defaultfloat << ") mode "
                                               << static_cast<int>(c.mode);
    ++n;
  }
  return n;
}

enum class Op { add, sub, mul, div, sqrt, fma };

struct OpCase {
  Op op;
  std::uint32_t a, b, c;
  Rounding mode;
  std::uint32_t bits;
  std::uint8_t flags;
};

std::size_t check_ops(const Oracle& o, const std::vector<OpCase>& cases) {
  std::size_t n = 0;
  for (const OpCase& c : cases) {
    const RoundingContext rc = ctx(c.mode);
    Result r;
    switch (c.op) {
      case Op::add: r = o.add(c.a, c.b, rc); break;
      case Op::sub: r = o.sub(c.a, c.b, rc); break;
      case Op::mul: r = o.mul(c.a, c.b, rc); break;
      case Op::div: r = o.div(c.a, c.b, rc); break;
      case Op::sqrt: r = o.sqrt(c.a, rc); break;
      case Op::fma: r = o.fma(c.a, c.b, c.c, rc); break;
    }
    EXPECT_EQ(hex(r.bits), hex(c.bits)) << o.format().name << " op " << static_cast<int>(c.op) << " "
                                        << hex(c.a) << " " << hex(c.b) << " " << hex(c.c) << " mode "
                                        << static_cast<int>(c.mode);
    EXPECT_EQ(hex(r.flags.bits), hex(c.flags)) << o.format().name << " op " << static_cast<int>(c.op)
                                               << " " << hex(c.a) << " " << hex(c.b) << " " << hex(c.c)
                                               << " mode " << static_cast<int>(c.mode);
    ++n;
  }
  return n;
}

double p2(int k) { return std::ldexp(1.0, k); }

// --- tables -------------------------------------------------------------------

TEST(OracleTable, Fp16) {
  const Oracle o(parse_format("fp16"));
  std::size_t n = 0;
  EXPECT_EQ(o.finite_count(), 0x7C00u); ++n;  // 31 binades x 1024
  EXPECT_EQ(o.max_finite_bits(), 0x7BFFu); ++n;
  EXPECT_EQ(o.value(0x7BFF), 65504.0); ++n;
  EXPECT_EQ(o.overflow_point(), 65536.0L); ++n;
  EXPECT_EQ(o.value(0x0001), p2(-24)); ++n;
  EXPECT_EQ(o.value(0x03FF), p2(-14) - p2(-24)); ++n;
  EXPECT_EQ(o.value(0x0400), p2(-14)); ++n;
  EXPECT_EQ(o.value(0x3C00), 1.0); ++n;
  EXPECT_EQ(o.value(0x3555), 0.333251953125); ++n;
  EXPECT_EQ(o.value(0xC000), -2.0); ++n;
  EXPECT_TRUE(std::signbit(o.value(0x8000))); ++n;
  EXPECT_EQ(o.value(0x7C00), std::numeric_limits<double>::infinity()); ++n;
  EXPECT_TRUE(std::isnan(o.value(0x7E00))); ++n;
  EXPECT_EQ(hex(o.default_nan()), "0xFE00"); ++n;
  EXPECT_TRUE(o.is_signaling_nan(0x7D00)); ++n;
  EXPECT_FALSE(o.is_signaling_nan(0x7E00)); ++n;
  EXPECT_EQ(hex(o.quiet(0x7D01)), "0x7F01"); ++n;
  EXPECT_EQ(n, 17u);
}

TEST(OracleTable, OtherPresets) {
  std::size_t n = 0;
  {
    const Oracle o(parse_format("bf16"));
    EXPECT_EQ(o.max_finite_bits(), 0x7F7Fu); ++n;
    EXPECT_EQ(o.value(0x7F7F), (2.0 - p2(-7)) * p2(127)); ++n;
    EXPECT_EQ(o.overflow_point(), std::ldexp(1.0L, 128)); ++n;
    EXPECT_EQ(o.value(0x0001), p2(-133)); ++n;
    EXPECT_EQ(o.value(0x0080), p2(-126)); ++n;
    EXPECT_EQ(hex(o.default_nan()), "0xFFC0"); ++n;
  }
  {
    const Oracle o(parse_format("tf32"));
    EXPECT_EQ(hex(o.max_finite_bits()), "0x3FBFF"); ++n;
    EXPECT_EQ(o.value(0x3FBFF), (2.0 - p2(-10)) * p2(127)); ++n;
    EXPECT_EQ(o.value(0x00001), p2(-136)); ++n;
    EXPECT_EQ(hex(o.default_nan()), "0x7FE00"); ++n;
    EXPECT_EQ(o.finite_count(), 255u * 1024u); ++n;  // exponent fields 0..254
  }
  {
    const Oracle o(parse_format("fp8-e4m3"));
    EXPECT_EQ(hex(o.max_finite_bits()), "0x7E"); ++n;
    EXPECT_EQ(o.value(0x7E), 448.0); ++n;
    EXPECT_EQ(o.overflow_point(), 480.0L); ++n;
    EXPECT_EQ(o.value(0x01), p2(-9)); ++n;
    EXPECT_EQ(o.value(0x08), p2(-6)); ++n;
    EXPECT_TRUE(o.is_nan(0x7F)); ++n;
    EXPECT_TRUE(o.is_nan(0xFF)); ++n;
    EXPECT_FALSE(o.is_nan(0x7E)); ++n;
    EXPECT_FALSE(o.is_infinity(0x78)); ++n;
    EXPECT_EQ(o.value(0x78), 256.0); ++n;
    EXPECT_EQ(hex(o.default_nan()), "0xFF"); ++n;
  }
  {
    const Oracle o(parse_format("fp8-e5m2"));
    EXPECT_EQ(hex(o.max_finite_bits()), "0x7B"); ++n;
    EXPECT_EQ(o.value(0x7B), 57344.0); ++n;
    EXPECT_EQ(o.overflow_point(), 65536.0L); ++n;
    EXPECT_EQ(o.value(0x01), p2(-16)); ++n;
    EXPECT_TRUE(o.is_infinity(0x7C)); ++n;
    EXPECT_EQ(hex(o.default_nan()), "0xFE"); ++n;
  }
  {
    const Oracle o(parse_format("fp8-e4m3fnuz"));  // bias 8
    EXPECT_EQ(hex(o.max_finite_bits()), "0x7F"); ++n;
    EXPECT_EQ(o.value(0x7F), 240.0); ++n;
    EXPECT_EQ(o.overflow_point(), 256.0L); ++n;
    EXPECT_EQ(o.value(0x01), p2(-10)); ++n;
    EXPECT_EQ(o.value(0x40), 1.0); ++n;
    EXPECT_TRUE(o.is_nan(0x80)); ++n;
    EXPECT_EQ(hex(o.default_nan()), "0x80"); ++n;
  }
  {
    const Oracle o(parse_format("fp8-e5m2fnuz"));  // bias 16
    EXPECT_EQ(hex(o.max_finite_bits()), "0x7F"); ++n;
    EXPECT_EQ(o.value(0x7F), 57344.0); ++n;
    EXPECT_EQ(o.value(0x01), p2(-17)); ++n;
    EXPECT_EQ(o.value(0x40), 1.0); ++n;
  }
  EXPECT_EQ(n, 39u);
}

// --- conversions ------------------------------------------------------------------

TEST(OracleConvert, Fp16Facts) {
  const Oracle o(parse_format("fp16"));
  const double mn = p2(-14);
  const std::vector<ConvCase> cases = {
      {65504.0, RNE, 0x7BFF, 0},
      {-65504.0, RNE, 0xFBFF, 0},
      {65519.99, RNE, 0x7BFF, NX},
      {65520.0, RNE, 0x7C00, OF | NX},  // the tie with 65536 goes to the even (infinite) side
      {-65520.0, RNE, 0xFC00, OF | NX},
      {65520.0, RNA, 0x7C00, OF | NX},
      {65520.0, RTZ, 0x7BFF, NX},
      {65536.0, RTZ, 0x7BFF, OF | NX},
      {1e6, RTZ, 0x7BFF, OF | NX},
      {1e6, UP, 0x7C00, OF | NX},
      {1e6, DOWN, 0x7BFF, OF | NX},
      {-1e6, DOWN, 0xFC00, OF | NX},
      {-1e6, UP, 0xFBFF, OF | NX},
      {1e6, ODD, 0x7BFF, OF | NX},
      {65505.0, UP, 0x7C00, OF | NX},
      {65505.0, ODD, 0x7BFF, NX},
      {1.0 + p2(-11), RNE, 0x3C00, NX},
      {1.0 + p2(-11), RNA, 0x3C01, NX},
      {1.0 + p2(-11), RTZ, 0x3C00, NX},
      {1.0 + p2(-11), UP, 0x3C01, NX},
      {-1.0 - p2(-11), UP, 0xBC00, NX},
      {-1.0 - p2(-11), DOWN, 0xBC01, NX},
      {1.0 + 3 * p2(-11), RNE, 0x3C02, NX},
      {1.0 + p2(-11) + p2(-40), RNE, 0x3C01, NX},
      {1.0 + p2(-12), ODD, 0x3C01, NX},
      {1.0 + p2(-10), ODD, 0x3C01, 0},
      {1.0 + p2(-9) + p2(-12), ODD, 0x3C03, NX},
      {1.0 / 3.0, RNE, 0x3555, NX},
      {0.1, RNE, 0x2E66, NX},
      {0.0, RNE, 0x0000, 0},
      {-0.0, RNE, 0x8000, 0},
      {p2(-24), RNE, 0x0001, 0},
      {p2(-25), RNE, 0x0000, UF | NX},
      {-p2(-25), RNE, 0x8000, UF | NX},
      {p2(-25), RNA, 0x0001, UF | NX},
      {3 * p2(-26), RNE, 0x0001, UF | NX},
      {p2(-30), UP, 0x0001, UF | NX},
      {p2(-30), DOWN, 0x0000, UF | NX},
      {-p2(-30), DOWN, 0x8001, UF | NX},
      {p2(-30), ODD, 0x0001, UF | NX},
      {p2(-30), RTZ, 0x0000, UF | NX},
      {p2(-1074), RNE, 0x0000, UF | NX},
      {3 * p2(-24), RNE, 0x0003, 0},   // exact subnormal: no underflow
      {2.5 * p2(-24), RNE, 0x0002, UF | NX},
      {3.5 * p2(-24), RNE, 0x0004, UF | NX},
      // Just below min normal: 2^-14 - 2^-26 is a quarter of a subnormal ulp
      // below 2^-14 and, with 11 bits and an unbounded exponent, the tie
      // between 2^-14 - 2^-25 (odd) and 2^-14 (even): not tiny after rounding.
      {mn - p2(-26), RNE, 0x0400, NX},
      {mn - p2(-26), RNE, 0x0400, UF | NX, Tininess::before_rounding},
      {mn - p2(-26) - p2(-40), RNE, 0x0400, UF | NX},
      {mn - p2(-26) + p2(-40), RNE, 0x0400, NX},
      {mn - p2(-25), RNE, 0x0400, UF | NX},  // halfway between subnormals 0x3FF and 0x400
      {mn - p2(-26), RTZ, 0x03FF, UF | NX},
      {mn - p2(-26), UP, 0x0400, NX},        // unbounded exponent, upward: 2^-14, not tiny
      {mn - p2(-26), RNA, 0x0400, NX},
      {mn, RNE, 0x0400, 0},
      {mn + p2(-40), RNE, 0x0400, NX},
      {std::numeric_limits<double>::infinity(), RNE, 0x7C00, 0},
      {-std::numeric_limits<double>::infinity(), RTZ, 0xFC00, 0},
      {std::bit_cast<double>(0x7FF8000000000000ull), RNE, 0x7E00, 0},
      {std::bit_cast<double>(0xFFF8000000000000ull), RNE, 0xFE00, 0},
      {std::bit_cast<double>(0x7FF0000000000001ull), RNE, 0x7E00, NV},  // signalling, payload below fp16's
      {std::bit_cast<double>(0xFFF4000000000000ull), RNE, 0xFF00, NV},  // payload bit 50 -> fp16 bit 8
      {std::bit_cast<double>(0x7FFC000000000000ull), RNE, 0x7F00, 0},
  };
  EXPECT_EQ(check_conversions(o, cases), 62u);
}

TEST(OracleConvert, OtherFormats) {
  std::size_t n = 0;
  {
    const Oracle o(parse_format("bf16"));
    n += check_conversions(o, {
        {1.0 + p2(-8), RNE, 0x3F80, NX},
        {1.0 + p2(-8), RNA, 0x3F81, NX},
        {1.0 + 3 * p2(-8), RNE, 0x3F82, NX},
        {1.0 + p2(-8) + p2(-40), RNE, 0x3F81, NX},
        {(2.0 - p2(-7)) * p2(127), RNE, 0x7F7F, 0},
        {(2.0 - p2(-8)) * p2(127), RNE, 0x7F80, OF | NX},
        {(2.0 - p2(-8)) * p2(127), RTZ, 0x7F7F, NX},
        {1e39, RNE, 0x7F80, OF | NX},
        {p2(-134), RNE, 0x0000, UF | NX},
        {p2(-133), RNE, 0x0001, 0},
        {3.0, RNE, 0x4040, 0},
    });
  }
  {
    const Oracle o(parse_format("fp8-e4m3"));  // overflow policy nan
    n += check_conversions(o, {
        {448.0, RNE, 0x7E, 0},
        {464.0, RNE, 0x7E, NX},   // tie 448 (0x7E, even) / 480 (would be 0x7F)
        {465.0, RNE, 0x7F, OF | NX},
        {-465.0, RNE, 0xFF, OF | NX},
        {464.0, RNA, 0x7F, OF | NX},
        {480.0, RTZ, 0x7E, OF | NX},
        {1000.0, DOWN, 0x7E, OF | NX},
        {-1000.0, DOWN, 0xFF, OF | NX},
        // Round to odd picks the odd neighbour 480 (the position of 0x7F,
        // NaN): that is an overflow, and odd never overflows to NaN/inf.
        {449.0, ODD, 0x7E, OF | NX},
        {470.0, ODD, 0x7E, OF | NX},
        {std::numeric_limits<double>::infinity(), RNE, 0x7F, NV},
        {-std::numeric_limits<double>::infinity(), RNE, 0xFF, NV},
        {std::bit_cast<double>(0xFFF8000000000000ull), RNE, 0xFF, 0},
        {p2(-9), RNE, 0x01, 0},
        {p2(-10), RNE, 0x00, UF | NX},
        {-p2(-10), RNE, 0x80, UF | NX},
        {1.0625, RNE, 0x38, NX},   // tie 1 / 1.125 -> 1 (0x38)
        {1.1875, RNE, 0x3A, NX},   // tie 1.125 / 1.25 -> 1.25 (0x3A)
        {-0.0, RNE, 0x80, 0},
    });
  }
  {
    const Oracle o(parse_format("fp8-e4m3:saturate"));
    n += check_conversions(o, {
        {448.0, RNE, 0x7E, 0},
        {1000.0, RNE, 0x7E, OF | NX},
        {-1000.0, RNA, 0xFE, OF | NX},
        {-std::numeric_limits<double>::infinity(), RNE, 0xFE, OF | NX},
    });
  }
  {
    const Oracle o(parse_format("fp8-e5m2"));
    n += check_conversions(o, {
        {57344.0, RNE, 0x7B, 0},
        {61439.0, RNE, 0x7B, NX},
        {61440.0, RNE, 0x7C, OF | NX},
        {61440.0, RTZ, 0x7B, NX},
        {p2(-16), RNE, 0x01, 0},
        {p2(-17), RNE, 0x00, UF | NX},
        {1.125, RNE, 0x3C, NX},
        {1.375, RNE, 0x3E, NX},
    });
  }
  {
    const Oracle o(parse_format("fp8-e4m3fnuz"));
    n += check_conversions(o, {
        {240.0, RNE, 0x7F, 0},
        {-0.0, RNE, 0x00, 0},
        {-p2(-12), RNE, 0x00, UF | NX},
        {-p2(-10), RNE, 0x81, 0},
        {std::numeric_limits<double>::infinity(), RNE, 0x80, NV},
        {std::bit_cast<double>(0xFFF8000000000000ull), RNE, 0x80, 0},
    });
  }
  EXPECT_EQ(n, 11u + 19u + 4u + 8u + 6u);
}

// 248 in e4m3fnuz: the tie between 240 (encoding 0x7F: odd) and the overflow
// point 256 (position 0x80: even) goes to 256, i.e. overflow -> NaN (policy nan).
TEST(OracleConvert, FnuzOverflowTie) {
  const Oracle o(parse_format("fp8-e4m3fnuz"));
  const std::size_t n = check_conversions(o, {
      {248.0, RTZ, 0x7F, NX},
      {247.0, RNE, 0x7F, NX},
      {256.0, RTZ, 0x7F, OF | NX},
      {-300.0, RNE, 0x80, OF | NX},
  });
  const Result r = o.from_double(248.0, ctx(RNE));
  EXPECT_EQ(hex(r.bits), "0x80");
  EXPECT_EQ(hex(r.flags.bits), hex(OF | NX));
  EXPECT_EQ(n + 1, 5u);
}

// --- stochastic rounding ----------------------------------------------------------

TEST(OracleStochastic, Threshold) {
  const Oracle o(parse_format("fp16"));
  std::size_t n = 0;
  // 1 + 2^-10 * (3/8): the fraction is 0.375; with 3 random bits F = 3, so
  // the value rounds up iff random mod 8 >= 5.
  for (std::uint32_t r = 0; r < 16; ++r) {
    RoundingContext rc = ctx(SR);
    rc.random_bits = 3;
    rc.random = r;
    const Result res = o.from_double(1.0 + 3 * p2(-13), rc);
    EXPECT_EQ(hex(res.bits), hex((r % 8) >= 5 ? 0x3C01 : 0x3C00)) << r;
    EXPECT_EQ(res.flags.bits, NX);
    ++n;
  }
  // With 32 bits and fraction 1/2: up iff random >= 2^31.
  for (std::uint32_t r : {0u, 1u, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu}) {
    RoundingContext rc = ctx(SR);
    rc.random = r;
    const Result res = o.from_double(-(2.0 + p2(-10)), rc);
    EXPECT_EQ(hex(res.bits), hex(r >= 0x80000000u ? 0xC001 : 0xC000)) << r;
    ++n;
  }
  // Exact values never move.
  RoundingContext rc = ctx(SR);
  rc.random = 0xFFFFFFFFu;
  EXPECT_EQ(o.from_double(1.5, rc).bits, 0x3E00u); ++n;
  // Overflow: 65504 + 31/32 ulp rounds up for random >= 1/32 of the range.
  rc.random_bits = 5;
  rc.random = 1;
  EXPECT_EQ(hex(o.from_double(65504.0 + 31.0, rc).bits), "0x7C00"); ++n;
  rc.random = 0;
  EXPECT_EQ(hex(o.from_double(65504.0 + 31.0, rc).bits), "0x7BFF"); ++n;
  EXPECT_EQ(n, 24u);
}

// A division whose exact quotient lies just below a stochastic threshold:
// 1/3 in fp16 binade [0.25, 0.5): ulp 2^-12, 1/3 = 0x3555 (0.333251953125) +
// fraction 1/3 of an ulp; with 1 random bit F = floor(2/3) = 0 and with 2 bits
// F = floor(4/3) = 1.
TEST(OracleStochastic, InexactQuotient) {
  const Oracle o(parse_format("fp16"));
  std::size_t n = 0;
  for (std::uint32_t r = 0; r < 4; ++r) {
    RoundingContext rc = ctx(SR);
    rc.random_bits = 2;
    rc.random = r;
    EXPECT_EQ(hex(o.div(0x3C00, 0x4200, rc).bits), hex(r == 3 ? 0x3556 : 0x3555)) << r;
    rc.random_bits = 1;
    EXPECT_EQ(hex(o.div(0x3C00, 0x4200, rc).bits), "0x3555") << r;
    n += 2;
  }
  EXPECT_EQ(n, 8u);
}

// --- arithmetic --------------------------------------------------------------------

TEST(OracleArith, Fp16Facts) {
  const Oracle o(parse_format("fp16"));
  const std::vector<OpCase> cases = {
      {Op::add, 0x3C00, 0x3C00, 0, RNE, 0x4000, 0},
      {Op::add, 0x7BFF, 0x5000, 0, RNE, 0x7C00, OF | NX},  // 65504 + 32 = 65536
      {Op::add, 0x7BFF, 0x4C00, 0, RNE, 0x7C00, OF | NX},  // 65520: tie to even (inf side)
      {Op::add, 0x7BFF, 0x4C00, 0, RTZ, 0x7BFF, NX},
      {Op::add, 0x7BFF, 0x4800, 0, RNE, 0x7BFF, NX},       // 65512
      {Op::add, 0x3C00, 0xBC00, 0, RNE, 0x0000, 0},
      {Op::add, 0x3C00, 0xBC00, 0, DOWN, 0x8000, 0},
      {Op::add, 0x3C00, 0xBC00, 0, SR, 0x0000, 0},
      {Op::add, 0x8000, 0x8000, 0, RNE, 0x8000, 0},
      {Op::add, 0x0000, 0x8000, 0, RNE, 0x0000, 0},
      {Op::add, 0x0000, 0x8000, 0, DOWN, 0x8000, 0},
      {Op::sub, 0x0000, 0x0000, 0, RNE, 0x0000, 0},
      {Op::sub, 0x0000, 0x0000, 0, DOWN, 0x8000, 0},
      {Op::sub, 0x8000, 0x0000, 0, RNE, 0x8000, 0},
      {Op::sub, 0x3C00, 0x3C01, 0, RNE, 0x9400, 0},        // -2^-10
      {Op::add, 0x0001, 0x0001, 0, RNE, 0x0002, 0},        // exact subnormal sum: no flags
      {Op::add, 0x03FF, 0x0001, 0, RNE, 0x0400, 0},
      {Op::add, 0x7C00, 0xFC00, 0, RNE, 0xFE00, NV},
      {Op::sub, 0x7C00, 0x7C00, 0, RNE, 0xFE00, NV},
      {Op::add, 0x7C00, 0x7C00, 0, RNE, 0x7C00, 0},
      {Op::add, 0x7C00, 0xFBFF, 0, RNE, 0x7C00, 0},
      {Op::add, 0x7E00, 0x7D00, 0, RNE, 0x7E00, NV},       // first NaN, quiet; sNaN raises
      {Op::add, 0x7D00, 0x7E01, 0, RNE, 0x7F00, NV},
      {Op::add, 0x3C00, 0xFD00, 0, RNE, 0xFF00, NV},
      {Op::add, 0x7E05, 0xFE06, 0, RNE, 0x7E05, 0},
      {Op::sub, 0x3C00, 0x7E07, 0, RNE, 0x7E07, 0},        // NaN sign not flipped by sub
      {Op::mul, 0x0000, 0x7C00, 0, RNE, 0xFE00, NV},
      {Op::mul, 0xFC00, 0x8000, 0, RNE, 0xFE00, NV},
      {Op::mul, 0x8000, 0x3C00, 0, RNE, 0x8000, 0},
      {Op::mul, 0xFC00, 0xBC00, 0, RNE, 0x7C00, 0},
      {Op::mul, 0x0001, 0x3800, 0, RNE, 0x0000, UF | NX},  // 2^-25: tie to even zero
      {Op::mul, 0x0001, 0x3A00, 0, RNE, 0x0001, UF | NX},  // 0.75 * 2^-24
      {Op::mul, 0x8001, 0x3800, 0, RNE, 0x8000, UF | NX},
      {Op::mul, 0x3C01, 0x3C01, 0, RNE, 0x3C02, NX},       // 1 + 2^-9 + 2^-20
      {Op::mul, 0x5C00, 0x5C00, 0, RNE, 0x7C00, OF | NX},  // 256 * 256 = 65536
      {Op::mul, 0x5C00, 0x5C00, 0, DOWN, 0x7BFF, OF | NX},
      {Op::mul, 0x5BFF, 0x5BFF, 0, RNE, 0x7BFE, NX},       // 255.875^2 = 65472.015625
      {Op::div, 0x3C00, 0x0000, 0, RNE, 0x7C00, DZ},
      {Op::div, 0xBC00, 0x0000, 0, RNE, 0xFC00, DZ},
      {Op::div, 0x3C00, 0x8000, 0, RNE, 0xFC00, DZ},
      {Op::div, 0x0000, 0x0000, 0, RNE, 0xFE00, NV},
      {Op::div, 0x7C00, 0xFC00, 0, RNE, 0xFE00, NV},
      {Op::div, 0x7C00, 0x0000, 0, RNE, 0x7C00, 0},
      {Op::div, 0x3C00, 0x7C00, 0, RNE, 0x0000, 0},
      {Op::div, 0xBC00, 0x7C00, 0, RNE, 0x8000, 0},
      {Op::div, 0x3C00, 0x4200, 0, RNE, 0x3555, NX},       // 1/3
      {Op::div, 0x3C00, 0x4200, 0, UP, 0x3556, NX},
      {Op::div, 0x4200, 0x4200, 0, RNE, 0x3C00, 0},
      {Op::div, 0x0400, 0x4000, 0, RNE, 0x0200, 0},        // exact subnormal quotient
      {Op::div, 0x0001, 0x4000, 0, RNE, 0x0000, UF | NX},
      {Op::sqrt, 0x4000, 0, 0, RNE, 0x3DA8, NX},           // sqrt(2) = 1.4140625
      {Op::sqrt, 0x4000, 0, 0, UP, 0x3DA9, NX},
      {Op::sqrt, 0x4400, 0, 0, RNE, 0x4000, 0},
      {Op::sqrt, 0x8000, 0, 0, RNE, 0x8000, 0},
      {Op::sqrt, 0xBC00, 0, 0, RNE, 0xFE00, NV},
      {Op::sqrt, 0xFC00, 0, 0, RNE, 0xFE00, NV},
      {Op::sqrt, 0x7C00, 0, 0, RNE, 0x7C00, 0},
      {Op::sqrt, 0x7D00, 0, 0, RNE, 0x7F00, NV},
      {Op::sqrt, 0x0001, 0, 0, RNE, 0x0C00, 0},            // sqrt(2^-24) = 2^-12
      {Op::fma, 0x3C00, 0x3C00, 0xBC00, RNE, 0x0000, 0},
      {Op::fma, 0x3C00, 0x3C00, 0xBC00, DOWN, 0x8000, 0},
      {Op::fma, 0x0000, 0x3C00, 0x8000, RNE, 0x0000, 0},   // +0 + -0
      {Op::fma, 0x8000, 0x3C00, 0x8000, RNE, 0x8000, 0},   // -0 + -0
      {Op::fma, 0x0000, 0x7C00, 0x7E00, RNE, 0xFE00, NV},  // 0*inf + qNaN: invalid
      {Op::fma, 0x7C00, 0x3C00, 0xFC00, RNE, 0xFE00, NV},
      {Op::fma, 0x7C00, 0x3C00, 0x7C00, RNE, 0x7C00, 0},
      {Op::fma, 0x7C00, 0x3C00, 0x7E03, RNE, 0x7E03, 0},
      {Op::fma, 0x3C00, 0x3C00, 0x7D00, RNE, 0x7F00, NV},
      {Op::fma, 0x7E01, 0x7E02, 0x7D03, RNE, 0x7E01, NV},
      {Op::fma, 0x3C00, 0x7E02, 0x7E03, RNE, 0x7E02, 0},
      {Op::fma, 0x3C01, 0x3C01, 0xBC00, RNE, 0x1800, NX},  // 2^-9 + 2^-20: tie to even
      {Op::fma, 0x3C01, 0x3C01, 0xBC00, UP, 0x1801, NX},
      {Op::fma, 0x3C01, 0x3C01, 0xBC01, RNE, 0x1401, 0},   // 2^-10 + 2^-20: exact
      {Op::fma, 0x7BFF, 0x4000, 0xFBFF, RNE, 0x7BFF, 0},   // 2*65504 - 65504: exact
      {Op::fma, 0x0001, 0x0001, 0x3C00, RNE, 0x3C00, NX},  // 1 + 2^-48
      {Op::fma, 0x0001, 0x0001, 0x3C00, UP, 0x3C01, NX},
      {Op::fma, 0x0001, 0x0001, 0xBC00, RTZ, 0xBBFF, NX},
      {Op::fma, 0x0001, 0x0001, 0x0000, RNE, 0x0000, UF | NX},
  };
  EXPECT_EQ(check_ops(o, cases), 78u);
}

// A sum of wildly different magnitudes (TwoSum must keep the tiny part).
TEST(OracleArith, Bf16FarApart) {
  const Oracle o(parse_format("bf16"));
  const std::vector<OpCase> cases = {
      {Op::add, 0x7F7F, 0x0001, 0, RNE, 0x7F7F, NX},
      {Op::add, 0x7F7F, 0x0001, 0, UP, 0x7F80, OF | NX},
      {Op::add, 0x7F7F, 0x8001, 0, RTZ, 0x7F7E, NX},
      {Op::add, 0x7F7F, 0x8001, 0, RNE, 0x7F7F, NX},
      {Op::add, 0x3F80, 0x0001, 0, ODD, 0x3F81, NX},
      {Op::add, 0x3F80, 0x8001, 0, ODD, 0x3F7F, NX},       // just below 1: 0x3F7F has odd fraction
      {Op::sub, 0x3F80, 0x0001, 0, DOWN, 0x3F7F, NX},
      {Op::fma, 0x3F81, 0x3F81, 0xBF80, RNE, 0x3C80, NX},  // (1+2^-7)^2 - 1 = 2^-6 + 2^-14 (tie)
      {Op::mul, 0x0080, 0x3F00, 0, RNE, 0x0040, 0},        // 2^-126 * 0.5: exact subnormal
      {Op::mul, 0x0080, 0x0080, 0, UP, 0x0001, UF | NX},
  };
  EXPECT_EQ(check_ops(o, cases), 10u);
}

TEST(OracleArith, Fp8Facts) {
  std::size_t n = 0;
  {
    const Oracle o(parse_format("fp8-e4m3"));
    n += check_ops(o, {
        {Op::add, 0x7E, 0x7E, 0, RNE, 0x7F, OF | NX},    // 896 -> NaN (policy nan)
        {Op::add, 0x7E, 0x7E, 0, RTZ, 0x7E, OF | NX},
        {Op::add, 0x7E, 0x7E, 0, ODD, 0x7E, OF | NX},
        {Op::add, 0x7E, 0x58, 0, RNE, 0x7E, NX},         // 448 + 16 = 464: tie to 448
        {Op::add, 0xFE, 0xD8, 0, RNE, 0xFE, NX},
        {Op::add, 0x7E, 0x59, 0, RNE, 0x7F, OF | NX},    // 448 + 18
        {Op::add, 0x7F, 0x38, 0, RNE, 0x7F, 0},          // NaN propagates, no sNaN in fn
        {Op::add, 0x38, 0xFF, 0, RNE, 0xFF, 0},
        {Op::div, 0x38, 0x00, 0, RNE, 0xFF, DZ},         // no infinity: default NaN
        {Op::div, 0x00, 0x00, 0, RNE, 0xFF, NV},
        {Op::sqrt, 0xB8, 0, 0, RNE, 0xFF, NV},
        {Op::add, 0x38, 0xB8, 0, RNE, 0x00, 0},
        {Op::add, 0x38, 0xB8, 0, DOWN, 0x80, 0},
        {Op::mul, 0x01, 0x30, 0, RNE, 0x00, UF | NX},    // 2^-9 * 0.5
    });
  }
  {
    const Oracle o(parse_format("fp8-e4m3:saturate"));
    n += check_ops(o, {
        {Op::add, 0x7E, 0x7E, 0, RNE, 0x7E, OF | NX},
        {Op::div, 0xB8, 0x00, 0, RNE, 0xFE, DZ},
    });
  }
  {
    const Oracle o(parse_format("fp8-e4m3fnuz"));
    n += check_ops(o, {
        {Op::add, 0x40, 0xC0, 0, DOWN, 0x00, 0},         // no negative zero
        {Op::mul, 0x81, 0x01, 0, RNE, 0x00, UF | NX},
        {Op::sub, 0x00, 0x00, 0, DOWN, 0x00, 0},
        {Op::sqrt, 0x00, 0, 0, RNE, 0x00, 0},
        {Op::add, 0x80, 0x40, 0, RNE, 0x80, 0},
        {Op::div, 0x40, 0x00, 0, RNE, 0x80, DZ},
        {Op::add, 0x7F, 0x7F, 0, RNE, 0x80, OF | NX},
        {Op::add, 0x7F, 0x7F, 0, UP, 0x80, OF | NX},
        {Op::add, 0x7F, 0x7F, 0, DOWN, 0x7F, OF | NX},
    });
  }
  {
    const Oracle o(parse_format("fp8-e5m2"));
    n += check_ops(o, {
        {Op::add, 0x7B, 0x7B, 0, RNE, 0x7C, OF | NX},
        {Op::add, 0x7D, 0x3C, 0, RNE, 0x7F, NV},         // sNaN quieted (fraction 01 -> 11)
        {Op::mul, 0x7C, 0x00, 0, RNE, 0xFE, NV},
        {Op::div, 0x3C, 0x80, 0, RNE, 0xFC, DZ},
    });
  }
  EXPECT_EQ(n, 14u + 2u + 9u + 4u);
}

// Subnormals off (":ftz"): subnormal results flush to signed zero with
// underflow|inexact; subnormal operands read as zero.
TEST(OracleArith, FlushToZero) {
  const Oracle o(parse_format("fp16:ftz"));
  std::size_t n = check_conversions(o, {
      {p2(-20), RNE, 0x0000, UF | NX},
      {-p2(-20), RNE, 0x8000, UF | NX},
      {p2(-14), RNE, 0x0400, 0},
      {p2(-14) - p2(-26), RNE, 0x0400, NX},  // rounds to min normal; not tiny after rounding
      {p2(-14) - p2(-24), RTZ, 0x0000, UF | NX},
  });
  n += check_ops(o, {
      {Op::add, 0x0001, 0x0001, 0, RNE, 0x0000, 0},  // operands read as +0
      {Op::mul, 0x8001, 0x3C00, 0, RNE, 0x8000, 0},
      {Op::add, 0x0401, 0x8400, 0, RNE, 0x0000, UF | NX},  // 2^-24 exact but subnormal: flushed
      {Op::div, 0x3C00, 0x0001, 0, RNE, 0x7C00, DZ},
  });
  EXPECT_EQ(n, 9u);
}

// --- against hardware ---------------------------------------------------------

__attribute__((target("f16c"))) std::uint16_t f16c_convert(float x) {
  return static_cast<std::uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}

__attribute__((target("f16c"))) float f16c_widen(std::uint16_t h) { return _cvtsh_ss(h); }

using mpverify::emu::cpu_has_f16c;  // CPUID: clang 16 rejects __builtin_cpu_supports("f16c")

// fp32 -> fp16 (RNE) for about 4.3 million float bit patterns spread over the
// whole encoding space, NaNs included (F16C keeps the top payload bits).
TEST(OracleHardware, FromFloatMatchesF16c) {
  if (!cpu_has_f16c()) GTEST_SKIP() << "no F16C on this CPU";
  const Oracle o(parse_format("fp16"));
  const RoundingContext rc = ctx(RNE);
  std::uint64_t count = 0, mismatches = 0;
  constexpr std::uint64_t stride = 997;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; u += stride) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(u));
    const std::uint32_t expected = f16c_convert(x);
    const std::uint32_t got = o.from_float(x, rc).bits;
    if (got != expected && ++mismatches <= 10)
      ADD_FAILURE() << "from_float(" << hex(static_cast<std::uint32_t>(u)) << "): F16C " << hex(expected)
                    << ", oracle " << hex(got);
    ++count;
  }
  // Dense around the fp16 range boundaries: every float in a window near
  // 65504..65536, near 2^-14 and near 2^-25.
  for (float centre : {65520.0f, 6.103515625e-05f, 2.98023223876953125e-08f, 1.0f}) {
    const std::uint32_t c = std::bit_cast<std::uint32_t>(centre);
    for (std::uint32_t d = 0; d < 40000; ++d) {
      for (std::uint32_t s : {0u, 0x80000000u}) {
        const std::uint32_t u = (c - 20000 + d) | s;
        const float x = std::bit_cast<float>(u);
        const std::uint32_t expected = f16c_convert(x);
        const std::uint32_t got = o.from_float(x, rc).bits;
        if (got != expected && ++mismatches <= 10)
          ADD_FAILURE() << "from_float(" << hex(u) << "): F16C " << hex(expected) << ", oracle " << hex(got);
        ++count;
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(count, (0xFFFFFFFFull / stride + 1) + 4u * 40000u * 2u);
}

// fp16 arithmetic via float: a op b in float, then F16C RNE. Exact operands
// of 11 bits, 24 >= 2*11 + 2, so the double rounding is innocuous for +,-,*,/
// and sqrt. Every pair over a strided grid of non-NaN fp16 encodings.
TEST(OracleHardware, Fp16ArithmeticMatchesFloatThenF16c) {
  if (!cpu_has_f16c()) GTEST_SKIP() << "no F16C on this CPU";
  const Oracle o(parse_format("fp16"));
  const RoundingContext rc = ctx(RNE);
  std::vector<std::uint32_t> values;
  for (std::uint32_t b = 0; b < 0x10000; b += 37)
    if ((b & 0x7C00) != 0x7C00 || (b & 0x3FF) == 0) values.push_back(b);
  for (std::uint32_t b : {0x0000u, 0x8000u, 0x0001u, 0x03FFu, 0x0400u, 0x7BFFu, 0x3C00u, 0x7C00u, 0xFC00u})
    values.push_back(b);
  std::uint64_t count = 0, mismatches = 0;
  auto check = [&](const char* op, std::uint32_t a, std::uint32_t b, float exact_in_float, std::uint32_t got) {
    ++count;
    if (std::isnan(exact_in_float)) {
      if (!o.is_nan(got) && ++mismatches <= 10) ADD_FAILURE() << op << " " << hex(a) << " " << hex(b) << " should be NaN";
      return;
    }
    const std::uint32_t expected = f16c_convert(exact_in_float);
    if (got != expected && ++mismatches <= 10)
      ADD_FAILURE() << op << " " << hex(a) << " " << hex(b) << ": float+F16C " << hex(expected) << ", oracle "
                    << hex(got);
  };
  for (std::uint32_t a : values) {
    const float fa = f16c_widen(static_cast<std::uint16_t>(a));
    check("sqrt", a, 0, std::sqrt(fa), o.sqrt(a, rc).bits);
    for (std::uint32_t b : values) {
      const float fb = f16c_widen(static_cast<std::uint16_t>(b));
      check("add", a, b, fa + fb, o.add(a, b, rc).bits);
      check("sub", a, b, fa - fb, o.sub(a, b, rc).bits);
      check("mul", a, b, fa * fb, o.mul(a, b, rc).bits);
      check("div", a, b, fa / fb, o.div(a, b, rc).bits);
    }
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(count, values.size() + 4u * values.size() * values.size());
}

// The cache hands out one oracle per format.
TEST(OracleCache, OnePerFormat) {
  const Oracle& a = Oracle::for_format(parse_format("fp16"));
  const Oracle& b = Oracle::for_format(parse_format("fp16"));
  const Oracle& c = Oracle::for_format(parse_format("bf16"));
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
  EXPECT_EQ(c.format().name, "bf16");
  std::size_t n = 3;
  EXPECT_THROW(Oracle(mpverify::formats::custom_format(8, 16)), std::invalid_argument);
  ++n;
  EXPECT_EQ(n, 4u);
}

}  // namespace
