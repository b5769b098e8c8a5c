// The parity gate in rounds (`mpverify gate --sequential 4,8,12,16`): a
// group-sequential design on the two one-sided tests of the TOST
// (equivalence.h). Runs are taken in seed order; at each planned look, after
// n_1 < n_2 < ... < n_K runs per side (pairs when paired), the gate either
// decides or names the next look, and the chance of calling a pair whose true
// difference lies on (or beyond) the margin equivalent stays at most alpha
// over all the looks together.
//
// Spending (Lan & DeMets 1983, "Discrete sequential boundaries for clinical
// trials", Biometrika 70:659-663): alpha(t) is the part of alpha the looks up
// to information fraction t = n_k / n_K may spend, alpha(0) = 0, alpha(1) =
// alpha. Two families:
//  - O'Brien-Fleming type: alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)):
//    almost nothing early, most of alpha at the last look (the default: a
//    small first look cannot waste the test's power);
//  - Pocock type: alpha(t) = alpha ln(1 + (e - 1) t): spent about evenly, so
//    early looks stop more often and the last look is stricter.
//
// Each look runs both one-sided tests at the increment a_k = alpha(t_k) -
// alpha(t_{k-1}), i.e. the ordinary TOST at level a_k (interval level
// 1 - 2 a_k). Why increments and not the exact group-sequential boundaries
// (Armitage, McPherson & Rowe's recursion): the union bound holds exactly
// for Student-t statistics at any degrees of freedom and whatever the
// correlation between looks. At a true difference d >= margin,
//   P(some look passes) <= sum_k P(look k's upper test rejects) <= sum_k a_k
//                        = alpha(1) = alpha
// (likewise at d <= -margin). The exact boundaries hold for a normal
// statistic of known variance only; with the 3 degrees of freedom of a first
// look at 4 seeds that is not what the gate computes. The price is some
// conservatism (the simulated rate in reports/gate-calibration.md).
//
// Decisions at look k (runs 1..n_k per side):
//  - equivalent:     the level-a_k interval lies inside (-margin, margin);
//  - not equivalent: it lies entirely outside [-margin, margin] (a one-sided
//    level-a_k test, so an equivalent pair is failed this way with probability
//    at most alpha over all looks), or, at the last look, equivalence was not
//    shown: the design ends there and a gate that never passes fails;
//  - else the next look: n_{k+1} runs per side.
// Replaying the looks from the runs present is stateless: a CI job calls the
// gate again with more runs and gets the decision the design reached first,
// so the error rate above holds however often it is called. Runs beyond the
// last look reached wait for the next look.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "metrics/equivalence.h"

namespace mpverify::metrics {

enum class Spending { obrien_fleming, pocock };

const char* to_string(Spending spending);  // "obrien-fleming", "pocock"
// "obrien-fleming" (or "obf"), "pocock"; nullopt otherwise.
std::optional<Spending> parse_spending(const std::string& name);

struct SequentialDesign {
  std::vector<std::size_t> looks;  // runs per side at each look, increasing, the first >= 2
  Spending spending = Spending::obrien_fleming;
};

// "4,8,12,16" (or "4 8 12 16") into looks; std::invalid_argument naming what
// is wrong (not a count, < 2, not increasing, more than 20 looks).
std::vector<std::size_t> parse_looks(const std::string& text);
// Throws std::invalid_argument for looks parse_looks would refuse.
void check_design(const SequentialDesign& design);

// alpha(t) for t in [0, 1]: the cumulative alpha the looks up to t spend.
double spent_alpha(Spending spending, double alpha, double t);
// Each look's level a_k = alpha(n_k/n_K) - alpha(n_{k-1}/n_K); they sum to alpha.
std::vector<double> look_levels(const SequentialDesign& design, double alpha);

// One look's test: the equivalence test on runs 1..n per side at level `level`.
struct LookResult {
  std::size_t n = 0;
  double level = 0;
  EquivalenceResult test;
};

struct SequentialOutcome {
  Verdict verdict = Verdict::inconclusive;  // inconclusive: the next look is not reached yet
  std::vector<LookResult> looks;            // the looks reached, up to the deciding one
  std::optional<std::size_t> decided_at;    // index of the deciding look
  bool undecided_at_last = false;           // not equivalent because the last look did not pass
  std::optional<std::size_t> next_look;     // inconclusive: runs per side the next look needs
};

// The design on `available` runs per side: test(n, level) runs the
// equivalence test on the first n runs of each side at that level.
SequentialOutcome run_sequential(const SequentialDesign& design, double alpha, std::size_t available,
                                 const std::function<EquivalenceResult(std::size_t n, double level)>& test);

// "looks at 4, 8, 12, 16 runs per side, O'Brien-Fleming-type spending".
std::string design_text(const SequentialDesign& design);

}  // namespace mpverify::metrics
