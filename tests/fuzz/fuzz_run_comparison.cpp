// `mpverify compare-runs A B`'s inputs: each run's steps.jsonl and tensors.jsonl (record::read_json_lines)
// and summary.json (io::read_json_file), then compare::compare_runs and its JSON.
// Input: the six files cut at NUL bytes: steps A, steps B, tensors A, tensors B, summary A, summary B;
// a file whose part is empty or missing is left out (tensors and summary are optional).
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "compare/run_comparison.h"
#include "fuzz_support.h"
#include "io/json_text.h"
#include "record/run_log.h"

namespace {

// As compare_runs_command.cpp reads a run directory.
mpverify::compare::RunRecords load(const std::filesystem::path& root, const std::string& name) {
  mpverify::compare::RunRecords run;
  run.name = name;
  run.steps = mpverify::record::read_json_lines(root / "steps.jsonl");
  if (std::filesystem::exists(root / "tensors.jsonl"))
    run.tensors = mpverify::record::read_json_lines(root / "tensors.jsonl");
  if (std::filesystem::exists(root / "summary.json")) run.summary = mpverify::io::read_json_file(root / "summary.json");
  return run;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  const auto parts = fuzz::parts_of(fuzz::text_of(data, size));
  const auto& dir = fuzz::scratch().fresh();
  const char* files[] = {"a/steps.jsonl", "b/steps.jsonl", "a/tensors.jsonl", "b/tensors.jsonl",
                         "a/summary.json", "b/summary.json"};
  for (std::size_t i = 0; i < 6; ++i)
    if (i < 2 || (i < parts.size() && !parts[i].empty())) fuzz::write_file(dir / files[i], i < parts.size() ? parts[i] : "");
  compare::RunRecords a, b;
  try {
    a = load(dir / "a", "a");
    b = load(dir / "b", "b");
  } catch (const std::runtime_error&) {  // read_json_lines' and read_json_file's documented error
    return 0;
  }
  const std::uint8_t choice = size ? data[size - 1] : 0;
  compare::RunComparisonOptions options;
  if (choice & 1) options.loss_tolerance = 0.01 * (choice >> 1);
  if (choice & 2) options.loss_key = "loss_d";
  try {
    const compare::RunComparison c = compare::compare_runs(a, b, options);
    (void)compare::run_comparison_json(c).dump();
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
