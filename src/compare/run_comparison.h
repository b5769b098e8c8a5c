// Step-by-step comparison of two training runs (`mpverify
// compare-runs A B`), e.g. an fp32 reference run and an o2 emulated run of
// the same model, seed and data: how far B's loss is from A's at every step,
// how their loss scales, skipped steps, underflow and lost-update rates
// differ, and per recorded tensor how much each run lost to underflow,
// overflowed, how much headroom it kept, and how far its norm moved.
//
// The input is what a run directory holds, already parsed (the CLI reads the
// files; tests build the records by hand):
//  - steps.jsonl: one object per step with "step" (integer >= 0), the loss
//    ("loss"; a GAN's "loss_d"/"loss_g"), "scale", "skipped" (bool),
//    "underflow_rate", "lost_update_rate". A number may be null, which is how
//    the run log writes a non-finite value; the strings "nan", "inf", "-inf"
//    are read as those values. The two rates may be absent: a step the
//    Monitor (mpverify.torch) did not record (every > 1) or skipped has
//    none, and reads as a step without them. Other keys are ignored.
//  - tensors.jsonl (optional): one object per stored tensor per recorded
//    step with "step", "layer", "tensor", "pass", "underflow_to_zero_rate",
//    "overflow_rate", "headroom_log2" (null: +inf, nothing can overflow),
//    "norm" (null: non-finite), and "role" (carried to the output).
//  - summary.json (optional): its "config" object.
// Steps are aligned by their "step" value, not by line. A tensor is the
// triple (layer, tensor, pass), compared over the steps both runs recorded it.
//
// Definitions (the output's field names):
//  - loss_difference = loss B - loss A; relative_difference = that / |loss A|
//    (0 when both are 0, absent when only A's is 0). Both are absent when
//    either loss is non-finite; such steps are counted per run.
//  - mean_abs_loss_difference_tail: the mean |loss difference| over the last
//    ceil(10%) of the common steps (at least one), over those of them whose
//    difference exists.
//  - A step exceeds the loss tolerance when |loss difference| > tolerance, or
//    when exactly one of the two losses is non-finite (one run diverged at a
//    step the other did not); two non-finite losses do not exceed it.
//  - skipped_steps counts every step of a run's log, common or not.
//  - config differences: the keys of summary.config (nested objects
//    flattened to "a.b") whose values differ or that only one run has.
//
// Malformed records throw std::invalid_argument naming the file as
// "<run name>/steps.jsonl" and the line (the record's index + 1: the run log
// writes no blank lines, the only thing that would shift it), the key and
// what was expected; two runs with no step in common also throw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace mpverify::compare {

// One run directory's records, parsed.
struct RunRecords {
  std::string name;  // how messages name the run (its directory)
  std::vector<nlohmann::json> steps;
  std::optional<std::vector<nlohmann::json>> tensors;  // nullopt: no tensors.jsonl
  std::optional<nlohmann::json> summary;               // nullopt: no summary.json
};

struct RunComparisonOptions {
  // The steps' key holding the loss compared; "" picks "loss" when the first
  // step of both runs has it, else "loss_g" (a GAN's generator loss).
  std::string loss_key;
  std::optional<double> loss_tolerance;  // finite and >= 0
};

// std::nullopt stands for a non-finite value (null in the logs).
struct StepComparison {
  std::int64_t step = 0;
  std::optional<double> loss_a, loss_b;
  std::optional<double> loss_difference;      // b - a
  std::optional<double> relative_difference;  // (b - a) / |a|
  std::optional<double> scale_a, scale_b;
  bool skipped_a = false, skipped_b = false;
  std::optional<double> underflow_rate_a, underflow_rate_b;
  std::optional<double> lost_update_rate_a, lost_update_rate_b;
  bool exceeds_tolerance = false;  // false when no tolerance was given
};

struct TensorComparison {
  std::string layer, tensor, pass;
  std::string role_a, role_b;    // as recorded (normally equal)
  std::size_t common_steps = 0;  // steps at which both runs recorded it
  std::int64_t last_common_step = 0;
  // Over the common steps. A non-finite rate or headroom (null in the log) is
  // left out of the mean/max/min; nullopt when none was finite. A min headroom
  // of nullopt also stands for +inf (the tensor was all zeros every time).
  std::optional<double> mean_underflow_to_zero_rate_a, mean_underflow_to_zero_rate_b;
  std::optional<double> max_overflow_rate_a, max_overflow_rate_b;
  std::optional<double> min_headroom_log2_a, min_headroom_log2_b;
  // At the last common step; the ratio is nullopt when either norm is
  // non-finite or norm A is 0.
  std::optional<double> norm_a, norm_b, norm_ratio;  // norm_ratio = norm B / norm A
};

struct ConfigDifference {
  std::string key;      // dotted path into summary.config
  nlohmann::json a, b;  // the values; null where the run has no such key
};

struct RunComparisonSummary {
  std::string loss_key;
  std::size_t steps_a = 0, steps_b = 0;  // records in each steps.jsonl
  std::size_t common_steps = 0, steps_only_in_a = 0, steps_only_in_b = 0;
  std::optional<std::int64_t> first_step_only_in_a, first_step_only_in_b;
  std::size_t nonfinite_loss_steps_a = 0, nonfinite_loss_steps_b = 0;  // among the common steps
  std::size_t steps_with_loss_difference = 0;                          // common steps where both losses are finite
  std::optional<double> max_abs_loss_difference;
  std::optional<std::int64_t> max_abs_loss_difference_step;
  std::size_t tail_steps = 0;  // the last ceil(10%) of the common steps
  std::optional<std::int64_t> tail_first_step;
  std::optional<double> mean_abs_loss_difference_tail;
  std::size_t skipped_steps_a = 0, skipped_steps_b = 0;
  std::optional<double> loss_tolerance;
  std::size_t steps_exceeding_tolerance = 0;
  std::optional<std::int64_t> first_step_exceeding_tolerance;
  // Tensors (layer, tensor, pass) of one run's tensors.jsonl that the other
  // run did not record at any same step (0 unless both runs have the file).
  std::size_t tensors_only_in_a = 0, tensors_only_in_b = 0;
  bool tolerance_exceeded() const { return first_step_exceeding_tolerance.has_value(); }
};

struct RunComparison {
  std::string name_a, name_b;
  std::vector<StepComparison> steps;  // the common steps, in increasing step order
  bool tensors_present_a = false, tensors_present_b = false;
  std::vector<TensorComparison> tensors;  // sorted by (layer, tensor, pass); empty unless both present
  bool summary_present_a = false, summary_present_b = false;
  std::vector<ConfigDifference> config_differences;  // empty unless both present
  RunComparisonSummary summary;
};

RunComparison compare_runs(const RunRecords& a, const RunRecords& b, const RunComparisonOptions& options = {});

// The whole comparison as one JSON document: {"run_a", "run_b", "files",
// "summary", "config_differences", "tensors", "steps"}, the field names of the
// structs above. Absent values (nullopt) are null; "files" says which of
// tensors.jsonl and summary.json each run has, and "tensors" /
// "config_differences" are null unless both runs have the file.
nlohmann::ordered_json run_comparison_json(const RunComparison& comparison);

}  // namespace mpverify::compare
