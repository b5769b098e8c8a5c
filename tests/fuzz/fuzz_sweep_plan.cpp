// Sweep plans (sweep/sweep_plan.h), the sweep's input from outside: its keys become command lines and
// directory names. Input: the plan's JSON. Beyond the documented refusal (std::invalid_argument), a finding
// is also a plan that could write outside --out (a run directory that is absolute, holds "..", or is not
// <candidate>/seed-<s>), two runs sharing a directory, or more runs than the plan's limit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <set>
#include <stdexcept>

#include "fuzz_support.h"
#include "io/json_text.h"
#include "sweep/sweep_plan.h"

namespace {

[[noreturn]] void broken(const std::string& what) {
  std::cerr << "fuzz_sweep_plan: " << what << "\n";
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  nlohmann::json source;
  try {
    source = io::parse_json_text(fuzz::text_of(data, size));
  } catch (const io::JsonTextError&) {
    return 0;
  }
  sweep::SweepPlan plan;
  try {
    plan = sweep::parse_sweep_plan(source);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  if (plan.runs.size() > sweep::kMaxSweepRuns) broken(std::to_string(plan.runs.size()) + " runs");
  std::set<std::string> dirs;
  for (const sweep::SweepRun& run : plan.runs) {
    const std::string text = run.dir.string();
    if (!run.dir.is_relative()) broken("an absolute run directory: " + text);
    std::size_t parts = 0;
    for (const auto& part : run.dir) {
      ++parts;
      if (part == ".." || part == "." || part.empty()) broken("a run directory that climbs: " + text);
    }
    if (parts != 2) broken("a run directory of " + std::to_string(parts) + " components: " + text);
    if (!dirs.insert(text).second) broken("two runs share " + text);
    (void)sweep::run_arguments(plan, run);
  }
  return 0;
}
