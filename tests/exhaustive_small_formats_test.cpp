// The formats of block-scaled training, exhaustively: the OCP MX v1.0
// element formats fp4-e2m1, fp6-e2m3, fp6-e3m2, the MX block scale e8m0 and
// NVFP4's block scale ue4m3. Every encoding is decoded against a value table
// written here from the specification; every rounding mode, on a dense set of
// inputs (every value, every midpoint, a quarter either side, the doubles next
// to each, beyond the largest value, below the smallest, zeros, negatives, NaN
// and infinities), is held against a rounding written here on those tables;
// every arithmetic operation on every pair of values is held against that
// rounding of the exact result. Nothing expected comes from the library.
//
// Sources of the tables:
//  - OCP Microscaling Formats (MX) v1.0 (Sept. 2023): FP4 E2M1 and FP6
//    E2M3/E3M2 (section 5.3: no inf, no NaN; values as below), E8M0 (section
//    5.4.1: 2^(bits - 127), 0xff NaN, no zero, no sign), summarised in
//    shared/reference/tensor-cores.md, "Element formats of block-scaled training".
//  - torchao, torchao/prototype/mx_formats/fp_format_spec.py
//    (float4_e2m1_interesting_values, float6_e3m2_/float6_e2m3_interesting_values):
//    the same values, with their bit patterns.
//  - PyTorch, torch/headeronly/util/Float8_e8m0fnu.h (fp8e8m0fnu_from_fp32_value,
//    lines 61-85): NaN and inf become 0xff, and the round-to-nearest tie at
//    1.5 * 2^k rounds up, because "LSB is the implied mantissa bit" (always 1).
//  - NVFP4's UE4M3 is OCP E4M3 (OCP 8-bit FP spec) without the sign bit: the
//    E4M3 formula below, 0x7f NaN; torchao clamps the scale to 448 before the
//    cast (prototype/mx_formats/nvfp4_tensor.py, nvfp4_quantize), hence saturating.
//
// E8M0's rounding (our choice, documented in docs/formats.md): a scale is a
// power of two, and a value between 2^k and 2^(k+1) rounds as in any binary
// format with one significant bit: the midpoint is 1.5 * 2^k and the tie goes
// up (both neighbours have significand 1, PyTorch's cast rounds it up);
// round-to-odd is truncation (every value is "odd"); anything below 2^-127,
// zero included, gives 2^-127 with underflow (there is no zero; PyTorch maps 0
// to 0x00 and Transformer Engine's scale for an amax of 0 is 2^-127); a
// negative input is invalid (NaN), where PyTorch reads only the exponent bits.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/format.h"
#include "support/run_command.h"

namespace {

using namespace mpverify::formats;

constexpr std::uint8_t kInexact = Flags::inexact, kUnderflow = Flags::underflow, kOverflow = Flags::overflow,
                       kInfinite = Flags::infinite, kInvalid = Flags::invalid;

// --- the formats as the specification writes them --------------------------------

struct Spec {
  std::string name;
  std::vector<double> values;  // the value of each non-negative encoding 0, 1, 2, ... (NaN left out)
  double above_max;            // the value the next encoding would have: where overflow starts
  double min_normal;
  int fraction_bits;
  int width;
  bool is_signed;
  bool has_zero;
  bool overflow_to_nan;              // else saturating
  std::optional<std::uint32_t> nan;  // the NaN encoding, if the format has one

  std::uint32_t sign_bit() const { return is_signed ? 1u << (width - 1) : 0u; }
  std::uint32_t max_bits() const { return static_cast<std::uint32_t>(values.size() - 1); }
};

// OCP E4M3's value formula (bias 7, subnormals at exponent field 0), without the sign.
std::vector<double> e4m3_magnitudes() {
  std::vector<double> v;
  for (int e = 0; e < 16; ++e)
    for (int m = 0; m < 8; ++m) v.push_back(e == 0 ? m / 8.0 * 0x1p-6 : (1 + m / 8.0) * std::ldexp(1.0, e - 7));
  v.pop_back();  // 0x7f is NaN
  return v;
}

std::vector<double> e8m0_values() {
  std::vector<double> v;
  for (int bits = 0; bits < 255; ++bits) v.push_back(std::ldexp(1.0, bits - 127));  // 0xff is NaN
  return v;
}

const std::vector<Spec>& specs() {
  static const std::vector<Spec> all = {
      {"fp4-e2m1", {0, 0.5, 1, 1.5, 2, 3, 4, 6}, 8, 1, 1, 4, true, true, false, std::nullopt},
      {"fp6-e2m3",
       {0,   0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1,   1.125, 1.25, 1.375, 1.5, 1.625, 1.75, 1.875,
        2,   2.25,  2.5,  2.75,  3,   3.25,  3.5,  3.75,  4,   4.5,   5,    5.5,   6,   6.5,   7,    7.5},
       8, 1, 3, 6, true, true, false, std::nullopt},
      {"fp6-e3m2",
       {0, 0.0625, 0.125, 0.1875, 0.25, 0.3125, 0.375, 0.4375, 0.5, 0.625, 0.75, 0.875, 1,  1.25, 1.5, 1.75,
        2, 2.5,    3,     3.5,    4,    5,      6,     7,      8,   10,    12,   14,    16, 20,   24,  28},
       32, 0.25, 2, 6, true, true, false, std::nullopt},
      {"ue4m3", e4m3_magnitudes(), 480, 0x1p-6, 3, 7, false, true, false, 0x7fu},
      {"e8m0", e8m0_values(), 0x1p128, 0x1p-127, 0, 8, false, false, true, 0xffu},
  };
  return all;
}

TEST(SmallFormatTables, AnchorsFromTheSpecification) {
  // A few entries spelled out, so that the formulas above cannot drift.
  const auto& s = specs();
  EXPECT_EQ(s[0].values.size(), 8u);
  EXPECT_EQ(s[1].values.back(), 7.5);   // E2M3 max normal
  EXPECT_EQ(s[1].values[1], 0.125);     // E2M3 min subnormal
  EXPECT_EQ(s[2].values.back(), 28.0);  // E3M2 max normal
  EXPECT_EQ(s[2].values[1], 0.0625);    // E3M2 min subnormal
  EXPECT_EQ(s[3].values.size(), 127u);
  EXPECT_EQ(s[3].values[0x7e], 448.0);
  EXPECT_EQ(s[3].values[0x38], 1.0);
  EXPECT_EQ(s[3].values[0x08], 0x1p-6);
  EXPECT_EQ(s[3].values[0x01], 0x1p-9);
  EXPECT_EQ(s[4].values.size(), 255u);
  EXPECT_EQ(s[4].values[0x00], 0x1p-127);
  EXPECT_EQ(s[4].values[0x7f], 1.0);
  EXPECT_EQ(s[4].values[0xfe], 0x1p127);
}

// --- the library's descriptors --------------------------------------------------------

TEST(SmallFormatPresets, ConstantsMatchTheSpecification) {
  for (const Spec& s : specs()) {
    SCOPED_TRACE(s.name);
    const Format f = parse_format(s.name);
    EXPECT_EQ(f.width(), s.width);
    EXPECT_EQ(f.is_signed, s.is_signed);
    EXPECT_EQ(f.has_zero, s.has_zero);
    EXPECT_EQ(f.has_nan(), s.nan.has_value());
    EXPECT_FALSE(f.has_infinity());
    EXPECT_EQ(f.max_finite(), s.values.back());
    EXPECT_EQ(f.max_finite_bits(), s.max_bits());
    EXPECT_EQ(f.min_normal(), s.min_normal);
    EXPECT_EQ(f.min_subnormal(), s.values[s.has_zero ? 1 : 0]);
    EXPECT_EQ(f.overflow, s.overflow_to_nan ? Overflow::nan : Overflow::saturate);
  }
  // The spec's own numbers once more, by name.
  EXPECT_EQ(parse_format("fp4-e2m1").max_finite(), 6.0);
  EXPECT_EQ(parse_format("fp4-e2m1").min_subnormal(), 0.5);
  EXPECT_EQ(parse_format("fp6-e2m3").bias, 1);
  EXPECT_EQ(parse_format("fp6-e3m2").bias, 3);
  EXPECT_EQ(parse_format("e8m0").bias, 127);
  EXPECT_EQ(parse_format("ue4m3").max_finite(), 448.0);
}

TEST(SmallFormatPresets, InconsistentModifiersAreRefused) {
  // No NaN to overflow to, and no infinity, in FP4/FP6; no infinity in e8m0.
  for (const char* bad : {"fp4-e2m1:nan", "fp6-e3m2:ieee", "e8m0:ieee", "ue4m3:ieee"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(parse_format(bad), FormatError);
  }
  EXPECT_EQ(parse_format("e8m0:saturate").overflow, Overflow::saturate);
  EXPECT_EQ(parse_format("ue4m3:nan").overflow, Overflow::nan);
}

TEST(SmallFormatPresets, GenericNamesStayIeeeLikeAndSaySo) {
  // e2m1 is IEEE-like: bias 1, the all-ones exponent is inf/NaN, so max 1.5 * 2 = 3.
  const Format e2m1 = parse_format("e2m1");
  EXPECT_EQ(e2m1.max_finite(), 3.0);
  EXPECT_TRUE(e2m1.has_infinity());
  EXPECT_EQ(parse_format("e4m3").max_finite(), 240.0);
  for (const char* name : {"e2m1", "fp4-e2m1", "fp4-e2m1:saturate"}) {
    const std::string note = namesake_note(parse_format(name));
    EXPECT_NE(note.find("e2m1 is IEEE-like (max 3"), std::string::npos) << name << ": " << note;
    EXPECT_NE(note.find("fp4-e2m1 is another format (max 6"), std::string::npos) << name << ": " << note;
  }
  const std::string e4m3 = namesake_note(parse_format("e4m3"));
  EXPECT_NE(e4m3.find("fp8-e4m3 is another format (max 448"), std::string::npos) << e4m3;
  EXPECT_NE(namesake_note(parse_format("fp6-e3m2")).find("e3m2 is IEEE-like (max 14"), std::string::npos);
  EXPECT_EQ(namesake_note(parse_format("fp16")), "");
  EXPECT_EQ(namesake_note(parse_format("e5m7")), "");
}

// --- every encoding decoded -------------------------------------------------------------

TEST(SmallFormatDecode, EveryEncodingAgainstTheTable) {
  int checked = 0;
  for (const Spec& s : specs()) {
    SCOPED_TRACE(s.name);
    const Format f = parse_format(s.name);
    int nans = 0;
    for (std::uint32_t bits = 0; bits < (1u << s.width); ++bits) {
      SCOPED_TRACE(bits);
      Flags flags;
      if (s.nan && bits == *s.nan) {
        EXPECT_TRUE(is_nan(f, bits));
        EXPECT_TRUE(std::isnan(to_double(f, bits)));
        EXPECT_TRUE(std::isnan(to_float(f, bits, flags)));
        EXPECT_EQ(flags.bits, 0);  // a quiet NaN
        ++nans;
        continue;
      }
      const bool negative = (bits & s.sign_bit()) != 0;
      const double magnitude = s.values.at(bits & ~s.sign_bit());
      const double value = negative ? -magnitude : magnitude;
      EXPECT_FALSE(is_nan(f, bits));
      EXPECT_FALSE(is_infinity(f, bits));
      EXPECT_EQ(sign_bit(f, bits), negative);
      EXPECT_EQ(to_double(f, bits), value);
      EXPECT_EQ(std::signbit(to_double(f, bits)), negative);  // -0 too
      EXPECT_EQ(to_float(f, bits, flags), static_cast<float>(value));
      EXPECT_EQ(is_zero(f, bits), magnitude == 0);
      EXPECT_EQ(is_subnormal(f, bits), magnitude != 0 && magnitude < s.min_normal);
      ++checked;
    }
    EXPECT_EQ(nans, s.nan ? 1 : 0);
  }
  EXPECT_EQ(checked, 16 + 64 + 64 + 127 + 255);
}

// --- the rounding written here -------------------------------------------------------------

struct Expected {
  std::uint32_t bits;
  std::uint8_t flags;
  friend bool operator==(const Expected&, const Expected&) = default;
};
std::ostream& operator<<(std::ostream& os, const Expected& e) {
  return os << std::hex << "{0x" << e.bits << ", flags 0x" << int(e.flags) << "}" << std::dec;
}

// A real number as a double plus the sign of what is left over: `residual`
// is the sign of (exact - value); 0 when the double is the exact value. The
// arithmetic below needs it for e8m0, whose sums span 254 binades.
struct Exact {
  double value;
  int residual = 0;
};

// The sign of (magnitude of e) - b, for b >= 0: the residual decides when the double is b.
int compare(double magnitude, int magnitude_residual, double b) {
  if (magnitude != b) return magnitude < b ? -1 : 1;
  return magnitude_residual;
}

// Whether a magnitude strictly between lo and hi rounds to hi. `*_odd`: the
// last significand bit of each neighbour.
bool rounds_to_hi(double a, int r, double lo, double hi, bool lo_odd, bool hi_odd, bool negative,
                  const RoundingContext& rc) {
  const double mid = lo + (hi - lo) / 2;  // exact: lo and hi have a few significant bits
  const int to_mid = compare(a, r, mid);
  switch (rc.mode) {
    case Rounding::nearest_even:
      if (to_mid != 0) return to_mid > 0;
      return lo_odd == hi_odd ? true : lo_odd;  // both odd only in e8m0: the tie goes up
    case Rounding::nearest_away: return to_mid >= 0;
    case Rounding::toward_zero: return false;
    case Rounding::up: return !negative;
    case Rounding::down: return negative;
    case Rounding::odd: return hi_odd && !lo_odd;  // truncate, then make it odd
    case Rounding::stochastic: {
      if (r != 0) throw std::logic_error("stochastic reference: only exact doubles");
      // The fraction (a - lo) / (hi - lo) is exact (Sterbenz; hi - lo a power of two).
      const double scale = std::ldexp(1.0, rc.random_bits);
      const auto truncated = static_cast<std::uint64_t>(std::floor((a - lo) / (hi - lo) * scale));
      const std::uint64_t draw = rc.random & ((std::uint64_t{1} << rc.random_bits) - 1);
      return truncated + draw >= (std::uint64_t{1} << rc.random_bits);
    }
  }
  return false;
}

bool significand_odd(const Spec& s, std::size_t index) { return s.fraction_bits == 0 || (index & 1) != 0; }

// Tiny: below the smallest normal before rounding, or (after rounding) still
// below it when rounded to the format's precision with no lower exponent limit:
// on the grid of the binade [min_normal / 2, min_normal].
bool tiny(const Spec& s, double a, int r, bool negative, const RoundingContext& rc) {
  if (compare(a, r, s.min_normal) >= 0) return false;
  const double low = s.min_normal / 2;
  if (rc.tininess == Tininess::before_rounding || compare(a, r, low) < 0) return true;
  const double step = low / std::ldexp(1.0, s.fraction_bits);
  auto k = static_cast<std::uint64_t>(std::floor((a - low) / step));
  double lo = low + static_cast<double>(k) * step;
  if (lo == a && r < 0) lo -= step, k -= 1;  // just below a grid point
  if (lo == a && r == 0) return true;        // on the grid, below min_normal
  const bool lo_odd = s.fraction_bits == 0 || (k & 1) != 0;
  const bool hi_odd = s.fraction_bits == 0 || ((k + 1) & 1) != 0;
  const double rounded = rounds_to_hi(a, r, lo, lo + step, lo_odd, hi_odd, negative, rc) ? lo + step : lo;
  return rounded < s.min_normal;
}

bool rounds_to_infinity(Rounding mode, bool negative) {
  return mode == Rounding::nearest_even || mode == Rounding::nearest_away || mode == Rounding::stochastic ||
         (mode == Rounding::up && !negative) || (mode == Rounding::down && negative);
}

Expected overflowed(const Spec& s, bool negative, Rounding mode) {
  if (s.overflow_to_nan && rounds_to_infinity(mode, negative)) return {*s.nan, kOverflow | kInexact};
  return {(negative ? s.sign_bit() : 0u) | s.max_bits(), kOverflow | kInexact};
}

Expected nan_result(const Spec& s, bool signalling) {
  if (!s.nan) return {s.max_bits(), kInvalid};  // no NaN: +max stands in, invalid
  return {*s.nan, signalling ? kInvalid : std::uint8_t{0}};
}

Expected reference_round(const Spec& s, Exact e, const RoundingContext& rc) {
  const double x = e.value;
  if (std::isnan(x)) {
    const bool quiet = (std::bit_cast<std::uint64_t>(x) >> 51) & 1;
    return nan_result(s, !quiet);
  }
  const bool negative = std::signbit(x);
  if (negative && !s.is_signed && x != 0) return {*s.nan, kInvalid};
  const std::uint32_t sign = negative ? s.sign_bit() : 0u;
  if (x == 0) return s.has_zero ? Expected{sign, 0} : Expected{0, kUnderflow | kInexact};
  const double a = std::fabs(x);
  const int r = negative ? -e.residual : e.residual;  // of the magnitude
  if (std::isinf(a)) {
    if (s.overflow_to_nan) return {*s.nan, kInvalid};
    return {sign | s.max_bits(), kOverflow | kInexact};
  }
  if (compare(a, r, s.above_max) >= 0) return overflowed(s, negative, rc.mode);
  const std::uint8_t underflow = tiny(s, a, r, negative, rc) ? kUnderflow : 0;
  if (compare(a, r, s.values[0]) < 0) return {0, static_cast<std::uint8_t>(kInexact | underflow)};  // e8m0: 2^-127
  std::size_t lo = 0;
  while (lo + 1 < s.values.size() && compare(a, r, s.values[lo + 1]) >= 0) ++lo;
  if (compare(a, r, s.values[lo]) == 0) return {sign | static_cast<std::uint32_t>(lo), 0};
  const double hi_value = lo + 1 < s.values.size() ? s.values[lo + 1] : s.above_max;
  const bool up = rounds_to_hi(a, r, s.values[lo], hi_value, significand_odd(s, lo), significand_odd(s, lo + 1),
                               negative, rc);
  if (up && lo + 1 == s.values.size()) return overflowed(s, negative, rc.mode);
  return {sign | static_cast<std::uint32_t>(up ? lo + 1 : lo), static_cast<std::uint8_t>(kInexact | underflow)};
}

Expected reference_round(const Spec& s, double x, const RoundingContext& rc) {
  return reference_round(s, Exact{x}, rc);
}

// --- the inputs ---------------------------------------------------------------------------------

std::vector<double> dense_inputs(const Spec& s) {
  std::vector<double> grid = s.values;
  grid.push_back(s.above_max);
  std::vector<double> in;
  auto add_with_neighbours = [&in](double v) {
    in.insert(in.end(), {v, std::nextafter(v, 0.0), std::nextafter(v, HUGE_VAL)});
  };
  for (std::size_t i = 0; i + 1 < grid.size(); ++i) {
    const double lo = grid[i], step = grid[i + 1] - grid[i];
    add_with_neighbours(lo);
    add_with_neighbours(lo + step / 2);  // every midpoint: the ties
    in.insert(in.end(), {lo + step / 4, lo + 3 * step / 4, lo + step / 8});
  }
  add_with_neighbours(s.above_max);
  const double smallest = s.values[s.has_zero ? 1 : 0];
  const double top = s.values.back();
  for (double v : {smallest / 2, smallest / 4, 0.75 * smallest, 0.375 * smallest, s.min_normal / 2,
                   0.75 * s.min_normal, s.min_normal - smallest / 4, 1e-300, std::numeric_limits<double>::denorm_min(),
                   2 * top, 1.5 * s.above_max, 3 * s.above_max, 1e30, std::numeric_limits<double>::max(), HUGE_VAL,
                   0.0})
    add_with_neighbours(v);
  const std::size_t positives = in.size();
  for (std::size_t i = 0; i < positives; ++i) in.push_back(-in[i]);
  in.push_back(std::numeric_limits<double>::quiet_NaN());
  in.push_back(-std::numeric_limits<double>::quiet_NaN());
  in.push_back(std::bit_cast<double>(0x7ff0000000000001ull));  // signalling
  return in;
}

// Every rounding context: both tininess rules, the six deterministic modes,
// and stochastic rounding at 32, 5 and 1 random bits with fixed and seeded draws.
std::vector<RoundingContext> every_context() {
  std::vector<RoundingContext> all;
  std::uint64_t lcg = 0x5eed5eedull;  // seeded: the same draws every run
  for (Tininess t : {Tininess::after_rounding, Tininess::before_rounding}) {
    for (Rounding mode : all_roundings) {
      if (mode != Rounding::stochastic) {
        all.push_back({mode, t});
        continue;
      }
      for (int bits : {32, 5, 1}) {
        for (std::uint32_t draw : {0u, 1u, 0x7fffffffu, 0x80000000u, 0xffffffffu}) all.push_back({mode, t, bits, draw});
        for (int k = 0; k < 4; ++k) {
          lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
          all.push_back({mode, t, bits, static_cast<std::uint32_t>(lcg >> 32)});
        }
      }
    }
  }
  return all;
}

std::string describe(const RoundingContext& rc) {
  return std::string(to_string(rc.mode)) + (rc.tininess == Tininess::before_rounding ? " before" : " after") +
         " bits " + std::to_string(rc.random_bits) + " draw " + std::to_string(rc.random);
}

TEST(SmallFormatRounding, EveryModeOnDenseInputsAgainstTheReference) {
  const auto contexts = every_context();
  std::uint64_t checked = 0, from_float_checked = 0;
  for (const Spec& s : specs()) {
    const Format f = parse_format(s.name);
    for (double x : dense_inputs(s)) {
      for (const RoundingContext& rc : contexts) {
        const Expected want = reference_round(s, x, rc);
        Flags flags;
        const Expected got{from_double(f, x, rc, flags), flags.bits};
        ASSERT_EQ(got, want) << s.name << " x = " << std::hexfloat << x << std::defaultfloat << " " << describe(rc);
        ++checked;
        const float xf = static_cast<float>(x);
        if (std::isnan(x) || static_cast<double>(xf) != x) continue;  // float NaNs below
        Flags float_flags;
        const Expected via_float{from_float(f, xf, rc, float_flags), float_flags.bits};
        ASSERT_EQ(via_float, want) << s.name << " float x = " << std::hexfloat << xf << " " << describe(rc);
        ++from_float_checked;
      }
    }
    // A float signalling NaN raises invalid everywhere (it is no longer quiet).
    Flags flags;
    const std::uint32_t bits = from_float(f, std::bit_cast<float>(0x7fa00000u), {}, flags);
    EXPECT_EQ((Expected{bits, flags.bits}), nan_result(s, true)) << s.name;
  }
  EXPECT_GE(checked, 570'000u);  // not vacuous: about 5,500 inputs x 102 contexts
  EXPECT_GE(from_float_checked, 300'000u);
}

// Hand-worked cases: what the flags and ties mean, one per line.
TEST(SmallFormatRounding, WorkedCases) {
  auto round = [](const char* format, double x, Rounding mode = Rounding::nearest_even) {
    Flags flags;
    const std::uint32_t bits = from_double(parse_format(format), x, {mode}, flags);
    return Expected{bits, flags.bits};
  };
  // FP4: 7 is the midpoint of 6 (0b0111, odd) and the 8 it would overflow to: overflow, saturated.
  EXPECT_EQ(round("fp4-e2m1", 7), (Expected{0x7, kOverflow | kInexact}));
  EXPECT_EQ(round("fp4-e2m1", 6.9), (Expected{0x7, kInexact}));
  EXPECT_EQ(round("fp4-e2m1", -100, Rounding::toward_zero), (Expected{0xf, kOverflow | kInexact}));
  EXPECT_EQ(round("fp4-e2m1", 5), (Expected{0x6, kInexact}));                 // tie 4 | 6: to 4 (0b0110)
  EXPECT_EQ(round("fp4-e2m1", 0.25), (Expected{0x0, kInexact | kUnderflow}));  // tie 0 | 0.5: to 0
  EXPECT_EQ(round("fp4-e2m1", -0.25), (Expected{0x8, kInexact | kUnderflow}));  // -0
  EXPECT_EQ(round("fp4-e2m1", 0.75), (Expected{0x2, kInexact | kUnderflow}));  // tie 0.5 | 1: to 1, tiny
  EXPECT_EQ(round("fp4-e2m1", -INFINITY), (Expected{0xf, kOverflow | kInexact}));
  EXPECT_EQ(round("fp4-e2m1", NAN), (Expected{0x7, kInvalid}));  // no NaN: +6 stands in
  EXPECT_EQ(round("fp6-e2m3", 7.75), (Expected{0x1f, kOverflow | kInexact}));
  EXPECT_EQ(round("fp6-e3m2", 30), (Expected{0x1f, kOverflow | kInexact}));
  EXPECT_EQ(round("fp6-e3m2", 29.9), (Expected{0x1f, kInexact}));
  // E8M0: 3 = 1.5 * 2 lies midway between 2 (0x80) and 4 (0x81).
  EXPECT_EQ(round("e8m0", 3), (Expected{0x81, kInexact}));
  EXPECT_EQ(round("e8m0", 3, Rounding::nearest_away), (Expected{0x81, kInexact}));
  EXPECT_EQ(round("e8m0", 3, Rounding::toward_zero), (Expected{0x80, kInexact}));
  EXPECT_EQ(round("e8m0", 3, Rounding::down), (Expected{0x80, kInexact}));
  EXPECT_EQ(round("e8m0", 3, Rounding::up), (Expected{0x81, kInexact}));
  EXPECT_EQ(round("e8m0", 3, Rounding::odd), (Expected{0x80, kInexact}));
  EXPECT_EQ(round("e8m0", 2.9), (Expected{0x80, kInexact}));
  EXPECT_EQ(round("e8m0", 3.1), (Expected{0x81, kInexact}));
  EXPECT_EQ(round("e8m0", 1), (Expected{0x7f, 0}));
  EXPECT_EQ(round("e8m0", 0), (Expected{0x00, kUnderflow | kInexact}));  // no zero: 2^-127
  EXPECT_EQ(round("e8m0", 0x1p-200, Rounding::down), (Expected{0x00, kUnderflow | kInexact}));
  EXPECT_EQ(round("e8m0", -1), (Expected{0xff, kInvalid}));
  EXPECT_EQ(round("e8m0", INFINITY), (Expected{0xff, kInvalid}));
  EXPECT_EQ(round("e8m0", 0x1.8p127), (Expected{0xff, kOverflow | kInexact}));  // tie up past 2^127
  EXPECT_EQ(round("e8m0", 0x1.8p127, Rounding::toward_zero), (Expected{0xfe, kInexact}));
  EXPECT_EQ(round("e8m0:saturate", INFINITY), (Expected{0xfe, kOverflow | kInexact}));
  EXPECT_EQ(round("e8m0", NAN), (Expected{0xff, 0}));
  // UE4M3: 464 is the midpoint of 448 (0x7e) and the NaN slot.
  EXPECT_EQ(round("ue4m3", 464), (Expected{0x7e, kInexact}));
  EXPECT_EQ(round("ue4m3", 465), (Expected{0x7e, kOverflow | kInexact}));
  EXPECT_EQ(round("ue4m3", -0.0), (Expected{0x00, 0}));
  EXPECT_EQ(round("ue4m3", -1), (Expected{0x7f, kInvalid}));
  EXPECT_EQ(round("ue4m3", 0x1p-10), (Expected{0x00, kInexact | kUnderflow}));
}

// --- arithmetic on every pair -------------------------------------------------------------------

enum class Op { add, sub, mul, div, sqrt };

// The exact result: sums by TwoSum (e8m0's sums need up to 254 bits), products
// exactly (a few bits each), quotients and roots as the nearest double with
// the sign of the remainder, which fma computes exactly.
Exact exact(Op op, double x, double y, Rounding mode) {
  switch (op) {
    case Op::add:
    case Op::sub: {
      const double y2 = op == Op::sub ? -y : y;
      const double sum = x + y2;
      if (sum == 0) {
        // An exact zero: like-signed zeros keep their sign, otherwise -0 only rounding down (IEEE 754 6.3).
        if (x == 0 && y2 == 0 && std::signbit(x) == std::signbit(y2)) return {x};
        return {mode == Rounding::down ? -0.0 : 0.0};
      }
      const double back = sum - x;  // Knuth's TwoSum: err = (x + y2) - sum, exactly
      const double err = (x - (sum - back)) + (y2 - back);
      return {sum, err > 0 ? 1 : (err < 0 ? -1 : 0)};
    }
    case Op::mul: return {x * y};
    case Op::div: {
      const double q = x / y;
      const double remainder = std::fma(-q, y, x);  // x - q*y; exact value - q has its sign times y's
      return {q, remainder == 0 ? 0 : ((remainder > 0) == (y > 0) ? 1 : -1)};
    }
    case Op::sqrt: {
      const double root = std::sqrt(x);
      if (!(x > 0)) return {root};
      const double remainder = std::fma(-root, root, x);
      return {root, remainder > 0 ? 1 : (remainder < 0 ? -1 : 0)};
    }
  }
  return {0};
}

std::uint32_t run(const Format& f, Op op, std::uint32_t a, std::uint32_t b, const RoundingContext& rc, Flags& flags) {
  switch (op) {
    case Op::add: return add(f, a, b, rc, flags);
    case Op::sub: return sub(f, a, b, rc, flags);
    case Op::mul: return mul(f, a, b, rc, flags);
    case Op::div: return div(f, a, b, rc, flags);
    case Op::sqrt: return sqrt(f, a, rc, flags);
  }
  return 0;
}

TEST(SmallFormatArithmetic, EveryPairEveryDeterministicMode) {
  std::uint64_t checked = 0;
  for (const Spec& s : specs()) {
    const Format f = parse_format(s.name);
    std::vector<std::uint32_t> operands;  // every encoding but NaN
    for (std::uint32_t bits = 0; bits < (1u << s.width); ++bits)
      if (!(s.nan && bits == *s.nan)) operands.push_back(bits);
    auto value = [&s](std::uint32_t bits) {
      const double v = s.values[bits & ~s.sign_bit()];
      return (bits & s.sign_bit()) ? -v : v;
    };
    for (Tininess t : {Tininess::after_rounding, Tininess::before_rounding}) {
      for (Rounding mode : all_roundings) {
        if (mode == Rounding::stochastic) continue;  // its draws are covered by the conversions above
        const RoundingContext rc{mode, t};
        for (std::uint32_t a : operands) {
          for (Op op : {Op::add, Op::sub, Op::mul, Op::div, Op::sqrt}) {
            for (std::uint32_t b : operands) {
              if (op == Op::div && value(b) == 0) continue;  // worked cases below
              if (op == Op::sqrt && b != operands[0]) break;  // unary
              const Expected want = reference_round(s, exact(op, value(a), value(b), mode), rc);
              Flags flags;
              const Expected got{run(f, op, a, b, rc, flags), flags.bits};
              ASSERT_EQ(got, want) << s.name << " op " << int(op) << " a 0x" << std::hex << a << " b 0x" << b
                                   << std::dec << " " << describe(rc);
              ++checked;
            }
          }
        }
      }
    }
  }
  // Per context: add, sub and mul on n^2 pairs, div on n * (n - zeros), sqrt on n; 12 contexts.
  auto per_context = [](std::uint64_t n, std::uint64_t zeros) { return 3 * n * n + n * (n - zeros) + n; };
  EXPECT_EQ(checked, 12 * (per_context(16, 2) + 2 * per_context(64, 2) + per_context(127, 1) + per_context(255, 0)));
}

TEST(SmallFormatArithmetic, DivisionByZeroAndInvalidOperations) {
  const Format fp4 = parse_format("fp4-e2m1");
  Flags flags;
  EXPECT_EQ(div(fp4, 0x2, 0x0, {}, flags), 0x7u);  // 1 / +0: no infinity, saturated
  EXPECT_EQ(flags.bits, kInfinite);
  flags.clear();
  EXPECT_EQ(div(fp4, 0x2, 0x8, {}, flags), 0xfu);  // 1 / -0
  EXPECT_EQ(flags.bits, kInfinite);
  flags.clear();
  EXPECT_EQ(div(fp4, 0x0, 0x0, {}, flags), 0x7u);  // 0 / 0: invalid, +6 stands in for NaN
  EXPECT_EQ(flags.bits, kInvalid);
  flags.clear();
  EXPECT_EQ(sqrt(fp4, 0xa, {}, flags), 0x7u);  // sqrt(-1)
  EXPECT_EQ(flags.bits, kInvalid);
  const Format ue4m3 = parse_format("ue4m3");
  flags.clear();
  EXPECT_EQ(div(ue4m3, 0x38, 0x00, {}, flags), 0x7eu);  // 1 / 0: saturated
  EXPECT_EQ(flags.bits, kInfinite);
  flags.clear();
  EXPECT_EQ(add(ue4m3, 0x7f, 0x38, {}, flags), 0x7fu);  // NaN + 1: a quiet NaN propagates
  EXPECT_EQ(flags.bits, 0);
  const Format e8m0 = parse_format("e8m0");
  flags.clear();
  EXPECT_EQ(sub(e8m0, 0x80, 0x80, {}, flags), 0x00u);  // 2 - 2 = 0: no zero, 2^-127
  EXPECT_EQ(flags.bits, kUnderflow | kInexact);
  flags.clear();
  EXPECT_EQ(sub(e8m0, 0x7f, 0x80, {}, flags), 0xffu);  // 1 - 2 < 0: invalid
  EXPECT_EQ(flags.bits, kInvalid);
}

// --- the array routines take the portable path ------------------------------------------------

TEST(SmallFormatQuantize, PortablePathMatchesTheScalarConversion) {
  namespace emu = mpverify::emu;
  for (const Spec& s : specs()) {
    SCOPED_TRACE(s.name);
    emu::QuantizeSpec spec;
    spec.format = parse_format(s.name);
    EXPECT_EQ(emu::select_path(spec), emu::SimdPath::portable);
    // The F16C paths are fp16-only: asking for one is refused, never silently wrong.
    std::vector<float> in, out(1);
    in.push_back(1.0f);
    EXPECT_THROW(emu::quantize(in, out, spec, nullptr, emu::SimdPath::avx2_f16c), std::invalid_argument);
    in.clear();
    for (double x : dense_inputs(s))
      if (std::isnan(x) || static_cast<double>(static_cast<float>(x)) == x) in.push_back(static_cast<float>(x));
    out.assign(in.size(), 0.0f);
    std::vector<std::uint16_t> bits(in.size());
    emu::quantize(in, out, spec);
    emu::encode(in, bits, spec);
    for (std::size_t i = 0; i < in.size(); ++i) {
      const Expected want = reference_round(s, static_cast<double>(in[i]), RoundingContext{});
      ASSERT_EQ(bits[i], want.bits) << in[i];
      Flags ignored;
      const float value = to_float(spec.format, want.bits, ignored);
      if (std::isnan(value)) EXPECT_TRUE(std::isnan(out[i])) << in[i];
      else EXPECT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(value)) << in[i];
    }
  }
}

// --- the command line ---------------------------------------------------------------------------

std::string cli(const std::string& args) { return std::string(MPVERIFY_BIN) + " " + args; }
using mpverify::test::run_command;

TEST(SmallFormatCli, FormatsJsonListsThemWithTheirConstants) {
  const auto r = run_command(cli("formats --json"), "");
  ASSERT_EQ(r.exit_code, 0);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& f : nlohmann::json::parse(r.out)) by_name[f["name"]] = f;
  for (const Spec& s : specs()) {
    ASSERT_TRUE(by_name.count(s.name)) << s.name;
    EXPECT_EQ(by_name[s.name]["max"], s.values.back()) << s.name;
    EXPECT_EQ(by_name[s.name]["signed"], s.is_signed) << s.name;
    EXPECT_EQ(by_name[s.name]["nan"], s.nan.has_value()) << s.name;
  }
  EXPECT_EQ(by_name["fp4-e2m1"]["min_subnormal"], 0.5);
  EXPECT_EQ(by_name["fp6-e2m3"]["max"], 7.5);
  EXPECT_EQ(by_name["fp6-e3m2"]["max"], 28.0);
  EXPECT_EQ(by_name["e8m0"]["zero"], false);
  EXPECT_EQ(by_name["e8m0"]["min_normal"], 0x1p-127);
  EXPECT_NE(by_name["fp4-e2m1"]["note"].get<std::string>().find("e2m1 is IEEE-like (max 3"), std::string::npos);
  const auto e2m1 = nlohmann::json::parse(run_command(cli("formats --format e2m1 --json"), "").out);
  EXPECT_EQ(e2m1[0]["max"], 3.0);
  EXPECT_NE(e2m1[0]["note"].get<std::string>().find("fp4-e2m1 is another format (max 6"), std::string::npos);
  const auto text = run_command(cli("formats"), "");
  EXPECT_NE(text.out.find("note: e2m1 is IEEE-like (max 3"), std::string::npos) << text.out;
  const auto help = run_command(cli("formats --help"), "");
  EXPECT_NE(help.out.find("e2m1 (max 3) is not OCP FP4 (fp4-e2m1, max 6)"), std::string::npos) << help.out;
  EXPECT_NE(run_command(cli("round --help"), "").out.find("e2m1 is not fp4-e2m1"), std::string::npos);
}

TEST(SmallFormatCli, RoundSaturatesWithTheOverflowFlagInEveryMode) {
  const auto r = run_command(cli("round --format fp4-e2m1 --json 7"), "");
  ASSERT_EQ(r.exit_code, 0);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j[0]["bits"], "0x7");
  EXPECT_EQ(j[0]["value"], 6.0);
  EXPECT_EQ(j[0]["flags"], (nlohmann::json{"inexact", "overflow"}));
  // 2.5 lies between 2 (0x4, even) and 3 (0x5, odd); -2.5 between 0xc and 0xd.
  struct Case { const char* mode; const char* plus; const char* minus; };
  for (const Case& c : {Case{"rne", "0x4", "0xc"}, Case{"rtz", "0x4", "0xc"}, Case{"up", "0x5", "0xc"},
                        Case{"down", "0x4", "0xd"}, Case{"rna", "0x5", "0xd"}, Case{"odd", "0x5", "0xd"}}) {
    const auto m =
        run_command(cli(std::string("round --format fp4-e2m1 --json --rounding ") + c.mode + " 2.5 -2.5"), "");
    ASSERT_EQ(m.exit_code, 0) << c.mode;
    const auto out = nlohmann::json::parse(m.out);
    EXPECT_EQ(out[0]["bits"], c.plus) << c.mode;
    EXPECT_EQ(out[1]["bits"], c.minus) << c.mode;
    EXPECT_EQ(out[0]["flags"], nlohmann::json{"inexact"}) << c.mode;
  }
  const auto st =
      nlohmann::json::parse(run_command(cli("round --format e8m0 --rounding stochastic --seed 7 --json 3 0"), "").out);
  EXPECT_TRUE(st[0]["bits"] == "0x80" || st[0]["bits"] == "0x81") << st;
  EXPECT_EQ(st[1]["bits"], "0x00");
  EXPECT_EQ(st[1]["flags"], (nlohmann::json{"inexact", "underflow"}));
  const auto bad = run_command(cli("round --format fp4-e2m1:nan 1"), "", /*with_stderr=*/true);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("saturate"), std::string::npos) << bad.out;
}

}  // namespace
