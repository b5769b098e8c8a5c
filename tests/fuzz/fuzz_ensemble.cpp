// The parity gate's run and ensemble directories (metrics::read_ensemble: ensemble.json, each run's
// summary.json and steps.jsonl), then the gate's decisions on them (loss over the steps, accuracy, and the
// per-step curve gate).
// Input cut at NUL bytes: ensemble.json, seed-1/summary.json, seed-1/steps.jsonl, seed-2/summary.json,
// seed-2/steps.jsonl. An empty first part writes no ensemble.json: the directory is then one run, of the
// next two parts. The baseline and the candidate are the same directory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "metrics/curve_gate.h"
#include "metrics/ensemble.h"
#include "metrics/parity_gate.h"

namespace {

std::string part(const std::vector<std::string_view>& parts, std::size_t i) {
  return i < parts.size() ? std::string(parts[i]) : std::string();
}

void write_tree(const std::vector<std::string_view>& parts, const std::filesystem::path& dir) {
  using mpverify::fuzz::write_file;
  if (!part(parts, 0).empty()) {
    write_file(dir / "ensemble.json", part(parts, 0));
    write_file(dir / "seed-1/summary.json", part(parts, 1));
    write_file(dir / "seed-1/steps.jsonl", part(parts, 2));
    write_file(dir / "seed-2/summary.json", part(parts, 3));
    write_file(dir / "seed-2/steps.jsonl", part(parts, 4));
  } else {
    write_file(dir / "summary.json", part(parts, 1));
    write_file(dir / "steps.jsonl", part(parts, 2));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  const auto parts = fuzz::parts_of(fuzz::text_of(data, size));
  const auto dir = fuzz::scratch().fresh() / "runs";
  write_tree(parts, dir);
  const std::uint8_t choice = size ? data[size - 1] : 0;
  try {
    const metrics::Ensemble e = metrics::read_ensemble(dir, true);
    for (const metrics::RunDirectory& run : e.runs)
      (void)metrics::read_loss_curve(run, "loss", choice % 8, choice & 8);
  } catch (const metrics::InputError&) {
  }
  try {
    const metrics::Ensemble e = metrics::read_ensemble(dir, true);
    metrics::GateOptions options;
    options.metric = choice & 16 ? metrics::GateMetric::loss : metrics::GateMetric::accuracy;
    options.margin = 1;
    options.accept_single_run = choice & 32;
    (void)metrics::gate_verdict_line(metrics::evaluate_gate(e, e, options));
    std::string key;
    (void)metrics::read_curves(e, e, options, key);
  } catch (const metrics::InputError&) {
  }
  return 0;
}
