// A run's histograms.jsonl (record::read_json_lines), each line's histogram and thresholds
// (record::histogram_from_json, thresholds_from_json), and the study's sum of a step's histograms
// (report::step_histogram).
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "fuzz_support.h"
#include "record/histogram_json.h"
#include "record/run_log.h"
#include "report/run_series.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  const auto file = fuzz::scratch().fresh() / "histograms.jsonl";
  fuzz::write_file(file, fuzz::text_of(data, size));
  std::vector<nlohmann::json> lines;
  try {
    lines = record::read_json_lines(file);
  } catch (const std::runtime_error&) {  // its documented error
    return 0;
  }
  for (const nlohmann::json& line : lines) {
    try {
      (void)record::histogram_from_json(line);
    } catch (const std::invalid_argument&) {
    }
    try {
      (void)record::thresholds_from_json(line);
    } catch (const std::invalid_argument&) {
    }
  }
  try {
    (void)report::step_histogram(lines, 0, {"weight_grad", "activation_grad"});
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
