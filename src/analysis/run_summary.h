// One run directory summarised (`mpverify summarize RUN`): what `train` or the
// Monitor (mpverify.torch) recorded, per layer and tensor kind, at the run's
// own loss scale and at what-if scales, with the run's lost updates and its
// first non-finite values. The input is the run's records, already parsed
// (the CLI reads the files; tests build the records by hand):
//  - steps.jsonl: "step", "scale", "skipped", "lost_update_rate",
//    "lost_update_rate_without_master" (absent on the Monitor's unrecorded
//    steps), "nonfinite" ({"layer", "tensor", "pass", "count"} or null);
//  - tensors.jsonl: per recorded step and tensor "step", "layer", "tensor",
//    "pass", "role", "format", "nonzero_finite", "underflow_to_zero_rate",
//    "subnormal_rate", "overflow_rate", "headroom_log2" (null: nothing can
//    overflow) and, from the Monitor, "scale" for weight gradients;
//  - histograms.jsonl (optional): per recorded step and tensor the exponent
//    histogram of the values as measured (record/histogram_json.h), which the
//    what-if scales need.
//
// Definitions (the output's names):
//  - a tensor kind is (layer, tensor, pass); its rates pool every recorded
//    step: underflow = sum_i rate_i n_i / sum_i n_i over the recorded steps
//    i, n_i = nonzero_finite (the rates' own denominator), and the same for
//    subnormal and overflow; min_headroom_log2 is the smallest headroom over
//    the steps (absent when none was finite); worst_step the step of the
//    largest underflow rate (the first such step; absent when none lost a value);
//  - loss-scaled kinds (role weight_grad or activation_grad) were measured at
//    the step's scale (the line's "scale", else steps.jsonl's); the others at
//    scale 1;
//  - what-if at scale S (a power of two): for a loss-scaled kind, each
//    recorded value v (measured at the step's scale s) becomes v S / s, a
//    shift of k = log2(S / s) binades. From the histogram's binades alone a
//    value's rounding is known except in one binade at each end, so the
//    counts are bounds [certain, possible]: with m the format's smallest
//    subnormal exponent, a value in binade k + e <= m - 2 becomes 0 under
//    round-to-nearest-even, one in binade m - 1 only if it is exactly 2^(m-1)
//    (the tie goes to the even 0); with M the largest finite exponent, one in
//    binade >= M + 1 overflows, one in binade M may (above the largest finite
//    value's rounding boundary). Values below or above the histogram's range
//    count as possible on the side they lie. A step whose scale s is not a
//    power of two, or a run without histograms, gives no what-if (say why);
//  - lost updates: the mean of steps.jsonl's lost_update_rate and
//    lost_update_rate_without_master over the steps that have them, and the
//    largest;
//  - first_nonfinite: the first (at most) `max_events` steps whose
//    "nonfinite" is not null, in step order.
// Malformed records throw std::invalid_argument naming "<run>/FILE line N",
// the key and what was expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emu/exponent_histogram.h"

namespace mpverify::analysis {

struct RunSummaryInput {
  std::string name;  // how messages name the run (its directory)
  std::vector<nlohmann::json> steps;
  std::vector<nlohmann::json> tensors;
  std::optional<std::vector<nlohmann::json>> histograms;  // nullopt: no histograms.jsonl
  std::optional<nlohmann::json> summary;                 // nullopt: no summary.json
};

struct RunSummaryOptions {
  std::vector<int> what_if_log2;  // what-if scales 2^k
  std::size_t max_events = 5;
};

// Counts at one what-if scale: [certain, possible] values of `of`.
struct WhatIfBounds {
  int scale_log2 = 0;
  std::uint64_t underflow_certain = 0, underflow_possible = 0;
  std::uint64_t overflow_certain = 0, overflow_possible = 0;
  std::uint64_t of = 0;  // non-zero finite values counted
};

// One recorded step of a kind: what the heat map draws.
struct StepCounts {
  std::int64_t step = 0;
  std::uint64_t nonzero = 0, underflow = 0;
};

struct TensorKindSummary {
  std::string layer, tensor, pass, role, format;
  bool loss_scaled = false;
  std::size_t recorded_steps = 0;
  std::uint64_t nonzero = 0;  // sum of nonzero_finite
  std::uint64_t underflow = 0, subnormal = 0, overflow = 0;  // counts (rate x nonzero_finite)
  std::optional<double> min_headroom_log2;
  std::optional<std::int64_t> worst_step;  // largest underflow rate
  std::vector<WhatIfBounds> what_if;       // one per options.what_if_log2 (empty: no histograms)
  std::vector<StepCounts> steps;           // every recorded step, in the order recorded
  // The kind's histograms summed over its recorded steps (each as measured, at its step's scale); absent
  // without histograms.jsonl.
  std::optional<emu::ExponentHistogram> histogram;
};

struct NonfiniteEvent {
  std::int64_t step = 0;
  std::string layer, tensor, pass;
  std::optional<std::uint64_t> count;
  // The Monitor's "after": a value given to `layer` (tensor "x") or a loss made non-finite outside the
  // modules was made after this module ran; "" where it ran before any module. Absent where not recorded.
  std::optional<std::string> after;
};

// "made after NAME" / "made before any module" for an event that has "after", else "".
std::string made_after_text(const NonfiniteEvent& e);

struct RunSummary {
  std::string name;
  std::size_t steps = 0, skipped_steps = 0, recorded_steps = 0;
  std::optional<double> first_scale, last_scale, min_scale, max_scale;
  std::optional<double> lost_update_rate_mean, lost_update_rate_max;
  std::optional<double> lost_update_rate_without_master_mean;
  std::vector<NonfiniteEvent> first_nonfinite;
  std::size_t nonfinite_steps = 0;
  std::vector<TensorKindSummary> kinds;  // in the order each kind first appears
  std::vector<int> what_if_log2;
  std::string what_if_note;  // why there is no what-if ("" when there is, or none was asked)
};

RunSummary summarize_run(const RunSummaryInput& input, const RunSummaryOptions& options = {});

// The summary as JSON (`summarize --json`): every field above, rates as fractions.
nlohmann::ordered_json run_summary_json(const RunSummary& summary);

}  // namespace mpverify::analysis
