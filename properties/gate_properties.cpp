// Properties of the parity gate's equivalence tests (metrics/equivalence.h)
// on random ensembles: values on a grid of 1/16 around accuracy-like levels
// (50..99 points), 2..12 runs per side, random margins and alphas.
//  - Swapping baseline and candidate mirrors the interval exactly and keeps
//    the verdict (Welch and paired).
//  - Adding the same constant to both sides moves nothing but rounding.
//  - The verdict "equivalent" is exactly "both one-sided p-values < alpha".
//  - A wider margin never turns "equivalent" into anything else; a narrower
//    one never turns "not equivalent" into anything else.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "check_count.h"
#include "generators.h"
#include "metrics/equivalence.h"

namespace {

using mpverify::metrics::EquivalenceOptions;
using mpverify::metrics::EquivalenceResult;
using mpverify::metrics::Verdict;
using mpverify::properties::expect_checks;
namespace gen = mpverify::properties::gen;

struct Sample {
  std::vector<double> baseline, candidate;
  double margin = 1, alpha = 0.05;
  bool paired = false;
};

// Sides sharing a level with a small offset and a spread of up to 2 points,
// so that all three verdicts occur. Values are multiples of 1/16.
rc::Gen<Sample> sample() {
  return rc::gen::exec([] {
    Sample s;
    s.paired = *gen::coin();
    const int nb = *gen::uniform(2, 12), nc = s.paired ? nb : *gen::uniform(2, 12);
    const int level = *gen::uniform(50, 99), offset = *gen::uniform(-48, 48), spread = *gen::uniform(0, 32);
    for (int i = 0; i < nb; ++i) s.baseline.push_back(level + *gen::uniform(-spread, spread) / 16.0);
    for (int i = 0; i < nc; ++i) s.candidate.push_back(level + (offset + *gen::uniform(-spread, spread)) / 16.0);
    s.margin = *rc::gen::elementOf(std::vector<double>{0.25, 0.5, 1.0, 1.5, 2.0, 4.0});
    s.alpha = *rc::gen::elementOf(std::vector<double>{0.01, 0.025, 0.05, 0.1, 0.2});
    return s;
  });
}

EquivalenceResult run(const Sample& s, const std::vector<double>& b, const std::vector<double>& c, double margin) {
  const EquivalenceOptions o(margin, s.alpha);
  return s.paired ? mpverify::metrics::paired_tost(b, c, o) : mpverify::metrics::welch_tost(b, c, o);
}

// Exact: the difference is negated exactly, se and df are built from the
// same terms by commutative operations, and RNE rounds x + y and -x - y to
// negatives of each other.
RC_GTEST_PROP(GateProperties, SwappingTheSidesMirrorsTheInterval, ()) {
  auto& checks = expect_checks(100);
  const Sample s = *sample();
  const EquivalenceResult r = run(s, s.baseline, s.candidate, s.margin);
  const EquivalenceResult w = run(s, s.candidate, s.baseline, s.margin);
  RC_ASSERT(w.difference == -r.difference);
  RC_ASSERT(w.lower == -r.upper);
  RC_ASSERT(w.upper == -r.lower);
  RC_ASSERT(w.verdict == r.verdict);
  RC_ASSERT(w.p_lower == r.p_upper);
  RC_ASSERT(w.p_upper == r.p_lower);
  checks.count();
}

// Values up to ~130 with at most 12 per side: each mean and variance carries a
// relative error of at most ~12 u (u = 2^-53), so the interval ends (|d| and
// q se below ~400 for the widest cases, q <= 31.8 at df 1 and alpha 0.01)
// move by well under 1e-9 when both sides shift; the verdict can only change
// when an end lies within that of a margin, which the property skips.
RC_GTEST_PROP(GateProperties, ShiftingBothSidesChangesNothing, ()) {
  auto& checks = expect_checks(90);
  const Sample s = *sample();
  const double shift = *gen::uniform(-40, 40);
  std::vector<double> b = s.baseline, c = s.candidate;
  for (double& x : b) x += shift;
  for (double& x : c) x += shift;
  const EquivalenceResult r = run(s, s.baseline, s.candidate, s.margin);
  const EquivalenceResult t = run(s, b, c, s.margin);
  constexpr double tolerance = 1e-9;
  RC_ASSERT(std::fabs(t.lower - r.lower) <= tolerance);
  RC_ASSERT(std::fabs(t.upper - r.upper) <= tolerance);
  const bool near_margin = std::fabs(std::fabs(r.lower) - s.margin) <= tolerance ||
                           std::fabs(std::fabs(r.upper) - s.margin) <= tolerance;
  if (!near_margin) {
    RC_ASSERT(t.verdict == r.verdict);
    checks.count();
  }
}

// The interval form and the p-value form of the TOST agree; cases within
// 1e-9 of alpha (where the two computations may round differently) are skipped.
RC_GTEST_PROP(GateProperties, EquivalentExactlyWhenBothOneSidedTestsReject, ()) {
  auto& checks = expect_checks(90);
  const Sample s = *sample();
  const EquivalenceResult r = run(s, s.baseline, s.candidate, s.margin);
  if (r.standard_error == 0) return;  // p-values 0/1 by construction
  if (std::fabs(r.p_lower - s.alpha) < 1e-9 || std::fabs(r.p_upper - s.alpha) < 1e-9) return;
  RC_ASSERT((r.verdict == Verdict::equivalent) == (r.p_lower < s.alpha && r.p_upper < s.alpha));
  checks.count();
}

RC_GTEST_PROP(GateProperties, VerdictIsMonotoneInTheMargin, ()) {
  auto& checks = expect_checks(100);
  const Sample s = *sample();
  const EquivalenceResult r = run(s, s.baseline, s.candidate, s.margin);
  const EquivalenceResult wider = run(s, s.baseline, s.candidate, 2 * s.margin);
  const EquivalenceResult narrower = run(s, s.baseline, s.candidate, s.margin / 2);
  if (r.verdict == Verdict::equivalent) RC_ASSERT(wider.verdict == Verdict::equivalent);
  if (r.verdict == Verdict::not_equivalent) RC_ASSERT(narrower.verdict == Verdict::not_equivalent);
  // The interval does not depend on the margin at all.
  RC_ASSERT(wider.lower == r.lower && narrower.upper == r.upper);
  checks.count();
}

}  // namespace
