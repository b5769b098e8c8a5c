// A training dump's step directories (analysis::find_step_directories): step.json in each, and the
// directory names' step numbers. Input cut at NUL bytes: step-000001/step.json, step-2/step.json, then
// a name given to analysis::step_number and analysis::split_step_name.
#include <cstddef>
#include <cstdint>

#include "analysis/dump_steps.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  const auto parts = fuzz::parts_of(fuzz::text_of(data, size));
  const auto& dir = fuzz::scratch().fresh();
  fuzz::write_file(dir / "step-000001/step.json", parts[0]);
  if (parts.size() > 1) fuzz::write_file(dir / "step-2/step.json", parts[1]);
  try {
    (void)analysis::find_step_directories(dir);
  } catch (const analysis::StepLayoutError&) {
  }
  if (parts.size() > 2) {
    (void)analysis::step_number(parts[2]);
    (void)analysis::split_step_name(std::string(parts[2]));
  }
  return 0;
}
