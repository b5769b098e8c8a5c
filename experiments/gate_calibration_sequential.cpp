#include "gate_calibration_sequential.h"

#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>

#include "metrics/equivalence.h"
#include "metrics/sequential_design.h"
#include "normal_draws.h"

namespace mpverify::experiments {

namespace {

using metrics::Spending;
using metrics::Verdict;

// The streams of this section's draws, apart from the other sections' (0.., 1000000 + n).
constexpr std::uint64_t kDesignStreams = 2000000, kFixedStreams = 3000000;
constexpr std::size_t kLargestFixedPlan = 200;

struct DesignRow {
  double sigma = 0;
  Spending spending = Spending::obrien_fleming;
  std::size_t passed_at_margin = 0, passed_at_zero = 0, failed_at_zero = 0, seeds_at_zero = 0;
  std::vector<std::size_t> stopped_at;  // at zero: trials decided at each look
  std::size_t fixed_seeds = 0;          // 0: no fixed plan up to kLargestFixedPlan reaches the power
  double fixed_power = 0;
};

// Paired differences: baseline 0, candidate truth + sigma z, for n_max seeds; the design on them.
metrics::SequentialOutcome one_trial(const metrics::SequentialDesign& design, const SequentialCalibration& c,
                                     double sigma, double truth, Normal& normal) {
  const std::size_t n_max = design.looks.back();
  std::vector<double> b(n_max, 0.0), d(n_max);
  for (double& x : d) x = truth + sigma * normal.next();
  return metrics::run_sequential(design, c.alpha, n_max, [&](std::size_t n, double level) {
    return metrics::paired_tost({b.data(), n}, {d.data(), n}, metrics::EquivalenceOptions{c.margin, level, false});
  });
}

DesignRow simulate_design(const SequentialCalibration& c, double sigma, Spending spending, std::uint64_t stream) {
  const metrics::SequentialDesign design{c.looks, spending};
  DesignRow row{sigma, spending, 0, 0, 0, 0, std::vector<std::size_t>(c.looks.size(), 0), 0, 0};
  Normal normal(c.seed, stream);
  for (std::size_t t = 0; t < c.trials; ++t) {
    const double edge = t % 2 ? c.margin : -c.margin;
    row.passed_at_margin += one_trial(design, c, sigma, edge, normal).verdict == Verdict::equivalent;
    const metrics::SequentialOutcome o = one_trial(design, c, sigma, 0, normal);
    row.passed_at_zero += o.verdict == Verdict::equivalent;
    row.failed_at_zero += o.verdict == Verdict::not_equivalent;
    row.seeds_at_zero += o.looks.back().n;
    ++row.stopped_at[*o.decided_at];
  }
  return row;
}

// The fixed-count TOST's power at no difference with n seeds (paired, level alpha).
double fixed_power(const SequentialCalibration& c, double sigma, std::size_t n) {
  Normal normal(c.seed, kFixedStreams + 1000 * static_cast<std::uint64_t>(sigma * 1000) + n);
  std::vector<double> b(n, 0.0), d(n);
  std::size_t passed = 0;
  const metrics::EquivalenceOptions options{c.margin, c.alpha, false};
  for (std::size_t t = 0; t < c.trials; ++t) {
    for (double& x : d) x = sigma * normal.next();
    passed += metrics::paired_tost(b, d, options).verdict == Verdict::equivalent;
  }
  return static_cast<double>(passed) / static_cast<double>(c.trials);
}

// The smallest fixed plan with at least `power`: searched upward, each count simulated once per spread.
void match_fixed_plan(const SequentialCalibration& c, DesignRow& row, std::map<std::size_t, double>& powers) {
  const double target = static_cast<double>(row.passed_at_zero) / static_cast<double>(c.trials);
  for (std::size_t n = 2; n <= kLargestFixedPlan; ++n) {
    if (!powers.count(n)) powers[n] = fixed_power(c, row.sigma, n);
    if (powers[n] >= target) {
      row.fixed_seeds = n;
      row.fixed_power = powers[n];
      return;
    }
  }
}

std::string percent(std::size_t k, std::size_t trials) {
  char t[32];
  std::snprintf(t, sizeof t, "%.2f%%", 100.0 * static_cast<double>(k) / static_cast<double>(trials));
  return t;
}

std::string fixed_text(double v, const char* format) {
  char t[32];
  std::snprintf(t, sizeof t, format, v);
  return t;
}

std::string row_text(const SequentialCalibration& c, const DesignRow& r) {
  const double expected = static_cast<double>(r.seeds_at_zero) / static_cast<double>(c.trials);
  std::string stops;
  for (std::size_t k = 0; k < r.stopped_at.size(); ++k) {
    if (k) stops += " / ";
    stops += percent(r.stopped_at[k], c.trials);
  }
  std::ostringstream t;
  t << "| " << fixed_text(r.sigma, "%g") << " | " << (r.spending == Spending::pocock ? "Pocock" : "O'Brien-Fleming")
    << " | **" << percent(r.passed_at_margin, c.trials) << "** | " << percent(r.passed_at_zero, c.trials) << " | "
    << percent(r.failed_at_zero, c.trials) << " | " << fixed_text(expected, "%.2f") << " | " << stops << " | ";
  if (r.fixed_seeds)
    t << r.fixed_seeds << " (" << fixed_text(100 * r.fixed_power, "%.2f") << "%) | "
      << fixed_text(expected / static_cast<double>(r.fixed_seeds), "%.2f") << " |\n";
  else
    t << "none up to " << kLargestFixedPlan << " | - |\n";
  return t.str();
}

std::string section_head(const SequentialCalibration& c) {
  const metrics::SequentialDesign obf{c.looks, Spending::obrien_fleming};
  std::ostringstream md;
  md << "## In rounds: the sequential gate against a fixed number of seeds\n\n"
     << "`mpverify gate --sequential`: " << metrics::design_text(obf) << " or Pocock-type, alpha "
     << fixed_text(c.alpha, "%g") << ", margin " << fixed_text(c.margin, "%g") << " points "
     << "(metrics/sequential_design.h). Paired per-seed differences drawn normal with standard deviation σ; "
     << c.trials << " trials per row and truth, seed " << c.seed << "; the decision measured is the gate's own "
     << "(`metrics::run_sequential` on `metrics::paired_tost`).\n\n"
     << "- **passed at the margin**: the true difference is ±margin (alternating); the design's promise is at most "
        "alpha over all its looks together.\n"
     << "- **at 0**: no true difference; **expected seeds** is the mean number of seeds per side the design ran "
        "before it decided, and the looks column where it decided.\n"
     << "- **fixed TOST, same power**: the smallest fixed number of seeds whose TOST at alpha "
     << fixed_text(c.alpha, "%g") << " passes at 0 at least as often as the design (its simulated power in "
        "brackets); **ratio** is expected seeds / that number (below 1: the rounds save seeds).\n\n";
  std::string looks;
  for (std::size_t n : c.looks) {
    if (!looks.empty()) looks += '/';
    looks += std::to_string(n);
  }
  md << "| σ (points) | spending | **passed at the margin** | passed at 0 (power) | not equivalent at 0 | expected "
        "seeds at 0 | decided at looks " << looks << " (at 0) | fixed TOST, same power: seeds | ratio |\n"
     << "|---|---|---|---|---|---|---|---|---|\n";
  return md.str();
}

}  // namespace

std::string sequential_section(const SequentialCalibration& c, bool progress) {
  std::string md = section_head(c);
  std::uint64_t stream = kDesignStreams;
  for (double sigma : c.spreads) {
    std::map<std::size_t, double> powers;  // the fixed plans' power at this spread, by seeds
    for (Spending spending : {Spending::obrien_fleming, Spending::pocock}) {
      if (progress) std::cerr << "\rsequential σ " << sigma << " " << metrics::to_string(spending) << "     " << std::flush;
      DesignRow row = simulate_design(c, sigma, spending, stream++);
      match_fixed_plan(c, row, powers);
      md += row_text(c, row);
    }
  }
  if (progress) std::cerr << "\r                                        \r";
  return md + "\n";
}

}  // namespace mpverify::experiments
