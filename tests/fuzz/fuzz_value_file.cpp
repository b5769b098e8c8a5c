// The gate's value files (metrics::read_value_file: CSV or JSON, one value per run, curve files with a
// step column), then the gate's decisions on them: the equivalence test on values, and the curve gates.
// Input cut at NUL bytes: the baseline's file, the candidate's; the last byte picks .csv or .json for
// each and the options.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "metrics/curve_gate.h"
#include "metrics/ensemble.h"
#include "metrics/parity_gate.h"
#include "metrics/value_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  const auto parts = fuzz::parts_of(fuzz::text_of(data, size));
  const std::uint8_t choice = size ? data[size - 1] : 0;
  const auto& dir = fuzz::scratch().fresh();
  const auto baseline_file = dir / (choice & 1 ? "baseline.json" : "baseline.csv");
  const auto candidate_file = dir / (choice & 2 ? "candidate.json" : "candidate.csv");
  fuzz::write_file(baseline_file, parts[0]);
  fuzz::write_file(candidate_file, parts.size() > 1 ? parts[1] : parts[0]);
  metrics::ValueFile baseline, candidate;
  try {
    baseline = metrics::read_value_file(baseline_file);
    candidate = metrics::read_value_file(candidate_file);
  } catch (const metrics::InputError&) {
    return 0;
  }
  metrics::GateOptions options;
  options.metric = metrics::GateMetric::custom;
  options.metric_name = "value";
  options.margin = 0.5 + (choice >> 4);
  options.accept_single_run = choice & 4;
  options.direction = choice & 8 ? metrics::Direction::higher_is_better : metrics::Direction::lower_is_better;
  try {
    (void)metrics::gate_verdict_line(metrics::evaluate_gate(baseline, candidate, options));
  } catch (const metrics::InputError&) {
  }
  try {
    const auto [b, c] = metrics::read_curves(baseline, candidate);
    metrics::CurveGateOptions curve;
    curve.rtol = 0.01;
    curve.target = 0.5;
    curve.direction = options.direction;
    (void)metrics::golden_values_gate(b, c, options, curve);
    (void)metrics::mlperf_gate(b, c, options, curve);
  } catch (const metrics::InputError&) {
  }
  return 0;
}
