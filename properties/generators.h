// RapidCheck generators shared by the property suites: formats, bit patterns
// biased toward the edges of a format, doubles and floats around (and beyond)
// its range, rounding modes and stochastic draws.
//
// TestFloat's lesson: uniformly random inputs almost never hit the cases that
// break rounding code (ties, binade boundaries, the subnormal threshold, the
// overflow threshold), so every generator here weights those heavily.
#pragma once

#include <rapidcheck.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/format.h"
#include "formats/rounding.h"

namespace mpverify::properties::gen {

namespace fm = mpverify::formats;

// An integer in [lo, hi] (a range that fits int64), drawn at full size.
// RapidCheck scales integer ranges with a case's size, which starts at 0, so
// without this the early cases of every property would all draw `lo`.
template <typename T>
rc::Gen<T> uniform(T lo, T hi) {
  return rc::gen::map(rc::gen::resize(100, rc::gen::inRange<std::int64_t>(static_cast<std::int64_t>(lo),
                                                                          static_cast<std::int64_t>(hi) + 1)),
                      [](std::int64_t v) { return static_cast<T>(v); });
}

inline rc::Gen<bool> coin() { return rc::gen::elementOf(std::vector<bool>{false, true}); }

// --- formats ------------------------------------------------------------------

// The presets whose overflow policy gives NaN, made saturating: the policy
// that Transformer Engine's casts use, and the one every format can have.
inline const std::vector<fm::Format>& saturating_presets() {
  static const std::vector<fm::Format> all = {fm::parse_format("fp8-e4m3:saturate"),
                                              fm::parse_format("fp8-e4m3fnuz:saturate"),
                                              fm::parse_format("fp8-e5m2:saturate"), fm::parse_format("fp16:saturate")};
  return all;
}

// A preset, a saturating preset, or a custom IEEE-style eXmY.
inline rc::Gen<fm::Format> format() {
  return rc::gen::weightedOneOf<fm::Format>({
      {4, rc::gen::elementOf(fm::presets())},
      {1, rc::gen::elementOf(saturating_presets())},
      {4, rc::gen::apply([](int e, int m) { return fm::custom_format(e, m); }, uniform(2, 8), uniform(1, 10))},
  });
}

// --- bit patterns -------------------------------------------------------------

inline std::uint32_t top_exponent_field(const fm::Format& f) { return static_cast<std::uint32_t>(f.emax() + f.bias); }

inline bool is_finite(const fm::Format& f, std::uint32_t bits) {
  return !fm::is_nan(f, bits) && !fm::is_infinity(f, bits);
}

// The named edges of a format, without sign: zero, the smallest subnormals,
// the largest subnormal, the smallest normals, 1 and its neighbours, the
// largest finite values, and the infinity and NaN encodings it has.
inline std::vector<std::uint32_t> edge_magnitudes(const fm::Format& f) {
  const std::uint32_t m = static_cast<std::uint32_t>(f.mantissa_bits);
  const std::uint32_t min_normal = 1u << m;
  const std::uint32_t one = static_cast<std::uint32_t>(f.bias) << m;
  std::vector<std::uint32_t> edges = {0,
                                      1,
                                      2,
                                      f.mantissa_mask(),
                                      min_normal,
                                      min_normal | 1,
                                      one,
                                      one | 1,
                                      one - 1,
                                      f.max_finite_bits(),
                                      f.max_finite_bits() - 1,
                                      f.max_finite_bits() & ~f.mantissa_mask()};
  switch (f.encoding) {
    case fm::Encoding::ieee: {
      const std::uint32_t inf = f.positive_infinity_bits();
      edges.insert(edges.end(), {inf, inf | 1, inf | (1u << (m - 1)), inf | f.mantissa_mask()});
      break;
    }
    case fm::Encoding::fn: edges.push_back(f.all_bits_mask() & ~f.sign_mask()); break;
    case fm::Encoding::fnuz: break;  // its NaN is the negative zero pattern: edge 0 with the sign
    case fm::Encoding::finite: break;  // no NaN, no infinity: every pattern is a number
  }
  return edges;
}

// Any bit pattern of f, biased toward the edges: named edges, values next to
// powers of two (fraction 0, 1, all ones), subnormals, and uniform patterns.
inline rc::Gen<std::uint32_t> bits(const fm::Format& f) {
  const std::uint32_t mask = f.mantissa_mask();
  const std::uint32_t top = top_exponent_field(f);
  const std::uint32_t m = static_cast<std::uint32_t>(f.mantissa_bits);
  auto near_power_of_two = rc::gen::apply(
      [m](std::uint32_t field, std::uint32_t fraction) { return (field << m) | fraction; },
      uniform<std::uint32_t>(1, top),
      rc::gen::elementOf(std::vector<std::uint32_t>{0, 1, mask, mask > 1 ? mask - 1 : 0, 1u << (m - 1)}));
  auto magnitude = rc::gen::weightedOneOf<std::uint32_t>({
      {3, rc::gen::elementOf(edge_magnitudes(f))},
      {3, near_power_of_two},
      {1, uniform<std::uint32_t>(1, mask)},  // subnormal
      {3, uniform<std::uint32_t>(0, f.all_bits_mask() & ~f.sign_mask())},
  });
  const std::uint32_t sign = f.sign_mask();
  return rc::gen::apply([sign](std::uint32_t mag, bool negative) { return mag | (negative ? sign : 0u); }, magnitude,
                        coin());
}

inline rc::Gen<std::uint32_t> finite_bits(const fm::Format& f) {
  return rc::gen::suchThat(bits(f), [f](std::uint32_t b) { return is_finite(f, b); });
}

// --- values -------------------------------------------------------------------

// The quantum of the binade of a finite value v of f: the distance from |v|
// to the next larger magnitude. Also defined at the largest finite value,
// where it puts the overflow threshold of the nearest modes half a quantum up.
inline double quantum_above(const fm::Format& f, double value) {
  const double magnitude = std::fabs(value);
  int exponent = f.emin();
  if (magnitude >= f.min_normal()) exponent = std::ilogb(magnitude);
  return std::ldexp(1.0, exponent - f.mantissa_bits);
}

// Finite doubles that matter to a rounding to f: its values, the midpoints
// between neighbours (ties), a double ulp either side of those, values with
// random significands from well below the smallest subnormal to beyond the
// largest finite value, and a few far outside its range.
inline rc::Gen<double> finite_double(const fm::Format& f) {
  const int low = f.emin() - f.mantissa_bits - 4;
  const int high = f.emax() + 3;
  auto representable = rc::gen::map(finite_bits(f), [f](std::uint32_t b) { return fm::to_double(f, b); });
  // value + quantum/2 for a value v: the tie above v (above the largest
  // finite value, the overflow threshold of the nearest modes).
  auto tie = rc::gen::map(representable, [f](double v) {
    const double half = quantum_above(f, v) / 2;
    return std::signbit(v) ? v - half : v + half;
  });
  auto nudged_tie =
      rc::gen::apply([](double t, bool up) { return std::nextafter(t, up ? HUGE_VAL : -HUGE_VAL); }, tie, coin());
  auto nudged_value = rc::gen::apply([](double v, bool up) { return std::nextafter(v, up ? HUGE_VAL : -HUGE_VAL); },
                                     representable, coin());
  auto random_significand = rc::gen::apply(
      [](int exponent, std::uint64_t fraction, bool negative) {
        const double v = std::ldexp(1.0 + std::ldexp(static_cast<double>(fraction), -52), exponent);
        return negative ? -v : v;
      },
      uniform(low, high), uniform<std::uint64_t>(0, (std::uint64_t{1} << 52) - 1), coin());
  // Just below the smallest normal, on the grid of p-bit values with an
  // unbounded exponent and its midpoints: where tininess after rounding
  // differs from tininess before rounding.
  auto below_min_normal = rc::gen::apply(
      [f](int k, int nudge, bool negative) {
        double v = f.min_normal() - k * std::ldexp(f.min_normal(), -f.mantissa_bits - 2);
        if (nudge != 0) v = std::nextafter(v, nudge > 0 ? HUGE_VAL : 0.0);
        return negative ? -v : v;
      },
      uniform(1, 4), uniform(-1, 1), coin());
  auto far = rc::gen::elementOf(std::vector<double>{0.0, -0.0, 0x1p-1000, -0x1p-1000, 1e300, -1e300,
                                                    std::numeric_limits<double>::denorm_min(),
                                                    std::numeric_limits<double>::max()});
  return rc::gen::weightedOneOf<double>({
      {3, representable},
      {3, tie},
      {2, nudged_tie},
      {1, nudged_value},
      {4, random_significand},
      {1, below_min_normal},
      {1, far},
  });
}

// A double close to x: a few double ulps away, or a small relative step.
inline rc::Gen<double> near(double x) {
  auto ulps = rc::gen::map(uniform(-3, 3), [x](int k) {
    double y = x;
    for (int i = 0; i < std::abs(k); ++i) y = std::nextafter(y, k > 0 ? HUGE_VAL : -HUGE_VAL);
    return y;
  });
  auto relative =
      rc::gen::apply([x](int j, bool up) { return x + (up ? 1 : -1) * std::ldexp(x, -j); }, uniform(1, 14), coin());
  return rc::gen::oneOf(ulps, relative);
}

// x as a float; beyond float's range an infinity (a plain conversion is
// undefined there).
inline float to_float_or_infinity(double x) {
  if (std::fabs(x) > static_cast<double>(std::numeric_limits<float>::max()))
    return std::signbit(x) ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  return static_cast<float>(x);
}

// Floats to round to f: the values of finite_double(f) that a float can hold
// (its ties included: a format's midpoint has at most 24 significant bits),
// and float's own specials: signed zeros, infinities, quiet and signalling
// NaNs with payloads, float subnormals and extremes.
inline rc::Gen<float> float_value(const fm::Format& f) {
  auto from_bits = [](std::uint32_t b) { return std::bit_cast<float>(b); };
  auto specials =
      rc::gen::map(rc::gen::elementOf(std::vector<std::uint32_t>{
                       0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u,
                       0xff812345u, 0x7fd23456u, 0x00000001u, 0x807fffffu, 0x00800000u, 0x7f7fffffu, 0xff7fffffu}),
                   from_bits);
  return rc::gen::weightedOneOf<float>({
      {1, specials},
      {6, rc::gen::map(finite_double(f), to_float_or_infinity)},
  });
}

// --- rounding -----------------------------------------------------------------

inline const std::vector<fm::Rounding>& every_rounding() {
  static const std::vector<fm::Rounding> all(std::begin(fm::all_roundings), std::end(fm::all_roundings));
  return all;
}

inline rc::Gen<fm::Rounding> rounding() { return rc::gen::elementOf(every_rounding()); }

// A 32-bit stochastic draw, with the extremes weighted in (with 32 random
// bits, 0 never rounds a fraction up and 0xffffffff rounds up any non-zero one).
inline rc::Gen<std::uint32_t> draw() {
  return rc::gen::weightedOneOf<std::uint32_t>({
      {1, rc::gen::elementOf(std::vector<std::uint32_t>{0, 1, 0x80000000u, 0xffffffffu})},
      {4, uniform<std::uint32_t>(0, 0xffffffffu)},
  });
}

inline fm::RoundingContext context(fm::Rounding mode, std::uint32_t random = 0, int random_bits = 32) {
  fm::RoundingContext rc;
  rc.mode = mode;
  rc.random = random;
  rc.random_bits = random_bits;
  return rc;
}

}  // namespace mpverify::properties::gen
