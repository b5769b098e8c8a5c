// The counters of the instrumented array routines against their definitions
// (emu/counters.h), recounted element by element without count_rounding, on
// every code path; and swamping against the spacing of the format.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "check_count.h"
#include "emu/counters.h"
#include "emu/quantize.h"
#include "explain.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/philox.h"
#include "generators.h"
#include "record/lost_updates.h"

namespace mpverify::emu {
// How RapidCheck prints a generated spec (ADL finds it).
inline void showValue(const QuantizeSpec& s, std::ostream& os) {
  os << s.format.name << " " << formats::to_string(s.rounding) << ", tininess "
     << (s.tininess == formats::Tininess::after_rounding ? "after" : "before") << " rounding, random_bits "
     << s.random_bits << ", seed " << s.seed << ", stream " << s.stream << ", first_index " << s.first_index;
}
}  // namespace mpverify::emu

namespace {

namespace fm = mpverify::formats;
namespace emu = mpverify::emu;
namespace gen = mpverify::properties::gen;
using emu::Counters;
using emu::QuantizeSpec;
using emu::SimdPath;
using fm::Flags;
using fm::Format;
using fm::Rounding;
using mpverify::properties::Bits;
using mpverify::properties::Exact;
using mpverify::properties::expect_checks;
using mpverify::properties::explain;

std::string describe(const Counters& c) {
  return explain("{elements ", c.elements, ", zeros_in ", c.zeros_in, ", nonfinite_in ", c.nonfinite_in, ", inexact ",
                 c.inexact, ", underflow ", c.underflow, ", underflow_to_zero ", c.underflow_to_zero, ", subnormal ",
                 c.subnormal, ", overflow ", c.overflow, ", nan_created ", c.nan_created, ", addends_nonzero ",
                 c.addends_nonzero, ", swamped ", c.swamped, "}");
}

// --- recount ----------------------------------------------------------------------

struct Recount {
  Counters counters;
  std::vector<std::uint32_t> bits;  // what each element should round to
};

// Rounds each element with from_float (the draw the spec documents for
// element i) and counts straight from the definitions in counters.h, reading
// results through their values rather than through the encoding predicates
// that count_rounding uses.
Recount recount(std::span<const float> in, const QuantizeSpec& spec) {
  const Format& f = spec.format;
  Recount r;
  Counters& c = r.counters;
  for (std::size_t i = 0; i < in.size(); ++i) {
    fm::RoundingContext rc = gen::context(spec.rounding, 0, spec.random_bits);
    rc.tininess = spec.tininess;
    if (spec.rounding == Rounding::stochastic)
      rc.random = fm::stochastic_draw(spec.seed, spec.stream, spec.first_index + i);
    Flags flags;
    const std::uint32_t bits = fm::from_float(f, in[i], rc, flags);
    r.bits.push_back(bits);
    const double x = in[i];
    const double v = fm::to_double(f, bits);
    c.elements += 1;
    c.zeros_in += x == 0;
    c.nonfinite_in += !std::isfinite(x);
    c.inexact += flags.has(Flags::inexact);
    c.underflow += flags.has(Flags::underflow);
    c.underflow_to_zero += std::isfinite(x) && x != 0 && v == 0;
    c.subnormal += std::isfinite(v) && v != 0 && std::fabs(v) < f.min_normal();
    c.overflow += flags.has(Flags::overflow);
    c.nan_created += !std::isnan(x) && std::isnan(v);
  }
  return r;
}

// --- generators ---------------------------------------------------------------------

// fp16 weighted up: it is the format with SIMD paths. Flush-to-zero and
// saturating variants exercise the portable path's flush and saturation.
rc::Gen<Format> counted_format() {
  return rc::gen::weightedOneOf<Format>({
      {3, rc::gen::just(fm::parse_format("fp16"))},
      {1, rc::gen::elementOf(std::vector<Format>{fm::parse_format("fp16:ftz"), fm::parse_format("bf16:saturate"),
                                                 fm::parse_format("e4m3:ftz")})},
      {3, gen::format()},
  });
}

rc::Gen<QuantizeSpec> spec(const Format& f) {
  return rc::gen::apply(
      [f](Rounding mode, bool before, int random_bits, std::uint64_t seed, std::uint64_t stream,
          std::uint64_t first_index) {
        QuantizeSpec s;
        s.format = f;
        s.rounding = mode;
        s.tininess = before ? fm::Tininess::before_rounding : fm::Tininess::after_rounding;
        s.random_bits = random_bits;
        s.seed = seed;
        s.stream = stream;
        s.first_index = first_index;
        return s;
      },
      // Round-to-nearest-even weighted up: the SIMD paths run only with it.
      rc::gen::weightedOneOf<Rounding>({{2, rc::gen::just(Rounding::nearest_even)}, {3, gen::rounding()}}),
      rc::gen::weightedOneOf<bool>({{3, rc::gen::just(false)}, {1, rc::gen::just(true)}}), gen::uniform(1, 32),
      gen::uniform<std::uint64_t>(0, 0xffffffffffffull), gen::uniform<std::uint64_t>(0, 1000),
      gen::uniform<std::uint64_t>(0, 1u << 30));
}

// Lengths that are not multiples of the SIMD widths (8, 16) leave tails. The
// length comes from the size, so that shrinking can drop elements.
rc::Gen<std::vector<float>> floats(const Format& f, int max_length) {
  return rc::gen::resize(max_length, rc::gen::container<std::vector<float>>(gen::float_value(f)));
}

// The paths that can run a spec here: the SIMD ones need fp16, round-to-
// nearest-even, tininess after rounding, and the CPU features.
std::vector<SimdPath> paths_for(const QuantizeSpec& s) {
  std::vector<SimdPath> paths = {SimdPath::automatic, SimdPath::portable};
  const bool simd_spec = s.format == fm::parse_format("fp16") && s.rounding == Rounding::nearest_even &&
                         s.tininess == fm::Tininess::after_rounding;
  for (SimdPath p : {SimdPath::avx2_f16c, SimdPath::avx512})
    if (simd_spec && emu::path_available(p)) paths.push_back(p);
  return paths;
}

// --- 9. counters equal a recount, on every path ---------------------------------------

RC_GTEST_PROP(CounterProperties, QuantizeCountsMatchRecount, ()) {
  auto& checks = expect_checks(100 * 2);
  const Format f = *counted_format();
  const QuantizeSpec s = *spec(f);
  const std::vector<float> in = *floats(f, 300);
  const Recount expected = recount(in, s);
  bool simd = false;
  for (SimdPath path : paths_for(s)) {
    simd |= path == SimdPath::avx2_f16c || path == SimdPath::avx512;
    Counters counted;
    std::vector<float> out(in.size());
    emu::quantize(in, out, s, &counted, path);
    PROP_ASSERT(counted == expected.counters, f, " ", s.rounding, " path ", emu::to_string(path), ": counted ",
                describe(counted), " recounted ", describe(expected.counters));
    for (std::size_t i = 0; i < in.size(); ++i) {
      Flags ignored;
      const float want = fm::to_float(f, expected.bits[i], ignored);
      PROP_ASSERT(std::bit_cast<std::uint32_t>(out[i]) == std::bit_cast<std::uint32_t>(want), f, " ", s.rounding,
                  " path ", emu::to_string(path), ": element ", i, " ", Exact{in[i]}, " -> ", Exact{out[i]},
                  ", from_float gives ", Bits{f, expected.bits[i]}, " = ", Exact{want});
    }
    checks.count();
    if (f.width() <= 16) {
      Counters encoded_counts;
      std::vector<std::uint16_t> encoded(in.size());
      emu::encode(in, encoded, s, &encoded_counts, path);
      PROP_ASSERT(encoded_counts == expected.counters, f, " encode path ", emu::to_string(path), ": counted ",
                  describe(encoded_counts), " recounted ", describe(expected.counters));
      for (std::size_t i = 0; i < in.size(); ++i)
        PROP_ASSERT(encoded[i] == expected.bits[i], f, " ", s.rounding, " encode path ", emu::to_string(path),
                    ": element ", i, " ", Exact{in[i]}, " -> ", Bits{f, encoded[i]}, ", from_float gives ",
                    Bits{f, expected.bits[i]});
      checks.count();
    }
  }
  RC_CLASSIFY(simd, "SIMD paths ran");
  RC_CLASSIFY(expected.counters.underflow_to_zero > 0, "underflow to zero");
  RC_CLASSIFY(expected.counters.overflow > 0, "overflow");
  RC_CLASSIFY(expected.counters.nan_created > 0, "NaN created");
}

// Counting a tensor in chunks under per-site names and merging the sets is
// counting it whole; each site holds exactly the sum of its own chunks. The
// chunks are also added to updates under a site of their own, so that the
// swamping counters (which quantize never touches) are merged too.
RC_GTEST_PROP(CounterProperties, MergedSitesEqualConcatenation, ()) {
  auto& checks = expect_checks(100 * 3);
  const Format f = *counted_format();
  const QuantizeSpec s = *spec(f);
  const std::vector<std::string> site_names = {"weights", "grads", "activations"};
  const int chunk_count = *gen::uniform(1, 6);
  emu::CounterSet merged;
  std::map<std::string, Counters> per_site;
  std::vector<float> whole, whole_updates;
  for (int k = 0; k < chunk_count; ++k) {
    const std::string site = *rc::gen::elementOf(site_names);
    const std::vector<float> chunk = *floats(f, 100);
    const std::vector<float> updates = *rc::gen::container<std::vector<float>>(chunk.size(), gen::float_value(f));
    QuantizeSpec chunk_spec = s;
    chunk_spec.first_index = s.first_index + whole.size();  // the draws a single call would use
    emu::CounterSet local;
    std::vector<float> out(chunk.size());
    emu::quantize(chunk, out, chunk_spec, &local.at(site));
    emu::add_arrays(chunk, updates, out, chunk_spec, &local.at("updates"));
    merged.merge(local);
    per_site[site] += recount(chunk, chunk_spec).counters;
    whole.insert(whole.end(), chunk.begin(), chunk.end());
    whole_updates.insert(whole_updates.end(), updates.begin(), updates.end());
  }
  Counters at_once, updates_at_once;
  std::vector<float> out(whole.size());
  emu::quantize(whole, out, s, &at_once);
  emu::add_arrays(whole, whole_updates, out, s, &updates_at_once);
  Counters both = at_once;
  both += updates_at_once;
  PROP_ASSERT(merged.total() == both, "merged ", describe(merged.total()), " whole ", describe(both));
  PROP_ASSERT(at_once == recount(whole, s).counters, "whole ", describe(at_once));
  const Counters* updates_site = merged.find("updates");
  PROP_ASSERT(updates_site != nullptr && *updates_site == updates_at_once, "updates: merged ",
              updates_site ? describe(*updates_site) : std::string("none"), " whole ", describe(updates_at_once));
  for (const std::string& site : site_names) {
    const Counters* found = merged.find(site);
    const auto expected = per_site.find(site);
    if (expected == per_site.end()) {
      PROP_ASSERT(found == nullptr, site, " has counters but no chunk");
    } else {
      PROP_ASSERT(found != nullptr && *found == expected->second, site, ": merged ",
                  found ? describe(*found) : std::string("none"), " recounted ", describe(expected->second));
    }
  }
  PROP_ASSERT(merged.sites().size() == per_site.size() + 1, "sites ", merged.sites().size(), " vs ",
              per_site.size() + 1);
  checks.count(3);
}

// --- add_arrays: one rounding of the exact sum, and its counts ---------------------------

struct Rounded {
  std::uint32_t bits;
  Flags flags;
  bool undecided = false;  // round_sum could not tell (see there)
};

// fl(w + u) rounded once, for floats w and u. TwoSum gives the exact sum as
// s + e with |e| at most half an ulp of s. Every rounding boundary of a
// format (its values, the midpoints between them, and the points where the
// truncated fraction of stochastic rounding steps) has at most 11 + 32
// significant bits, so it is a double and none lies strictly between s and
// the double next to s toward e: rounding that neighbour is rounding s + e,
// in every mode, with the same flags.
Rounded round_sum(const Format& f, float w, float u, const fm::RoundingContext& rc) {
  const double x = w, y = u;
  Flags flags;
  if (!std::isfinite(x) || !std::isfinite(y)) {
    if (std::isinf(x) && std::isinf(y) && std::signbit(x) != std::signbit(y)) {
      flags.raise(Flags::invalid);
      return {f.default_nan_bits(), flags};
    }
    // A NaN operand gives a NaN (compared by NaN-ness only); otherwise the
    // sum is exactly the infinite operand, converted like any infinity.
    const double exact = x + y;
    if (std::isnan(exact)) return {f.default_nan_bits(), flags};
    return {fm::from_double(f, exact, rc, flags), flags};
  }
  const double s = x + y;
  const double y_virtual = s - x;
  const double e = (x - (s - y_virtual)) + (y - y_virtual);
  if (s == 0) {
    // IEEE 754 6.3: an exact zero sum is +0, or -0 when both addends are -0
    // or when rounding down.
    const bool negative =
        x == 0 && y == 0 && std::signbit(x) == std::signbit(y) ? std::signbit(x) : rc.mode == Rounding::down;
    return {fm::from_double(f, negative ? -0.0 : 0.0, rc, flags), flags};
  }
  const double nudged = e == 0 ? s : std::nextafter(s, e > 0 ? HUGE_VAL : -HUGE_VAL);
  // The nudge stands for "s plus a little toward e" only when it does not land
  // on a rounding boundary (a value of the format, or a midpoint): the exact
  // sum lies strictly between s and nudged, so if nudged is a boundary,
  // rounding nudged decides a tie or an exactness that the exact sum does not have. Then this reference cannot decide;
  // the caller skips the element (the exhaustive and sampled suites cover
  // such sums with exact oracles).
  if (e != 0) {
    // A rounding boundary is a value of the format or the midpoint of two.
    Flags probe;
    const double below = fm::to_double(f, fm::from_double(f, nudged, {Rounding::down}, probe));
    const double above = fm::to_double(f, fm::from_double(f, nudged, {Rounding::up}, probe));
    if (nudged == below || nudged == above ||
        (std::isfinite(below) && std::isfinite(above) && nudged == below / 2 + above / 2))
      return {0, Flags{}, true};
  }
  return {fm::from_double(f, nudged, rc, flags), flags};
}

// The counts of one addition, from the definitions (the swamping counts are
// left to the properties below: they concern finite weights).
void count_sum(Counters& c, const Format& f, double exact, const Rounded& r) {
  const double v = fm::to_double(f, r.bits);
  c.elements += 1;
  c.zeros_in += exact == 0;
  c.nonfinite_in += !std::isfinite(exact);
  c.inexact += r.flags.has(Flags::inexact);
  c.underflow += r.flags.has(Flags::underflow);
  c.underflow_to_zero += std::isfinite(exact) && exact != 0 && v == 0;
  c.subnormal += std::isfinite(v) && v != 0 && std::fabs(v) < f.min_normal();
  c.overflow += r.flags.has(Flags::overflow);
  c.nan_created += !std::isnan(exact) && std::isnan(v);
}

Counters without_swamping(Counters c) {
  c.addends_nonzero = 0;
  c.swamped = 0;
  return c;
}

// Weights are mostly values of the format (what add_arrays expects),
// infinities and NaNs among them; some are arbitrary floats, whose sum with
// u must still be rounded once.
rc::Gen<float> weight(const Format& f) {
  auto format_value = rc::gen::map(gen::bits(f), [f](std::uint32_t b) {
    Flags ignored;
    return fm::to_float(f, b, ignored);
  });
  return rc::gen::weightedOneOf<float>({{3, format_value}, {1, gen::float_value(f)}});
}

RC_GTEST_PROP(AddArraysProperties, RoundsExactSumOnceAndCountsIt, ()) {
  auto& checks = expect_checks(100 * 10);
  const Format f = *counted_format();
  const QuantizeSpec s = *spec(f);
  const auto pairs = *rc::gen::resize(
      64, rc::gen::container<std::vector<std::pair<float, float>>>(rc::gen::pair(weight(f), gen::float_value(f))));
  std::vector<float> w, u;
  for (const auto& [wi, ui] : pairs) {
    w.push_back(wi);
    u.push_back(ui);
  }
  const std::size_t n = pairs.size();
  Counters counted;
  std::vector<float> out(n);
  emu::add_arrays(w, u, out, s, &counted);
  Counters expected;
  for (std::size_t i = 0; i < n; ++i) {
    fm::RoundingContext rc = gen::context(s.rounding, 0, s.random_bits);
    rc.tininess = s.tininess;
    if (s.rounding == Rounding::stochastic) rc.random = fm::stochastic_draw(s.seed, s.stream, s.first_index + i);
    const Rounded r = round_sum(f, w[i], u[i], rc);
    if (r.undecided) {
      // Keep the whole-array total comparable: count this element as the
      // library does on its own (that still checks array == sum of singles).
      RC_TAG("sum next to a format value: skipped");
      Counters alone;
      QuantizeSpec single = s;
      single.first_index = s.first_index + i;
      float single_out = 0;
      emu::add_arrays(std::span(w).subspan(i, 1), std::span(u).subspan(i, 1), std::span(&single_out, 1), single,
                      &alone);
      expected += without_swamping(alone);
      continue;
    }
    Flags ignored;
    const float want = fm::to_float(f, r.bits, ignored);
    const bool same = std::isnan(want) ? std::isnan(out[i])
                                       : std::bit_cast<std::uint32_t>(out[i]) == std::bit_cast<std::uint32_t>(want);
    PROP_ASSERT(same, f, " ", s.rounding, ": element ", i, " w=", Exact{w[i]}, " u=", Exact{u[i]}, " gives ",
                Exact{out[i]}, ", the exact sum rounds to ", Bits{f, r.bits}, " = ", Exact{want});
    Counters one;
    count_sum(one, f, static_cast<double>(w[i]) + static_cast<double>(u[i]), r);
    expected += one;
    // Counters are per call; recount element i alone to say which one differs.
    Counters alone;
    QuantizeSpec single = s;
    single.first_index = s.first_index + i;
    float single_out = 0;
    emu::add_arrays(std::span(w).subspan(i, 1), std::span(u).subspan(i, 1), std::span(&single_out, 1), single, &alone);
    PROP_ASSERT(without_swamping(alone) == one, f, " ", s.rounding, ": element ", i, " w=", Exact{w[i]},
                " u=", Exact{u[i]}, " -> ", Exact{single_out}, ": counted ", describe(without_swamping(alone)),
                " by the definitions ", describe(one));
    checks.count();
  }
  PROP_ASSERT(without_swamping(counted) == expected, f, ": counted ", describe(counted), " by the definitions ",
              describe(expected));
  RC_CLASSIFY(expected.nonfinite_in > 0, "non-finite sums");
}

// The concrete cases behind the property above, kept as examples: IEEE 754
// gives +inf + (finite) = +inf exactly, with no flag, whatever the finite
// addend; fp16 cannot hold -1e5 or 1e-10, but the sum is never rounded.
TEST(AddArraysExamples, InfinityPlusFiniteIsExactlyInfinity) {
  auto& checks = expect_checks(2);
  QuantizeSpec s;
  s.format = fm::parse_format("fp16");
  for (float update : {-1e5f, 1e-10f}) {
    const std::vector<float> w = {HUGE_VALF}, u = {update};
    std::vector<float> out(1);
    Counters c;
    emu::add_arrays(w, u, out, s, &c);
    EXPECT_EQ(out[0], HUGE_VALF) << "fl(+inf + " << update << ") in fp16";
    EXPECT_EQ(c.inexact, 0u) << "fl(+inf + " << update << ") is exact";
    EXPECT_EQ(c.overflow, 0u) << "fl(+inf + " << update << ") does not overflow";
    EXPECT_EQ(c.underflow, 0u) << "fl(+inf + " << update << ") does not underflow";
    checks.count();
  }
}

// --- 10. swamping against the spacing of the format ------------------------------------

// Whether fl(w + u) == w under round-to-nearest-even, from the spacing of
// the format around w alone (nothing is rounded here). With q the quantum of
// |w|'s binade, 2^(max(e, emin) - m) for 2^e <= |w| < 2^(e+1):
//  - w = 0: the neighbours are +-q (the smallest subnormal), the midpoints
//    q/2; 0 + u rounds back to zero iff |u| <= q/2 (zero's last bit is even).
//  - u moving w away from zero: the neighbour is q away, the midpoint q/2.
//  - u moving w toward zero: the same, except when |w| is a power of two
//    above the smallest normal: the binade below has half the quantum, so the
//    neighbour is q/2 away and the midpoint q/4.
//  u is lost iff |u| is below the midpoint distance, or equal to it and w's
//  last bit is even (a tie goes to the even neighbour; a power of two is
//  even). Past the largest finite value this is IEEE's overflow rule, which
//  rounds with an unbounded exponent: the largest finite value of an IEEE
//  format is odd, so a tie above it overflows and is not lost.
bool lost_by_spacing(const Format& f, std::uint32_t w_bits, double u) {
  const double w = fm::to_double(f, w_bits);
  const double q = gen::quantum_above(f, w);
  const double size = std::fabs(u);
  if (w == 0) return size <= q / 2;
  const bool toward_zero = std::signbit(u) != std::signbit(w);
  const std::uint32_t magnitude = w_bits & ~f.sign_mask();
  const bool power_of_two_above_min_normal =
      (magnitude & f.mantissa_mask()) == 0 && magnitude > (1u << f.mantissa_bits);
  const double midpoint = toward_zero && power_of_two_above_min_normal ? q / 4 : q / 2;
  const bool even = (w_bits & 1) == 0;
  return size < midpoint || (size == midpoint && even);
}

// Updates that matter to w: the midpoint distances and a float step either
// side, magnitudes a few binades around them, zero, and non-finite values
// (which the swamping counters must ignore).
rc::Gen<float> update(const Format& f, double w) {
  const double q = gen::quantum_above(f, w);
  auto at_threshold = rc::gen::apply(
      [](double threshold, int side) {
        const auto t = static_cast<float>(threshold);  // a power of two inside float's range: exact
        return side == 0 ? t : std::nextafter(t, side > 0 ? HUGE_VALF : 0.0f);
      },
      rc::gen::elementOf(std::vector<double>{q / 2, q / 4, q}), gen::uniform(-1, 1));
  auto around = rc::gen::apply(
      [q](int binades, std::uint32_t fraction) {
        return static_cast<float>(
            std::ldexp(1.0 + std::ldexp(static_cast<double>(fraction), -23), std::ilogb(q) + binades));
      },
      gen::uniform(-6, 3), gen::uniform<std::uint32_t>(0, (1u << 23) - 1));
  auto relative = rc::gen::apply(
      [w](int binades, std::uint32_t fraction) {
        return gen::to_float_or_infinity(
            std::ldexp(std::fabs(w) * (1.0 + std::ldexp(static_cast<double>(fraction), -23)), -binades));
      },
      gen::uniform(0, 30), gen::uniform<std::uint32_t>(0, (1u << 23) - 1));
  auto magnitude = rc::gen::weightedOneOf<float>({{4, at_threshold}, {3, around}, {2, relative}});
  auto signed_magnitude =
      rc::gen::apply([](float m, bool negative) { return negative ? -m : m; }, magnitude, gen::coin());
  auto special = rc::gen::elementOf(std::vector<float>{0.0f, -0.0f, HUGE_VALF, -HUGE_VALF, std::nanf("")});
  return rc::gen::weightedOneOf<float>({{12, signed_magnitude}, {1, special}});
}

struct Pairs {
  std::vector<std::uint32_t> w_bits;
  std::vector<float> w, u;
};

Pairs weight_update_pairs(const Format& f, std::size_t n) {
  Pairs p;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t bits = *gen::finite_bits(f);
    const double w = fm::to_double(f, bits);
    p.w_bits.push_back(bits);
    p.w.push_back(static_cast<float>(w));
    p.u.push_back(*update(f, w));
  }
  return p;
}

QuantizeSpec nearest_even(const Format& f) {
  QuantizeSpec s;
  s.format = f;
  s.rounding = Rounding::nearest_even;
  return s;
}

// Non-finite weights are left out: a lost update is about a finite weight.
// counters.h defines addends_nonzero by u alone ("u != 0 (finite)") while
// add_arrays also requires a finite w; with finite weights both agree.
RC_GTEST_PROP(SwampingProperties, SwampedMatchesSpacingRule, ()) {
  auto& checks = expect_checks(100 * 20);
  const Format f = *rc::gen::elementOf(std::vector<Format>{fm::parse_format("fp16"), fm::parse_format("bf16")});
  const Pairs p = weight_update_pairs(f, static_cast<std::size_t>(*gen::uniform(1, 64)));
  Counters c;
  std::vector<float> out(p.w.size());
  emu::add_arrays(p.w, p.u, out, nearest_even(f), &c);
  std::uint64_t nonzero = 0, lost = 0;
  for (std::size_t i = 0; i < p.w.size(); ++i) {
    const bool counted = p.u[i] != 0 && std::isfinite(p.u[i]);
    const bool rule = counted && lost_by_spacing(f, p.w_bits[i], p.u[i]);
    if (counted) {
      PROP_ASSERT((out[i] == p.w[i]) == rule, f, ": w=", Bits{f, p.w_bits[i]}, " = ", Exact{p.w[i]},
                  " u=", Exact{p.u[i]}, ": fl(w + u) = ", Exact{out[i]}, ", the spacing rule says ",
                  rule ? "lost" : "not lost");
      checks.count();
    }
    nonzero += counted;
    // A lost update needs w != 0 (emu/lost_update.h): w = 0 left 0 is u's underflow, not swamping.
    lost += rule && p.w[i] != 0;
  }
  PROP_ASSERT(c.elements == p.w.size() && c.addends_nonzero == nonzero && c.swamped == lost, f, ": counted ",
              describe(c), ", expected addends_nonzero ", nonzero, " swamped ", lost);
  RC_CLASSIFY(lost > 0, "some lost");
  RC_CLASSIFY(lost < nonzero, "some not lost");
}

// The recorder's lost-update count without adding (mpverify::record::lost_update_counts, path spacing: a different
// implementation of the rule above, on float bits) against the emulated additions (path adding), element
// by element and in total, over the IEEE formats it takes: the weights are values of the format, as a
// stored weight is.
RC_GTEST_PROP(SwampingProperties, RecorderSpacingPathEqualsAdding, ()) {
  auto& checks = expect_checks(100 * 20);
  const Format f = *rc::gen::elementOf(std::vector<Format>{fm::parse_format("fp16"), fm::parse_format("bf16"),
                                                           fm::parse_format("fp8-e5m2"), fm::parse_format("e4m3"),
                                                           fm::parse_format("e8m10"), fm::parse_format("e3m2")});
  const Pairs p = weight_update_pairs(f, static_cast<std::size_t>(*gen::uniform(1, 64)));
  for (std::size_t i = 0; i < p.w.size(); ++i) {
    const std::vector<float> w{p.w[i]}, u{p.u[i]};
    const auto spaced = mpverify::record::lost_update_counts(w, u, f, mpverify::record::LostUpdatePath::spacing);
    const auto added = mpverify::record::lost_update_counts(w, u, f, mpverify::record::LostUpdatePath::adding);
    PROP_ASSERT(spaced.updates == added.updates && spaced.lost == added.lost, f, ": w=", Bits{f, p.w_bits[i]},
                " = ", Exact{p.w[i]}, " u=", Exact{p.u[i]}, ": by spacing ", spaced.lost, " lost of ", spaced.updates,
                ", by adding ", added.lost, " of ", added.updates);
    checks.count();
  }
  const auto spaced = mpverify::record::lost_update_counts(p.w, p.u, f, mpverify::record::LostUpdatePath::spacing);
  const auto added = mpverify::record::lost_update_counts(p.w, p.u, f, mpverify::record::LostUpdatePath::adding);
  PROP_ASSERT(spaced.updates == added.updates && spaced.lost == added.lost, f, ": totals differ");
}

// --- 11. the ratio rules of formats.md for fp16 -------------------------------------------

// "|w|/|u| > 4096 => lost" for every w, and "lost => |w|/|u| >= 2048" for
// normal w. Ratios are compared as products with powers of two (exact), not
// as quotients (rounded).
RC_GTEST_PROP(SwampingProperties, Fp16RatioRules, ()) {
  auto& checks = expect_checks(100 * 20);
  const Format f = fm::parse_format("fp16");
  const Pairs p = weight_update_pairs(f, static_cast<std::size_t>(*gen::uniform(1, 64)));
  std::vector<float> out(p.w.size());
  emu::add_arrays(p.w, p.u, out, nearest_even(f));
  int subnormal_breaks = 0, zero_breaks = 0;
  for (std::size_t i = 0; i < p.w.size(); ++i) {
    const double w = std::fabs(p.w[i]), u = std::fabs(p.u[i]);
    if (u == 0 || !std::isfinite(u)) continue;
    const bool lost = out[i] == p.w[i];
    const auto where = [&] {
      return explain("w=", Bits{f, p.w_bits[i]}, " = ", Exact{p.w[i]}, " u=", Exact{p.u[i]},
                     " fl(w + u) = ", Exact{out[i]});
    };
    if (w > 4096 * u) PROP_ASSERT(lost, where());
    if (lost && w >= f.min_normal()) PROP_ASSERT(w >= 2048 * u, where());
    const bool below_2048 = lost && w < 2048 * u;
    subnormal_breaks += below_2048 && w != 0 && w < f.min_normal();
    zero_breaks += below_2048 && w == 0;
    checks.count();
  }
  RC_CLASSIFY(subnormal_breaks > 0, "lost from a subnormal w at a ratio below 2048");
  RC_CLASSIFY(zero_breaks > 0, "lost from a zero w");
}

// The lower bound needs a normal w: the subnormal spacing is fixed at 2^-24,
// so the smallest subnormal loses an update only 4 times smaller than it.
TEST(SwampingExamples, SubnormalWeightLosesUpdateBelowRatio2048) {
  auto& checks = expect_checks(1);
  const Format f = fm::parse_format("fp16");
  const std::vector<float> w = {0x1p-24f}, u = {0x1p-26f};
  std::vector<float> out(1);
  Counters c;
  emu::add_arrays(w, u, out, nearest_even(f), &c);
  EXPECT_LT(w[0] / u[0], 2048.0f);
  EXPECT_EQ(out[0], w[0]) << "fl(2^-24 + 2^-26) should round back to 2^-24";
  EXPECT_EQ(c.swamped, 1u);
  checks.count();
}

}  // namespace
