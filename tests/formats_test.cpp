// Unit tests of the format descriptors and the scalar emulator on cases
// worked out by hand (the expected values come from the formats table in
// shared/reference/formats.md and from IEEE 754, never from the emulator).
#include <gtest/gtest.h>

#include <cmath>

#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/format.h"

namespace {

using namespace mpverify::formats;

constexpr std::uint8_t kInexact = Flags::inexact, kUnderflow = Flags::underflow, kOverflow = Flags::overflow,
                       kInfinite = Flags::infinite, kInvalid = Flags::invalid;

struct Rounded {
  std::uint32_t bits;
  std::uint8_t flags;
  friend bool operator==(const Rounded&, const Rounded&) = default;
};
std::ostream& operator<<(std::ostream& os, const Rounded& r) {
  return os << std::hex << "{0x" << r.bits << ", flags 0x" << int(r.flags) << "}" << std::dec;
}

Rounded round_to(std::string_view format, double x, Rounding mode = Rounding::nearest_even,
                 Tininess tininess = Tininess::after_rounding) {
  Flags flags;
  const std::uint32_t bits = from_double(parse_format(format), x, {mode, tininess}, flags);
  return {bits, flags.bits};
}

TEST(FormatPresets, ConstantsMatchTheFormatsTable) {
  struct Row { const char* name; int e, p; double max, min_normal, min_subnormal, lost; };
  const Row table[] = {
      {"fp16", 5, 11, 65504, 0x1p-14, 0x1p-24, 2048},
      {"bf16", 8, 8, 0x1.fep127, 0x1p-126, 0x1p-133, 256},
      {"tf32", 8, 11, 0x1.ffcp127, 0x1p-126, 0x1p-136, 2048},
      {"fp8-e4m3", 4, 4, 448, 0x1p-6, 0x1p-9, 16},
      {"fp8-e5m2", 5, 3, 57344, 0x1p-14, 0x1p-16, 8},
      {"fp8-e4m3fnuz", 4, 4, 240, 0x1p-7, 0x1p-10, 16},
      {"fp8-e5m2fnuz", 5, 3, 57344, 0x1p-15, 0x1p-17, 8},
      // OCP MX v1.0 (shared/reference/tensor-cores.md): FP4, FP6, the E8M0 scale (no
      // subnormals: its smallest value is 2^-127), and NVFP4's unsigned E4M3 scale.
      {"fp4-e2m1", 2, 2, 6, 1, 0.5, 4},
      {"fp6-e2m3", 2, 4, 7.5, 1, 0.125, 16},
      {"fp6-e3m2", 3, 3, 28, 0.25, 0.0625, 8},
      {"e8m0", 8, 1, 0x1p127, 0x1p-127, 0x1p-127, 2},
      {"ue4m3", 4, 4, 448, 0x1p-6, 0x1p-9, 16},
  };
  int checked = 0;
  for (const Row& r : table) {
    const Format f = parse_format(r.name);
    SCOPED_TRACE(r.name);
    EXPECT_EQ(f.exponent_bits, r.e);
    EXPECT_EQ(f.precision(), r.p);
    EXPECT_EQ(f.max_finite(), r.max);
    EXPECT_EQ(f.min_normal(), r.min_normal);
    EXPECT_EQ(f.min_subnormal(), r.min_subnormal);
    EXPECT_EQ(f.lost_update_ratio_needed(), r.lost);
    EXPECT_EQ(f.lost_update_ratio_sufficient(), std::ldexp(1.0, r.p + 1));
    EXPECT_EQ(f.epsilon(), std::ldexp(1.0, 1 - r.p));
    ++checked;
  }
  EXPECT_EQ(checked, 12);
  EXPECT_EQ(presets().size(), 10u);  // the element formats
  EXPECT_EQ(scale_presets().size(), 2u);  // e8m0, ue4m3
  EXPECT_EQ(all_presets().size(), 12u);
}

TEST(FormatPresets, SpecialEncodingsByName) {
  const Format fp16 = parse_format("fp16");
  EXPECT_TRUE(is_infinity(fp16, 0x7c00));
  EXPECT_TRUE(is_infinity(fp16, 0xfc00));
  EXPECT_TRUE(is_nan(fp16, 0x7e00));
  EXPECT_TRUE(is_signaling_nan(fp16, 0x7d00));
  EXPECT_EQ(to_double(fp16, 0x7bff), 65504.0);
  EXPECT_EQ(to_double(fp16, 0x0001), 0x1p-24);
  EXPECT_EQ(to_double(fp16, 0x0400), 0x1p-14);
  EXPECT_EQ(fp16.default_nan_bits(), 0xfe00u);  // x86's default NaN, narrowed
  const Format e4m3 = parse_format("fp8-e4m3");
  EXPECT_TRUE(is_nan(e4m3, 0x7f));
  EXPECT_TRUE(is_nan(e4m3, 0xff));
  EXPECT_FALSE(is_infinity(e4m3, 0x78));
  EXPECT_EQ(to_double(e4m3, 0x7e), 448.0);
  EXPECT_EQ(to_double(e4m3, 0x78), 256.0);  // all-ones exponent is an ordinary binade in fn
  const Format fnuz = parse_format("fp8-e4m3fnuz");
  EXPECT_TRUE(is_nan(fnuz, 0x80));
  EXPECT_FALSE(is_nan(fnuz, 0xff));
  EXPECT_EQ(to_double(fnuz, 0x7f), 240.0);
  EXPECT_EQ(to_double(parse_format("fp8-e5m2"), 0x7b), 57344.0);
}

TEST(FormatParsing, CustomAndModifiers) {
  const Format e5m7 = parse_format("e5m7");
  EXPECT_EQ(e5m7.exponent_bits, 5);
  EXPECT_EQ(e5m7.mantissa_bits, 7);
  EXPECT_EQ(e5m7.bias, 15);
  EXPECT_EQ(e5m7.lost_update_ratio_needed(), 256.0);
  EXPECT_EQ(e5m7.lost_update_ratio_sufficient(), 512.0);
  EXPECT_EQ(parse_format("fp8-e4m3:saturate").overflow, Overflow::saturate);
  EXPECT_FALSE(parse_format("fp16:ftz").subnormals);
  EXPECT_EQ(parse_format("e8m7"), [] { Format f = parse_format("bf16"); f.name = "e8m7"; return f; }());
}

TEST(FormatParsing, BadNamesSayWhatIsAccepted) {
  for (const char* bad : {"fp17", "e9m2", "e5m0", "e1m3", "e5m", "fp16:bogus", "", "e5m7x"}) {
    SCOPED_TRACE(bad);
    try {
      parse_format(bad);
      ADD_FAILURE() << "accepted";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("eXmY"), std::string::npos) << e.what();
    }
  }
  // An ieee overflow policy needs infinities that fn/fnuz formats lack.
  EXPECT_THROW(parse_format("fp8-e4m3:ieee"), FormatError);
  // FP4 has neither NaN nor infinity: only saturation.
  EXPECT_THROW(parse_format("fp4-e2m1:nan"), FormatError);
}

TEST(FormatParsing, GenericNamesAreIeeeLikeNotOcp) {
  // e2m1: bias 1, the all-ones exponent is inf/NaN, so max 1.5 * 2^1 = 3; OCP FP4's max is 6.
  EXPECT_EQ(parse_format("e2m1").max_finite(), 3.0);
  EXPECT_TRUE(parse_format("e2m1").has_infinity());
  EXPECT_EQ(parse_format("fp4-e2m1").max_finite(), 6.0);
  EXPECT_FALSE(same_values(parse_format("e2m1"), parse_format("fp4-e2m1")));
  // The error message points the reader at the OCP name.
  try {
    parse_format("fp4");
    ADD_FAILURE() << "accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("fp4-e2m1"), std::string::npos) << e.what();
  }
}

TEST(FormatEncoding, UnsignedAndZerolessFormatsDifferFromTheirSignedTwins) {
  // ue4m3 has fp8-e4m3's fields but no sign bit; e8m0 has no zero.
  EXPECT_FALSE(same_values(parse_format("ue4m3"), parse_format("fp8-e4m3")));
  EXPECT_EQ(parse_format("ue4m3").width(), 7);
  EXPECT_EQ(parse_format("ue4m3").sign_mask(), 0u);
  EXPECT_EQ(parse_format("e8m0").width(), 8);
  Format zeroless = parse_format("e8m0");
  zeroless.has_zero = true;
  EXPECT_FALSE(same_values(zeroless, parse_format("e8m0")));
}

TEST(FormatRounding, NearestTiesAndDirectedModes) {
  // fp16 has 10 fraction bits: ulp(1) = 2^-10, so 1 + 2^-11 is a tie.
  EXPECT_EQ(round_to("fp16", 1 + 0x1p-11), (Rounded{0x3c00, kInexact}));                   // tie to even (down)
  EXPECT_EQ(round_to("fp16", 1 + 3 * 0x1p-11), (Rounded{0x3c02, kInexact}));               // tie to even (up)
  EXPECT_EQ(round_to("fp16", 1 + 0x1p-11, Rounding::nearest_away), (Rounded{0x3c01, kInexact}));
  EXPECT_EQ(round_to("fp16", 1 + 0x1p-12, Rounding::odd), (Rounded{0x3c01, kInexact}));
  EXPECT_EQ(round_to("fp16", 1 + 0x1p-10, Rounding::odd), (Rounded{0x3c01, 0}));           // exact stays
  EXPECT_EQ(round_to("fp16", -(1 + 0x1p-12), Rounding::up), (Rounded{0xbc00, kInexact}));
  EXPECT_EQ(round_to("fp16", -(1 + 0x1p-12), Rounding::down), (Rounded{0xbc01, kInexact}));
  EXPECT_EQ(round_to("fp16", 1 + 0x1p-12, Rounding::toward_zero), (Rounded{0x3c00, kInexact}));
}

TEST(FormatRounding, OverflowPerModeAndPolicy) {
  // fp16: max 65504, next step 65536; RNE overflows from the midpoint 65520 up.
  EXPECT_EQ(round_to("fp16", 65519.99), (Rounded{0x7bff, kInexact}));
  EXPECT_EQ(round_to("fp16", 65520), (Rounded{0x7c00, kInexact | kOverflow}));
  EXPECT_EQ(round_to("fp16", 1e6, Rounding::toward_zero), (Rounded{0x7bff, kInexact | kOverflow}));
  EXPECT_EQ(round_to("fp16", 1e6, Rounding::odd), (Rounded{0x7bff, kInexact | kOverflow}));
  EXPECT_EQ(round_to("fp16", -1e6, Rounding::up), (Rounded{0xfbff, kInexact | kOverflow}));
  EXPECT_EQ(round_to("fp16", -1e6, Rounding::down), (Rounded{0xfc00, kInexact | kOverflow}));
  // fp8-e4m3: 464 is the midpoint of 448 (fraction 110, even) and the NaN slot.
  EXPECT_EQ(round_to("fp8-e4m3", 464), (Rounded{0x7e, kInexact}));
  EXPECT_EQ(round_to("fp8-e4m3", 465), (Rounded{0x7f, kInexact | kOverflow}));
  EXPECT_EQ(round_to("fp8-e4m3:saturate", 1e6), (Rounded{0x7e, kInexact | kOverflow}));
  EXPECT_EQ(round_to("fp8-e4m3:saturate", -INFINITY), (Rounded{0xfe, kInexact | kOverflow}));
  EXPECT_EQ(round_to("fp8-e4m3", INFINITY), (Rounded{0x7f, kInvalid}));
  EXPECT_EQ(round_to("fp8-e5m2", INFINITY), (Rounded{0x7c, 0}));
  EXPECT_EQ(round_to("fp8-e5m2", 61440), (Rounded{0x7c, kInexact | kOverflow}));  // midpoint 57344..65536, ties up to even
}

TEST(FormatRounding, UnderflowAndTininessRules) {
  // Below half the smallest subnormal 2^-24: zero, tiny and inexact.
  EXPECT_EQ(round_to("fp16", 0x1p-26), (Rounded{0x0000, kInexact | kUnderflow}));
  EXPECT_EQ(round_to("fp16", -0x1p-26), (Rounded{0x8000, kInexact | kUnderflow}));
  EXPECT_EQ(round_to("fp16", 0x1p-25), (Rounded{0x0000, kInexact | kUnderflow}));  // tie to even (0)
  EXPECT_EQ(round_to("fp16", 3 * 0x1p-26), (Rounded{0x0001, kInexact | kUnderflow}));
  EXPECT_EQ(round_to("fp16", 0x1p-24), (Rounded{0x0001, 0}));  // exact subnormal: no underflow flag
  // 2^-14 - 2^-26 rounds to the min normal 2^-14 both in the subnormal grid
  // and with 11 bits and unbounded exponent (tie to even), so it is tiny only
  // when tininess is detected before rounding.
  EXPECT_EQ(round_to("fp16", 0x1p-14 - 0x1p-26), (Rounded{0x0400, kInexact}));
  EXPECT_EQ(round_to("fp16", 0x1p-14 - 0x1p-26, Rounding::nearest_even, Tininess::before_rounding),
            (Rounded{0x0400, kInexact | kUnderflow}));
  // 2^-14 - 2^-25 has 11 significant bits, so it stays below 2^-14 with an
  // unbounded exponent (tiny after rounding), but in the subnormal grid it is
  // the midpoint of 0x03ff and 0x0400 and goes to the even 0x0400.
  EXPECT_EQ(round_to("fp16", 0x1p-14 - 0x1p-25), (Rounded{0x0400, kInexact | kUnderflow}));
  // Without subnormals the subnormal result flushes to zero.
  EXPECT_EQ(round_to("fp16:ftz", 0x1p-20), (Rounded{0x0000, kInexact | kUnderflow}));
}

TEST(FormatRounding, NansKeepPayloadAndSignalInvalid) {
  Flags flags;
  const Format fp16 = parse_format("fp16");
  // float sNaN 0x7fa00000 (fraction 0x200000): top 10 fraction bits 0x100, quiet bit set: 0x7f00.
  EXPECT_EQ(from_float(fp16, std::bit_cast<float>(0x7fa00000u), {}, flags), 0x7f00u);
  EXPECT_EQ(flags.bits, kInvalid);
  flags.clear();
  EXPECT_EQ(from_float(fp16, std::bit_cast<float>(0xffc00000u), {}, flags), 0xfe00u);
  EXPECT_EQ(flags.bits, 0);
}

TEST(FormatArithmetic, SpecialCasesAndFlags) {
  const Format f = parse_format("fp16");
  auto op = [&](auto fn, auto... args) {
    Flags flags;
    const std::uint32_t bits = fn(f, args..., RoundingContext{}, flags);
    return Rounded{bits, flags.bits};
  };
  auto add_ = [](const Format& g, std::uint32_t a, std::uint32_t b, const RoundingContext& rc, Flags& fl) { return add(g, a, b, rc, fl); };
  auto mul_ = [](const Format& g, std::uint32_t a, std::uint32_t b, const RoundingContext& rc, Flags& fl) { return mul(g, a, b, rc, fl); };
  auto div_ = [](const Format& g, std::uint32_t a, std::uint32_t b, const RoundingContext& rc, Flags& fl) { return div(g, a, b, rc, fl); };
  auto sqrt_ = [](const Format& g, std::uint32_t a, const RoundingContext& rc, Flags& fl) { return sqrt(g, a, rc, fl); };
  EXPECT_EQ(op(mul_, 0x0000u, 0x7c00u), (Rounded{0xfe00, kInvalid}));   // 0 * inf
  EXPECT_EQ(op(add_, 0x7c00u, 0xfc00u), (Rounded{0xfe00, kInvalid}));   // inf - inf
  EXPECT_EQ(op(div_, 0x3c00u, 0x0000u), (Rounded{0x7c00, kInfinite}));  // 1 / +0
  EXPECT_EQ(op(div_, 0x3c00u, 0x8000u), (Rounded{0xfc00, kInfinite}));  // 1 / -0
  EXPECT_EQ(op(div_, 0x0000u, 0x0000u), (Rounded{0xfe00, kInvalid}));   // 0 / 0
  EXPECT_EQ(op(sqrt_, 0xbc00u), (Rounded{0xfe00, kInvalid}));           // sqrt(-1)
  EXPECT_EQ(op(sqrt_, 0x8000u), (Rounded{0x8000, 0}));                  // sqrt(-0) = -0
  EXPECT_EQ(op(sqrt_, 0x4400u), (Rounded{0x4000, 0}));                  // sqrt(4) = 2
  EXPECT_EQ(op(add_, 0x7d00u, 0x3c00u), (Rounded{0x7f00, kInvalid}));   // sNaN + 1: quieted, invalid
  EXPECT_EQ(op(add_, 0x7e01u, 0x7d00u), (Rounded{0x7e01, kInvalid}));   // first NaN wins
  EXPECT_EQ(op(add_, 0x3c00u, 0xbc00u), (Rounded{0x0000, 0}));          // 1 - 1 = +0
  EXPECT_EQ(op(add_, 0x8000u, 0x8000u), (Rounded{0x8000, 0}));          // -0 + -0 = -0
  EXPECT_EQ(op(div_, 0x3c00u, 0x4200u), (Rounded{0x3555, kInexact}));   // 1/3 = 0x3555 (RNE)
  Flags flags;
  EXPECT_EQ(add(f, 0x3c00u, 0xbc00u, {Rounding::down}, flags), 0x8000u);  // 1 - 1 = -0 rounding down
}

TEST(FormatArithmetic, FmaRoundsOnce) {
  // a = 1 + 2^-10 (0x3c01), b = 1 - 2^-10 (0x3bfe): a*b = 1 - 2^-20 exactly. With c = -1 the
  // fused result is -2^-20 (a subnormal, exact: 16 * 2^-24 -> 0x8010), while
  // mul-then-add rounds a*b to 1 first and gives 0.
  const Format f = parse_format("fp16");
  Flags flags;
  EXPECT_EQ(fma(f, 0x3c01u, 0x3bfeu, 0xbc00u, {}, flags), 0x8010u);
  EXPECT_EQ(flags.bits, 0);
  Flags f1, f2;
  const std::uint32_t product = mul(f, 0x3c01u, 0x3bfeu, {}, f1);
  EXPECT_EQ(product, 0x3c00u);
  EXPECT_EQ(add(f, product, 0xbc00u, {}, f2), 0x0000u);
}

TEST(FormatRounding, StochasticUsesTheDrawAsDocumented) {
  // 1 + 2^-11 is half an fp16 ulp above 1: with 2 random bits F = 2, and the
  // value rounds up when 2 + (draw mod 4) >= 4, i.e. draw mod 4 in {2, 3}.
  const Format f = parse_format("fp16");
  int up = 0;
  for (std::uint32_t draw = 0; draw < 4; ++draw) {
    Flags flags;
    const std::uint32_t bits = from_double(f, 1 + 0x1p-11, {Rounding::stochastic, Tininess::after_rounding, 2, draw}, flags);
    EXPECT_EQ(bits, draw >= 2 ? 0x3c01u : 0x3c00u) << draw;
    EXPECT_EQ(flags.bits, kInexact);
    up += bits == 0x3c01u;
  }
  EXPECT_EQ(up, 2);
}

TEST(FormatRounding, Bf16AndE5m7) {
  EXPECT_EQ(round_to("bf16", 1 + 0x1p-8), (Rounded{0x3f80, kInexact}));  // tie to even
  EXPECT_EQ(round_to("bf16", 1 + 3 * 0x1p-8), (Rounded{0x3f82, kInexact}));
  // e5m7: bias 15, 7 fraction bits; 1.5 = 0 01111 1000000.
  EXPECT_EQ(round_to("e5m7", 1.5), (Rounded{(15u << 7) | 0x40u, 0}));
}

TEST(FormatEncoding, SameEncodingIgnoresTheNameOnly) {
  const Format fp16 = parse_format("fp16");
  Format renamed = custom_format(5, 10);
  EXPECT_NE(renamed.name, fp16.name);
  EXPECT_TRUE(same_encoding(renamed, fp16));
  EXPECT_FALSE(renamed == fp16);  // operator== compares the names too
  EXPECT_TRUE(same_encoding(fp16, fp16));
  EXPECT_FALSE(same_encoding(parse_format("fp16:saturate"), fp16));
  EXPECT_FALSE(same_encoding(parse_format("fp16:ftz"), fp16));
  EXPECT_FALSE(same_encoding(parse_format("fp8-e4m3"), parse_format("fp8-e4m3fnuz")));
  EXPECT_FALSE(same_encoding(parse_format("bf16"), fp16));
  Format biased = fp16;
  biased.bias = 16;
  EXPECT_FALSE(same_encoding(biased, fp16));
  Format wider = fp16;
  wider.mantissa_bits = 11;
  EXPECT_FALSE(same_encoding(wider, fp16));
}

}  // namespace
