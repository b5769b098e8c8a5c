// The gate in rounds (metrics/sequential_design.h) in the calibration report
// (gate_calibration.cpp): for each spread of the per-seed difference and each
// spending function, simulated paired ensembles run through the design's
// looks, the gate's own code (metrics::run_sequential on
// metrics::paired_tost), under two truths:
//  - the difference on the margin (either sign, alternating): how often the
//    design passes it over all its looks, the false-pass rate it promises to
//    hold at most alpha;
//  - no difference: how often it passes (the power), how often it fails, how
//    many seeds it takes on average (the look it stopped at), and where.
// Against it, the fixed-count TOST at the same alpha: the smallest number of
// seeds whose power at no difference reaches the design's (simulated the
// same way; its own streams), i.e. the seeds a fixed plan must run every time
// for the same chance of passing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mpverify::experiments {

struct SequentialCalibration {
  std::vector<std::size_t> looks;  // runs per side at each look
  std::vector<double> spreads;     // standard deviations of the per-seed difference, points
  double margin = 1, alpha = 0.05;
  std::size_t trials = 20000;
  std::uint64_t seed = 1;
};

// The report's section (Markdown, from its "##" heading); progress on standard error when `progress`.
std::string sequential_section(const SequentialCalibration& calibration, bool progress);

}  // namespace mpverify::experiments
