// The parity gate's decision in rounds (parity_gate.h, GateOptions::sequential;
// the design and its error rate: sequential_design.h). parity_gate.cpp reads
// the runs' values; this file orders them by seed and replays the planned
// looks on them.
#pragma once

#include <vector>

#include "metrics/parity_gate.h"

namespace mpverify::metrics {

// Sorts a side's outcomes by seed; InputError naming the first run without one
// (the looks take runs in seed order, so every run needs its seed).
void order_by_seed(std::vector<RunOutcome>& outcomes, const char* side);

// g.sequential with the design and its levels, no look yet (a diverged run decides before any look).
void start_rounds(GateResult& g, const GateOptions& options);

// The looks on the sides' values (ordered by seed, none diverged): g.test (the
// last look's), verdict, reason, notes, paired_seeds and g.sequential. Paired
// when the first min(n_b, n_c) seeds agree on both sides (Pairing::automatic),
// else Welch; InputError when Pairing::paired cannot be met or
// accept_single_run is set.
void decide_in_rounds(GateResult& g, const std::vector<RunOutcome>& baseline, const std::vector<RunOutcome>& candidate,
                      const GateOptions& options, double resolution);

// The sequential part of the verdict line: the look, its level, the design, and what comes next.
std::string rounds_text(const GateResult& g);

}  // namespace mpverify::metrics
