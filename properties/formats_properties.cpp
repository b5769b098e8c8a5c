// Algebraic properties of rounding and arithmetic in every format: they hold
// for any correct implementation, so they test the emulator without a second
// implementation to compare against.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "check_count.h"
#include "explain.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "generators.h"

namespace {

namespace fm = mpverify::formats;
namespace gen = mpverify::properties::gen;
using fm::Flags;
using fm::Format;
using fm::Rounding;
using mpverify::properties::Bits;
using mpverify::properties::Exact;
using mpverify::properties::expect_checks;

// Inputs per RapidCheck case: the per-case overhead is small next to a
// rounding, so a batch makes the 100 default cases worth more.
constexpr std::size_t kBatch = 16;

double value(const Format& f, std::uint32_t bits) { return fm::to_double(f, bits); }

// The encoding of -value (fnuz has no negative zero, and one NaN).
std::uint32_t flip_sign(const Format& f, std::uint32_t bits) {
  if (f.encoding == fm::Encoding::fnuz && (bits == 0 || bits == f.sign_mask())) return bits;
  return bits ^ f.sign_mask();
}

// Position of a finite pattern in value order: sign-magnitude, so adjacent
// values of one sign differ by 1 in their magnitude bits, and -0 and +0 share
// position 0 (next to both smallest subnormals).
std::int64_t ordinal(const Format& f, std::uint32_t bits) {
  const std::int64_t magnitude = bits & ~f.sign_mask();
  return fm::sign_bit(f, bits) ? -magnitude : magnitude;
}

std::uint32_t round_to(const Format& f, double x, const fm::RoundingContext& rc, Flags& flags) {
  return fm::from_double(f, x, rc, flags);
}

// --- 1. monotonic ---------------------------------------------------------------

// x <= y must give value(round(x)) <= value(round(y)). The only result that
// is not ordered is a NaN, and the only way to get one from a finite double
// is an overflow under the policy `nan` (fp8-e4m3 and the fnuz presets, with
// the nearest and stochastic modes): those pairs are checked for exactly that
// and left out of the ordering. Stochastic rounding with one draw for both is
// monotonic too: within one quantum the truncated fraction is monotonic, and
// across quanta both results stay on their side of the boundary between.
RC_GTEST_PROP(RoundingProperties, Monotonic, ()) {
  auto& checks = expect_checks(100 * kBatch * 4);
  const Format f = *gen::format();
  for (std::size_t i = 0; i < kBatch; ++i) {
    double x = *gen::finite_double(f);
    double y = *rc::gen::oneOf(gen::finite_double(f), gen::near(x));
    if (y < x) std::swap(x, y);
    const std::uint32_t draw = *gen::draw();
    for (Rounding mode : gen::every_rounding()) {
      const auto rc = gen::context(mode, draw);
      Flags fx, fy;
      const std::uint32_t rx = round_to(f, x, rc, fx);
      const std::uint32_t ry = round_to(f, y, rc, fy);
      const bool nan_x = fm::is_nan(f, rx), nan_y = fm::is_nan(f, ry);
      if (nan_x || nan_y) {
        PROP_ASSERT(f.overflow == fm::Overflow::nan && (!nan_x || std::fabs(x) > f.max_finite()) &&
                        (!nan_y || std::fabs(y) > f.max_finite()),
                    f, " ", mode, " x=", Exact{x}, " -> ", Bits{f, rx}, " y=", Exact{y}, " -> ", Bits{f, ry});
        continue;
      }
      PROP_ASSERT(value(f, rx) <= value(f, ry), f, " ", mode, " draw ", draw, ": x=", Exact{x}, " -> ", Bits{f, rx},
                  " = ", Exact{value(f, rx)}, " but y=", Exact{y}, " -> ", Bits{f, ry}, " = ", Exact{value(f, ry)});
      checks.count();
    }
  }
}

// --- 2. idempotent ----------------------------------------------------------------

// A rounded value is representable, so rounding it again (in any mode, with
// any draw) gives the same encoding and raises nothing.
RC_GTEST_PROP(RoundingProperties, Idempotent, ()) {
  auto& checks = expect_checks(100 * kBatch * 7);
  const Format f = *gen::format();
  for (std::size_t i = 0; i < kBatch; ++i) {
    const double x = *gen::finite_double(f);
    const std::uint32_t first_draw = *gen::draw();
    const std::uint32_t second_draw = *gen::draw();
    for (Rounding mode : gen::every_rounding()) {
      Flags first_flags, again_flags;
      const std::uint32_t once = round_to(f, x, gen::context(mode, first_draw), first_flags);
      const double v = value(f, once);
      const std::uint32_t again = round_to(f, v, gen::context(mode, second_draw), again_flags);
      PROP_ASSERT(again == once && again_flags == Flags{}, f, " ", mode, ": x=", Exact{x}, " -> ", Bits{f, once}, " = ",
                  Exact{v}, ", rounded again -> ", Bits{f, again}, " flags ", again_flags);
      checks.count();
    }
  }
}

// --- 3. RD(x) <= x <= RU(x), equal or adjacent ----------------------------------

// RD and RU bracket x with neighbouring encodings, or agree exactly when x is
// representable, which is also exactly when they raise no inexact flag.
// Beyond the largest finite value there is no bracket (the next value up
// does not exist; `saturate` even rounds up to the largest finite value):
// there RD of a positive x and RU of a negative x are the largest finite
// magnitude, whatever the overflow policy.
RC_GTEST_PROP(RoundingProperties, DownAndUpBracketWithNeighbours, ()) {
  auto& checks = expect_checks(100 * kBatch / 2);
  const Format f = *gen::format();
  int representable = 0;
  for (std::size_t i = 0; i < kBatch; ++i) {
    const double x = *gen::finite_double(f);
    Flags down_flags, up_flags;
    const std::uint32_t rd = round_to(f, x, gen::context(Rounding::down), down_flags);
    const std::uint32_t ru = round_to(f, x, gen::context(Rounding::up), up_flags);
    const auto where = [&] {
      return mpverify::properties::explain(f, ": x=", Exact{x}, " RD -> ", Bits{f, rd}, " ", down_flags, " RU -> ",
                                           Bits{f, ru}, " ", up_flags);
    };
    if (x > f.max_finite()) {
      PROP_ASSERT(rd == f.max_finite_bits(), where());
      continue;
    }
    if (x < -f.max_finite()) {
      PROP_ASSERT(ru == (f.max_finite_bits() | f.sign_mask()), where());
      continue;
    }
    PROP_ASSERT(gen::is_finite(f, rd) && gen::is_finite(f, ru), where());
    PROP_ASSERT(value(f, rd) <= x && x <= value(f, ru), where());
    const bool exact = value(f, rd) == x;
    PROP_ASSERT(exact == (value(f, ru) == x), where());
    if (exact) {
      PROP_ASSERT(rd == ru && down_flags == Flags{} && up_flags == Flags{}, where());
    } else {
      PROP_ASSERT(ordinal(f, ru) - ordinal(f, rd) == 1, where());
      PROP_ASSERT(down_flags.has(Flags::inexact) && up_flags.has(Flags::inexact), where());
    }
    representable += exact;
    checks.count();
  }
  RC_CLASSIFY(representable > 0, "some x representable");
}

// --- 4. representable values come back unchanged ---------------------------------

// A finite encoding's value rounds to that encoding in every mode with no
// flag at all; through from_double and from_float alike (every value of
// these formats is a float). Returns what went wrong, or nothing.
std::optional<std::string> round_trip_failure(const Format& f, std::uint32_t bits, std::uint32_t draw) {
  const double v = value(f, bits);
  for (Rounding mode : gen::every_rounding()) {
    const auto rc = gen::context(mode, draw);
    Flags via_double, via_float;
    const std::uint32_t from_d = fm::from_double(f, v, rc, via_double);
    const std::uint32_t from_f = fm::from_float(f, static_cast<float>(v), rc, via_float);
    if (from_d != bits || via_double != Flags{} || from_f != bits || via_float != Flags{})
      return mpverify::properties::explain(f, " ", mode, " draw ", draw, ": ", Bits{f, bits}, " = ", Exact{v},
                                           " from_double -> ", Bits{f, from_d}, " ", via_double, ", from_float -> ",
                                           Bits{f, from_f}, " ", via_float);
  }
  return std::nullopt;
}
constexpr std::uint64_t kChecksPerRoundTrip = 2 * std::size(fm::all_roundings);

// Every pattern of the narrow formats; edge-biased patterns of the wide ones.
RC_GTEST_PROP(RoundingProperties, RepresentableUnchanged, ()) {
  auto& checks = expect_checks(100 * 256 * kChecksPerRoundTrip / 2);
  const Format f = *gen::format();
  const std::uint32_t draw = *gen::draw();
  const auto check = [&](std::uint32_t bits) {
    const auto failure = round_trip_failure(f, bits, draw);
    if (failure) RC_FAIL(*failure);
    checks.count(kChecksPerRoundTrip);
  };
  if (f.width() <= 12) {
    for (std::uint32_t bits = 0; bits <= f.all_bits_mask(); ++bits)
      if (gen::is_finite(f, bits)) check(bits);
  } else {
    for (std::size_t i = 0; i < 256; ++i) check(*gen::finite_bits(f));
  }
}

// The presets and their saturating variants, exhaustively (fp16, bf16 and
// tf32 too: 2^19 patterns at most), with a draw that varies per pattern.
TEST(RoundingExhaustive, EveryPresetPatternUnchanged) {
  auto& checks = expect_checks(kChecksPerRoundTrip * (65536 + 65536 + 524288));
  std::vector<Format> formats = fm::presets();
  formats.insert(formats.end(), gen::saturating_presets().begin(), gen::saturating_presets().end());
  for (const Format& f : formats) {
    for (std::uint32_t bits = 0; bits <= f.all_bits_mask(); ++bits) {
      if (!gen::is_finite(f, bits)) continue;
      const auto failure = round_trip_failure(f, bits, bits * 0x9E3779B9u);
      ASSERT_FALSE(failure) << *failure;
      checks.count(kChecksPerRoundTrip);
    }
  }
}

// --- 4b. flags follow their definitions ---------------------------------------------

// x rounded to f's precision with an unbounded exponent range: rounding is
// scale-invariant, so scale x near 1, round it in the e8 format with f's
// fraction bits (where nothing near 1 is tiny or overflows), scale back.
double round_unbounded(const Format& f, double x, const fm::RoundingContext& rc) {
  if (x == 0) return x;
  static std::vector<Format> wide;
  if (wide.empty())
    for (int m = 1; m <= 23; ++m) wide.push_back(fm::custom_format(8, m));
  const Format& w = wide[static_cast<std::size_t>(f.mantissa_bits - 1)];
  const int scale = std::ilogb(x);
  Flags ignored;
  return std::ldexp(fm::to_double(w, fm::from_double(w, std::ldexp(x, -scale), rc, ignored)), scale);
}

// IEEE 754 7.4-7.6, for a finite x: inexact when the result differs from x;
// overflow when x rounded with an unbounded exponent exceeds the largest
// finite value; underflow when inexact and tiny, tiny meaning 0 < |x| <
// 2^emin before rounding, or 0 < |x rounded with an unbounded exponent| <
// 2^emin after rounding. Nothing else is raised.
RC_GTEST_PROP(RoundingProperties, FlagsFollowDefinitions, ()) {
  auto& checks = expect_checks(100 * kBatch * 7);
  const Format f = *gen::format();
  const auto tininess =
      *rc::gen::elementOf(std::vector<fm::Tininess>{fm::Tininess::after_rounding, fm::Tininess::before_rounding});
  int underflows = 0;
  for (std::size_t i = 0; i < kBatch; ++i) {
    const double x = *gen::finite_double(f);
    const std::uint32_t draw = *gen::draw();
    for (Rounding mode : gen::every_rounding()) {
      fm::RoundingContext rc = gen::context(mode, draw);
      rc.tininess = tininess;
      Flags flags;
      const std::uint32_t r = round_to(f, x, rc, flags);
      const double unbounded = round_unbounded(f, x, rc);
      const bool inexact = !(value(f, r) == x);
      const double tiny_measure = tininess == fm::Tininess::before_rounding ? x : unbounded;
      const bool tiny = tiny_measure != 0 && std::fabs(tiny_measure) < f.min_normal();
      Flags expected;
      if (inexact) expected.raise(Flags::inexact);
      if (inexact && tiny) expected.raise(Flags::underflow);
      if (std::fabs(unbounded) > f.max_finite()) expected.raise(Flags::overflow);
      PROP_ASSERT(flags == expected, f, " ", mode, " draw ", draw,
                  tininess == fm::Tininess::before_rounding ? " tininess before" : " tininess after", ": x=", Exact{x},
                  " -> ", Bits{f, r}, " = ", Exact{value(f, r)}, " flags ", flags, ", expected ", expected,
                  " (unbounded rounding ", Exact{unbounded}, ")");
      underflows += expected.has(Flags::underflow);
      checks.count();
    }
  }
  RC_CLASSIFY(underflows > 0, "some underflow");
}

// --- 5. sign symmetry -----------------------------------------------------------

// The symmetric modes (and stochastic rounding with the same draw, which
// rounds the magnitude) commute with negation; the directed modes swap.
RC_GTEST_PROP(RoundingProperties, SignSymmetric, ()) {
  auto& checks = expect_checks(100 * kBatch * 7);
  const Format f = *gen::format();
  for (std::size_t i = 0; i < kBatch; ++i) {
    const double x = *gen::finite_double(f);
    const std::uint32_t draw = *gen::draw();
    for (Rounding mode :
         {Rounding::nearest_even, Rounding::toward_zero, Rounding::nearest_away, Rounding::odd, Rounding::stochastic}) {
      const auto rc = gen::context(mode, draw);
      Flags positive_flags, negative_flags;
      const std::uint32_t r = round_to(f, x, rc, positive_flags);
      const std::uint32_t r_neg = round_to(f, -x, rc, negative_flags);
      PROP_ASSERT(r_neg == flip_sign(f, r) && negative_flags == positive_flags, f, " ", mode, " draw ", draw,
                  ": x=", Exact{x}, " -> ", Bits{f, r}, " ", positive_flags, ", -x -> ", Bits{f, r_neg}, " ",
                  negative_flags);
      checks.count();
    }
    for (auto [mode, mirror] : {std::pair{Rounding::up, Rounding::down}, std::pair{Rounding::down, Rounding::up}}) {
      Flags flags, mirror_flags;
      const std::uint32_t r_neg = round_to(f, -x, gen::context(mode), flags);
      const std::uint32_t r = round_to(f, x, gen::context(mirror), mirror_flags);
      PROP_ASSERT(r_neg == flip_sign(f, r) && flags == mirror_flags, f, ": ", mode, "(-x) -> ", Bits{f, r_neg}, " ",
                  flags, " but ", mirror, "(x) -> ", Bits{f, r}, " ", mirror_flags, ", x=", Exact{x});
      checks.count();
    }
  }
}

// --- 6. Sterbenz ------------------------------------------------------------------

// For a, b of one sign with b/2 <= a <= 2b, a - b is representable (Sterbenz's
// lemma; it holds with subnormals), so sub() is exact and raises nothing in
// every mode. An exact zero difference is +0, except -0 when rounding down
// (IEEE 754 6.3), and always +0 in fnuz.
RC_GTEST_PROP(ArithmeticProperties, SterbenzSubtractionExact, ()) {
  auto& checks = expect_checks(100 * kBatch * 7 / 3);
  const Format f = *gen::format();
  const std::uint32_t sign = f.sign_mask();
  const auto nonzero = [&](std::uint32_t b) { return (b & ~sign) != 0; };
  const std::int64_t binade = std::int64_t{1} << f.mantissa_bits;
  int equal = 0, subnormal = 0;
  for (std::size_t i = 0; i < kBatch; ++i) {
    const std::uint32_t b = *rc::gen::suchThat(gen::finite_bits(f), nonzero) & ~sign;
    // a within two binades of b by position; the edges a = 2b and a = b/2
    // sit exactly one binade away for normal values.
    const std::int64_t step = *rc::gen::weightedOneOf<std::int64_t>(
        {{1, rc::gen::elementOf(std::vector<std::int64_t>{0, binade, -binade, 1, -1, binade - 1, 1 - binade})},
         {3, gen::uniform<std::int64_t>(-2 * binade, 2 * binade)}});
    const std::int64_t a_position = std::int64_t{b} + step;
    if (a_position <= 0 || a_position > std::int64_t{f.max_finite_bits()}) continue;
    const std::uint32_t a_magnitude = static_cast<std::uint32_t>(a_position);
    const double va_magnitude = value(f, a_magnitude), vb_magnitude = value(f, b);
    if (!(vb_magnitude / 2 <= va_magnitude && va_magnitude <= 2 * vb_magnitude)) continue;
    const bool negative = *gen::coin();
    const std::uint32_t a = negative ? a_magnitude | sign : a_magnitude;
    const std::uint32_t bb = negative ? b | sign : b;
    const double exact = value(f, a) - value(f, bb);  // exact in double, by the same lemma
    const std::uint32_t draw = *gen::draw();
    for (Rounding mode : gen::every_rounding()) {
      Flags flags;
      const std::uint32_t d = fm::sub(f, a, bb, gen::context(mode, draw), flags);
      const auto where = [&] {
        return mpverify::properties::explain(f, " ", mode, ": ", Bits{f, a}, " - ", Bits{f, bb}, " = ", Exact{exact},
                                             " but got ", Bits{f, d}, " = ", Exact{value(f, d)}, " ", flags);
      };
      PROP_ASSERT(flags == Flags{} && value(f, d) == exact, where());
      if (exact == 0) {
        const bool negative_zero = mode == Rounding::down && f.has_negative_zero();
        PROP_ASSERT(fm::sign_bit(f, d) == negative_zero, where());
      }
      checks.count();
    }
    equal += a == bb;
    subnormal += fm::is_subnormal(f, bb);
  }
  RC_CLASSIFY(equal > 0, "some a == b");
  RC_CLASSIFY(subnormal > 0, "some subnormal b");
}

// --- 7. scaling by powers of two ----------------------------------------------------

// Loss scaling's premise: multiplying by 2^k and then by 2^-k changes no
// significand bit while the scaled value stays normal and finite, so both
// products are exact in every mode. Only k with both 2^k and 2^-k encodable.
RC_GTEST_PROP(ArithmeticProperties, PowerOfTwoScalingRoundTrips, ()) {
  auto& checks = expect_checks(100 * kBatch * 7 / 2);
  const Format f = *gen::format();
  const int k_low = std::max(f.emin() - f.mantissa_bits, -f.emax());
  const int k_high = std::min(f.emax(), -(f.emin() - f.mantissa_bits));
  for (std::size_t i = 0; i < kBatch; ++i) {
    const std::uint32_t x = *gen::finite_bits(f);
    const double v = value(f, x);
    std::vector<int> ks;
    for (int k = k_low; k <= k_high; ++k) {
      const double scaled = std::fabs(std::ldexp(v, k));
      if (v == 0 || (scaled >= f.min_normal() && scaled <= f.max_finite())) ks.push_back(k);
    }
    if (ks.empty()) continue;
    const int k = *rc::gen::elementOf(ks);
    Flags encode_flags;
    const std::uint32_t up = fm::from_double(f, std::ldexp(1.0, k), gen::context(Rounding::nearest_even), encode_flags);
    const std::uint32_t down =
        fm::from_double(f, std::ldexp(1.0, -k), gen::context(Rounding::nearest_even), encode_flags);
    RC_ASSERT(encode_flags == Flags{});  // the choice of k above, not the library, is at fault if this fails
    const std::uint32_t draw = *gen::draw();
    for (Rounding mode : gen::every_rounding()) {
      const auto rc = gen::context(mode, draw);
      Flags scale_flags, unscale_flags;
      const std::uint32_t y = fm::mul(f, x, up, rc, scale_flags);
      const std::uint32_t z = fm::mul(f, y, down, rc, unscale_flags);
      PROP_ASSERT(z == x && scale_flags == Flags{} && unscale_flags == Flags{} && value(f, y) == std::ldexp(v, k), f,
                  " ", mode, ": x=", Bits{f, x}, " = ", Exact{v}, " * 2^", k, " -> ", Bits{f, y}, " ", scale_flags,
                  " * 2^", -k, " -> ", Bits{f, z}, " ", unscale_flags);
      checks.count();
    }
  }
}

// --- 8. fma with a zero addend; commutativity --------------------------------------

// a*b + 0 is a*b, rounded once either way; only an exactly zero product may
// differ, in its sign (+0 + -0 is +0). A product that underflows to zero is
// not exempt: its exact value is non-zero, so both keep its sign.
// NaN propagation picks the first NaN operand, so with two NaN operands the
// commuted results may differ in payload but must both be NaN.
RC_GTEST_PROP(ArithmeticProperties, FmaWithZeroIsMulAndCommutative, ()) {
  auto& checks = expect_checks(100 * kBatch * 7 * 3);
  const Format f = *gen::format();
  std::vector<std::uint32_t> zeros = {0};
  if (f.has_negative_zero()) zeros.push_back(f.sign_mask());
  int nan_operand = 0, zero_operand = 0;
  for (std::size_t i = 0; i < kBatch; ++i) {
    const std::uint32_t a = *gen::bits(f);
    const std::uint32_t b = *gen::bits(f);
    const std::uint32_t draw = *gen::draw();
    const bool both_nan = fm::is_nan(f, a) && fm::is_nan(f, b);
    const bool zero_product = fm::is_zero(f, a) || fm::is_zero(f, b);
    for (Rounding mode : gen::every_rounding()) {
      const auto rc = gen::context(mode, draw);
      Flags mul_flags;
      const std::uint32_t product = fm::mul(f, a, b, rc, mul_flags);
      for (std::uint32_t zero : zeros) {
        Flags fma_flags;
        const std::uint32_t fused = fm::fma(f, a, b, zero, rc, fma_flags);
        const bool same = fused == product || (zero_product && fm::is_zero(f, fused) && fm::is_zero(f, product));
        PROP_ASSERT(same && fma_flags == mul_flags, f, " ", mode, " draw ", draw, ": a=", Bits{f, a}, " b=", Bits{f, b},
                    " mul -> ", Bits{f, product}, " ", mul_flags, " fma(a, b, ", Bits{f, zero}, ") -> ", Bits{f, fused},
                    " ", fma_flags);
        checks.count();
      }
      const auto commutes = [&](auto op, const char* name) {
        Flags ab_flags, ba_flags;
        const std::uint32_t ab = op(f, a, b, rc, ab_flags);
        const std::uint32_t ba = op(f, b, a, rc, ba_flags);
        const bool same = both_nan ? fm::is_nan(f, ab) && fm::is_nan(f, ba) : ab == ba;
        PROP_ASSERT(same && ab_flags == ba_flags, f, " ", mode, " draw ", draw, ": ", name, "(", Bits{f, a}, ", ",
                    Bits{f, b}, ") -> ", Bits{f, ab}, " ", ab_flags, " but ", name, "(", Bits{f, b}, ", ", Bits{f, a},
                    ") -> ", Bits{f, ba}, " ", ba_flags);
        checks.count();
      };
      commutes(fm::add, "add");
      commutes(fm::mul, "mul");
    }
    nan_operand += fm::is_nan(f, a) || fm::is_nan(f, b);
    zero_operand += zero_product;
  }
  RC_CLASSIFY(nan_operand > 0, "some NaN operand");
  RC_CLASSIFY(zero_operand > 0, "some zero operand");
}

}  // namespace
