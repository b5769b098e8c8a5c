// Block quantization (src/emu/block_quantize.h): every non-saturated finite
// element lies within half a scaled ulp of its input, the counters recount
// from their definitions, and stochastic rounding is unbiased and replays
// from its seed, on random schemes, scale rules, layouts and tensors biased
// toward clipping, underflow and the edges of float's range.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "check_count.h"
#include "emu/block_quantize.h"
#include "explain.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "generators.h"

namespace {

namespace fm = mpverify::formats;
namespace emu = mpverify::emu;
namespace gen = mpverify::properties::gen;
using emu::BlockQuantized;
using emu::BlockScheme;
using emu::ScaleRule;
using mpverify::properties::Exact;
using mpverify::properties::expect_checks;

// --- cases --------------------------------------------------------------------------------------

struct Case {
  BlockScheme scheme;
  emu::BlockQuantizeOptions options;
  std::size_t rows = 1, cols = 1;
  int axis = -1;
  std::vector<float> x;
};

rc::Gen<BlockScheme> scheme_gen() {
  std::vector<BlockScheme> all(emu::block_schemes().begin(), emu::block_schemes().end());
  BlockScheme tiles = *emu::find_block_scheme("nvfp4");
  tiles.block_rows = tiles.block_cols = 16;
  all.push_back(tiles);
  return rc::gen::elementOf(all);
}

// A row of blocks around a random binade: each element sign * significand * 2^(E - d), d
// uniform in [0, spread]; significands above 1.75 and 1.5 (where floor clips) are common, as
// are zeros, fp32 subnormals and the odd infinity or NaN.
std::vector<float> tensor(std::size_t n, bool specials) {
  const int top = *gen::uniform(-150, 127);
  const int spread = *gen::uniform(0, 30);
  std::vector<float> x(n);
  for (float& v : x) {
    const int kind = *gen::uniform(0, 99);
    double significand = 1.0 + std::ldexp(static_cast<double>(*gen::uniform<std::uint32_t>(0, (1u << 23) - 1)), -23);
    if (kind < 15) significand = 1.75 + std::ldexp(static_cast<double>(*gen::uniform<std::uint32_t>(1, (1u << 21) - 1)), -23);
    if (kind < 5) significand = 1.5 + std::ldexp(static_cast<double>(*gen::uniform<std::uint32_t>(0, 3)), -23);
    const double magnitude = std::ldexp(significand, top - *gen::uniform(0, spread));
    v = static_cast<float>(std::min(magnitude, static_cast<double>(std::numeric_limits<float>::max())));
    if (kind >= 95) v = 0.0f;
    if (specials && kind == 94) v = *gen::coin() ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    if (*gen::coin()) v = -v;
  }
  return x;
}

Case case_gen(bool specials, bool stochastic) {
  Case c;
  c.scheme = *scheme_gen();
  c.options.scale_rule = *rc::gen::elementOf(std::vector<ScaleRule>{ScaleRule::floor, ScaleRule::ceil, ScaleRule::even, ScaleRule::rceil});
  c.options.rounding = stochastic ? fm::Rounding::stochastic : fm::Rounding::nearest_even;
  c.options.seed = *gen::uniform<std::uint64_t>(0, 0xffffffffffffull);
  c.options.stream = *gen::uniform<std::uint64_t>(0, 100);
  c.rows = *gen::uniform<std::size_t>(1, 5);
  c.cols = *gen::uniform<std::size_t>(1, 150);
  c.axis = *gen::uniform(-2, 1);
  c.x = tensor(c.rows * c.cols, specials);
  return c;
}

BlockQuantized run(const Case& c) {
  return emu::block_quantize(c.x, std::vector<std::size_t>{c.rows, c.cols}, c.axis, c.scheme, c.options);
}

// X of element (r, c): its block's scale (times the tensor scale for NVFP4). The block index
// comes from the coordinates and the scale grid: along the axis / block_cols, across / block_rows.
double divisor_of(const Case& c, const BlockQuantized& q, std::size_t i) {
  const std::size_t r = i / c.cols, col = i % c.cols;
  const bool axis_rows = c.axis == 0 || c.axis == -2;
  std::size_t block = 0;
  if (c.scheme.block_rows != 0) {
    const std::size_t along = axis_rows ? r : col, across = axis_rows ? col : r;
    const std::size_t a = along / c.scheme.block_cols, b = across / c.scheme.block_rows;
    block = axis_rows ? a * q.scale_shape[1] + b : b * q.scale_shape[1] + a;
  }
  return static_cast<double>(q.scales[block]) * static_cast<double>(q.tensor_scale.value_or(1.0f));
}

// The element format's spacing around |x| / X (X > 0): 2^(max(e, emin) - m) where
// 2^e X <= |x| < 2^(e+1) X, found with exact comparisons (2^e X is an exact double).
double spacing(const fm::Format& f, double ax, double X) {
  int e = std::ilogb(ax / X);
  while (std::ldexp(X, e) > ax) --e;
  while (std::ldexp(X, e + 1) <= ax) ++e;
  return std::ldexp(1.0, std::max(e, f.emin()) - f.mantissa_bits);
}

// --- 1. within half a scaled ulp ------------------------------------------------------------------

// Round-to-nearest leaves |x - c X| <= spacing(|x| / X) X / 2 for every finite element not
// above max X (the error is at most half the gap between the two neighbours of |x| / X, and that
// gap is the spacing of the lower neighbour's binade); stochastic rounding leaves it below one
// spacing (one of the two neighbours). Saturated elements are +-max. The difference is exact
// in long double: c X has at most 32 significant bits and lies within a factor 2 of x (or is 0).
// Each element's value is c X rounded once to float.
void check_elements(const Case& c, const BlockQuantized& q, mpverify::properties::CheckCount& checks) {
  const fm::Format& f = c.scheme.element;
  const bool stochastic = c.options.rounding == fm::Rounding::stochastic;
  for (std::size_t i = 0; i < c.x.size(); ++i) {
    const float x = c.x[i];
    const std::uint32_t code = q.codes[i];
    const double X = divisor_of(c, q, i);
    if (!std::isfinite(x)) continue;
    const double cv = fm::to_double(f, code);
    PROP_ASSERT(q.values[i] == static_cast<float>(cv * X), c.scheme.name, " element ", i, " value ", Exact{q.values[i]},
                " is not code * X = ", Exact{cv * X});
    const double ax = std::fabs(static_cast<double>(x));
    if (ax > f.max_finite() * X) {
      PROP_ASSERT(std::fabs(cv) == f.max_finite() && std::signbit(cv) == std::signbit(x), c.scheme.name, " element ", i,
                  " x ", Exact{x}, " above max X = ", Exact{f.max_finite() * X}, " stored as ", Exact{cv});
      checks.count();
      continue;
    }
    if (x == 0) {
      PROP_ASSERT(cv == 0 && std::signbit(cv) == std::signbit(x), c.scheme.name, " zero stored as ", Exact{cv});
      continue;
    }
    const long double error = std::fabs(static_cast<long double>(ax) - std::fabs(static_cast<long double>(cv * X)));
    const long double ulp = static_cast<long double>(spacing(f, ax, X) * X);
    PROP_ASSERT(cv == 0 || std::signbit(cv) == std::signbit(x), c.scheme.name, " element ", i, " changed sign");
    if (stochastic)
      PROP_ASSERT(error < ulp, c.scheme.name, " element ", i, " x ", Exact{x}, " X ", Exact{X}, " stored ", Exact{cv},
                  ": not a neighbour");
    else
      PROP_ASSERT(2 * error <= ulp, c.scheme.name, " rule ", emu::to_string(c.options.scale_rule), " element ", i,
                  " x ", Exact{x}, " X ", Exact{X}, " stored ", Exact{cv}, ": error ", Exact{static_cast<double>(error)},
                  " above half the scaled ulp ", Exact{static_cast<double>(ulp / 2)});
    checks.count();
  }
}

RC_GTEST_PROP(BlockQuantizeProperties, WithinHalfAScaledUlp, ()) {
  auto& checks = expect_checks(100 * 100);
  const Case c = case_gen(true, false);
  check_elements(c, run(c), checks);
}

RC_GTEST_PROP(BlockQuantizeProperties, StochasticGivesANeighbour, ()) {
  auto& checks = expect_checks(100 * 100);
  const Case c = case_gen(true, true);
  check_elements(c, run(c), checks);
}

// --- 2. the counters, recounted -----------------------------------------------------------------

// saturated is exactly the number of finite elements with |x| > max_elem X; the other
// element counters recount from the inputs and codes by their definitions.
RC_GTEST_PROP(BlockQuantizeProperties, CountersRecount, ()) {
  auto& checks = expect_checks(100);
  const Case c = case_gen(true, *gen::coin());
  const BlockQuantized q = run(c);
  const fm::Format& f = c.scheme.element;
  emu::BlockCounters want;
  want.elements = c.x.size();
  want.blocks = q.scales.size();
  want.scales_clamped = q.counters.scales_clamped;  // held by the unit tests against each source
  for (std::size_t i = 0; i < c.x.size(); ++i) {
    const float x = c.x[i];
    if (!std::isfinite(x)) {
      want.nonfinite_in += 1;
      continue;
    }
    want.saturated += std::fabs(static_cast<double>(x)) > f.max_finite() * divisor_of(c, q, i);
    want.underflow_to_zero += x != 0 && fm::is_zero(f, q.codes[i]);
    want.subnormal += fm::is_subnormal(f, q.codes[i]);
    // code * X in double is exact (a code has at most 4 significant bits, X at most 24).
    want.inexact += fm::to_double(f, q.codes[i]) * divisor_of(c, q, i) != static_cast<double>(x);
  }
  PROP_ASSERT(q.counters == want, c.scheme.name, ": saturated ", q.counters.saturated, " want ", want.saturated,
              ", underflow_to_zero ", q.counters.underflow_to_zero, " want ", want.underflow_to_zero, ", subnormal ",
              q.counters.subnormal, " want ", want.subnormal, ", nonfinite_in ", q.counters.nonfinite_in, " want ",
              want.nonfinite_in, ", blocks ", q.counters.blocks, " want ", want.blocks, ", inexact ", q.counters.inexact,
              " want ", want.inexact);
  RC_CLASSIFY(q.counters.saturated > 0, "some saturated");
  RC_CLASSIFY(q.counters.underflow_to_zero > 0, "some underflow");
  checks.count();
}

// --- 3. stochastic rounding is unbiased ------------------------------------------------------------

// A tensor whose every block holds its amax A at its first element and copies of +-v elsewhere,
// v placed at a chosen fraction of the gap between two element values (given the scale X that A
// gives): each copy is an independent draw (its own row-major index), rounding up with
// probability p = floor(f 2^32) / 2^32 for the exact fraction f of the float v.
struct UnbiasedSetup {
  BlockScheme scheme;
  std::vector<float> x;
  std::size_t block = 0;  // elements per block along the row (the whole row for fp8-tensor)
};

// Hoeffding: for K ~ Binomial(n, p), P(|K/n - p| >= t) <= 2 exp(-2 n t^2); t below makes that
// alpha = 1e-6 per case (at most 1e-4 over a run of 100 cases for seeds chosen at random; under
// ctest the seed is fixed, so it passes or fails once and for all). With n >= 3840, t <= 0.044;
// the fractions are kept in [1/8, 7/8], so a rounding that always went one way (n ups or 0)
// would miss p by at least 1/8 and be rejected, which the property checks on RNE each time.
double hoeffding_tolerance(std::size_t n) { return std::sqrt(std::log(2 / 1e-6) / (2.0 * static_cast<double>(n))); }

// The non-negative finite values of f, ascending, with their codes.
std::vector<std::pair<double, std::uint32_t>> positive_values(const fm::Format& f) {
  std::vector<std::pair<double, std::uint32_t>> v;
  for (std::uint32_t b = 0; b < (1u << (f.width() - 1)); ++b)
    if (!fm::is_nan(f, b) && !fm::is_infinity(f, b)) v.emplace_back(fm::to_double(f, b), b);
  return v;
}

// floor(f 2^32) for the fraction f = num / den of exact long doubles: the quotient's floor,
// corrected by exact products (F den has at most 33 + 28 significant bits: exact in long double).
std::uint64_t fraction_units(long double num, long double den) {
  const long double scaled = std::ldexp(num, 32);
  long double f = std::floor(scaled / den);
  while (f * den > scaled) f -= 1;
  while ((f + 1) * den <= scaled) f += 1;
  return static_cast<std::uint64_t>(f);
}

// How many of the +-v elements rounded up to hi; every one must be lo or hi.
std::size_t count_ups(const BlockQuantized& q, std::size_t block, std::uint32_t lo, std::uint32_t hi,
                      std::uint32_t sign_mask) {
  std::size_t ups = 0;
  for (std::size_t i = 0; i < q.codes.size(); ++i) {
    if (i % block == 0) continue;
    const std::uint32_t magnitude = q.codes[i] & ~sign_mask;
    PROP_ASSERT(magnitude == lo || magnitude == hi, "element ", i, " code ", +q.codes[i], " is neither ", lo, " nor ", hi);
    ups += magnitude == hi;
  }
  return ups;
}

RC_GTEST_PROP(BlockQuantizeProperties, StochasticRoundingIsUnbiased, ()) {
  auto& checks = expect_checks(100 * 2);
  const BlockScheme scheme = *scheme_gen();
  const fm::Format& f = scheme.element;
  const std::size_t block = scheme.block_cols == 0 ? 4096 : scheme.block_cols;
  const std::size_t n = std::max<std::size_t>(4096, block) / block * block;
  const float amax = static_cast<float>(std::ldexp(1.0 + *gen::uniform(0, 1023) / 1024.0, *gen::uniform(-60, 60)));
  std::vector<float> x(n, 0.0f);
  for (std::size_t i = 0; i < n; i += block) x[i] = amax;
  emu::BlockQuantizeOptions options;
  options.scale_rule = *rc::gen::elementOf(std::vector<ScaleRule>{ScaleRule::floor, ScaleRule::ceil, ScaleRule::even, ScaleRule::rceil});
  const std::vector<std::size_t> shape{1, n};
  // The scale every block gets from its amax A (blocks and tiles lie along the one row).
  const BlockQuantized probe = emu::block_quantize(x, shape, -1, scheme, options);
  const double X = static_cast<double>(probe.scales[0]) * probe.tensor_scale.value_or(1.0f);
  // Neighbours lo < hi with hi X <= A, so that A stays every block's amax.
  const auto values = positive_values(f);
  std::size_t top = 0;
  while (top + 1 < values.size() && values[top + 1].first * X <= amax) ++top;
  RC_PRE(top >= 1);
  const std::size_t j = *gen::uniform<std::size_t>(0, top - 1);
  const auto [lo, lo_code] = values[j];
  const auto [hi, hi_code] = values[j + 1];
  const double target = (lo + (hi - lo) * *gen::uniform(8, 56) / 64.0) * X;
  const float v = static_cast<float>(target);
  RC_PRE(v > lo * X && v < hi * X);
  const std::uint64_t units = fraction_units(static_cast<long double>(v) - static_cast<long double>(lo * X),
                                             static_cast<long double>((hi - lo) * X));
  const double p = std::ldexp(static_cast<double>(units), -32);
  PROP_ASSERT(p > 0.1 && p < 0.9, "fraction ", p, " far from the target ", Exact{target}, " for v ", Exact{v});
  for (std::size_t i = 0; i < n; ++i)
    if (i % block != 0) x[i] = (i % 2) ? -v : v;

  const std::size_t draws = n - n / block;
  const double t = hoeffding_tolerance(draws);
  options.rounding = fm::Rounding::stochastic;
  options.seed = *gen::uniform<std::uint64_t>(0, 0xffffffffffffull);
  const double share = static_cast<double>(count_ups(emu::block_quantize(x, shape, -1, scheme, options), block, lo_code,
                                                     hi_code, f.sign_mask())) / static_cast<double>(draws);
  PROP_ASSERT(std::fabs(share - p) <= t, scheme.name, " v ", Exact{v}, " X ", Exact{X}, ": rounded up ", share,
              " of ", draws, " times, p = ", p, ", tolerance ", t);
  checks.count();
  // The same check rejects a rounding that always goes one way (RNE here).
  options.rounding = fm::Rounding::nearest_even;
  const double rne_share = static_cast<double>(count_ups(emu::block_quantize(x, shape, -1, scheme, options), block,
                                                         lo_code, hi_code, f.sign_mask())) / static_cast<double>(draws);
  PROP_ASSERT(std::fabs(rne_share - p) > t, scheme.name, ": the test would not reject RNE (share ", rne_share, ")");
  checks.count();
}

// --- 4. stochastic rounding replays from its seed --------------------------------------------

// Element i draws formats::stochastic_draw(seed, stream, i) with i its row-major index: the same
// seed gives the same bits, the same tensor viewed as one long row (same blocks) too, and
// another stream other bits. The tensor stays within 3 binades of its amax (and above
// fp8-tile1x128's amax floor of 1e-4, below which its elements would underflow), so nearly every
// element is a coin toss with both outcomes likely: with at least 256 of them, agreement on all
// by chance has probability far below 1e-30 (about (2/3)^256 for uniform fractions).
RC_GTEST_PROP(BlockQuantizeProperties, StochasticReplaysFromSeed, ()) {
  auto& checks = expect_checks(100 * 3);
  BlockScheme scheme = *scheme_gen();
  scheme.block_rows = std::min<std::size_t>(scheme.block_rows, 1);  // runs (or the whole tensor) only
  const std::size_t block = scheme.block_cols == 0 ? 64 : scheme.block_cols;
  const std::size_t rows = *gen::uniform<std::size_t>(1, 4);
  const std::size_t cols = block * std::max<std::size_t>(1, 512 / block / rows + *gen::uniform<std::size_t>(0, 2));
  const int top = *gen::uniform(-10, 60);
  std::vector<float> x(rows * cols);
  for (float& v : x)
    v = static_cast<float>(
        std::ldexp(1.0 + std::ldexp(static_cast<double>(*gen::uniform<std::uint32_t>(1, (1u << 23) - 1)), -23),
                   top - *gen::uniform(0, 2)) *
        (*gen::coin() ? -1 : 1));
  emu::BlockQuantizeOptions o;
  o.rounding = fm::Rounding::stochastic;
  o.seed = *gen::uniform<std::uint64_t>(0, 0xffffffffffffull);
  o.stream = *gen::uniform<std::uint64_t>(0, 1000);
  const std::vector<std::size_t> matrix{rows, cols}, row{rows * cols};
  const BlockQuantized a = emu::block_quantize(x, matrix, -1, scheme, o);
  const BlockQuantized b = emu::block_quantize(x, matrix, -1, scheme, o);
  PROP_ASSERT(a.codes == b.codes && a.values == b.values && a.scales == b.scales && a.counters == b.counters,
              scheme.name, " seed ", o.seed, ": a second run differs");
  checks.count();
  if (scheme.block_rows == 1) {
    const BlockQuantized flat = emu::block_quantize(x, row, -1, scheme, o);
    PROP_ASSERT(flat.codes == a.codes, scheme.name, ": one long row draws other bits than ", rows, " x ", cols);
  }
  checks.count();
  emu::BlockQuantizeOptions other = o;
  other.stream = o.stream + 1;
  PROP_ASSERT(emu::block_quantize(x, matrix, -1, scheme, other).codes != a.codes, scheme.name, " streams ", o.stream,
              " and ", other.stream, " agree on all ", x.size(), " elements");
  checks.count();
}

}  // namespace
