// What the fuzz campaign found (docs/fuzzing.md), held by the normal build: every reproducer kept under
// tests/fuzz/regressions/<target>/ is read here, framed as its target frames it (a leading byte that picks
// the format, ...), and must meet the reader's documented refusal; small hand-written cases of the same
// defect sit beside it. Which refusal is right is the reader's header's rule, not this code's output.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "record/run_log.h"
#include "report/run_series.h"
#include "training/scaler_replay.h"
#include "training/trace_reader.h"

namespace mpverify {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> reproducers(const std::string& target) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(MPVERIFY_SOURCE_DIR) / "tests/fuzz/regressions" / target))
    files.push_back(entry.path());
  return files;
}

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// fuzz_trace's framing: byte 0 picks the format (auto, lines, csv, jsonl, deepspeed, megatron), mod 6.
training::ReadTrace read_trace_input(const std::string& input) {
  using training::TraceFormat;
  constexpr TraceFormat formats[] = {TraceFormat::automatic, TraceFormat::lines,     TraceFormat::csv,
                                     TraceFormat::jsonl,     TraceFormat::deepspeed, TraceFormat::megatron};
  std::istringstream in(input.substr(1));
  return training::read_trace(in, formats[static_cast<unsigned char>(input.at(0)) % 6]);
}

std::string trace_error(const std::string& text, training::TraceFormat format) {
  std::istringstream in(text);
  try {
    training::read_trace(in, format);
  } catch (const training::TraceError& e) {
    return e.what();
  }
  return "(accepted)";
}

// A step, iteration or skipped count that is nan, inf, a fraction or past 2^53 was converted to an integer
// (undefined behaviour; UBSan: "nan is outside the range of representable values of type 'long'"). The
// reader must refuse it, naming the line.
TEST(FuzzRegressions, TraceStepCountsAreWholeNumbers) {
  for (const fs::path& file : reproducers("trace")) {
    try {
      read_trace_input(read_bytes(file));
      ADD_FAILURE() << file << " was accepted";
    } catch (const training::TraceError& e) {
      EXPECT_NE(std::string(e.what()).find("is not a whole number in 0..2^53"), std::string::npos)
          << file << ": " << e.what();
    }
  }
  using training::TraceFormat;
  const std::string megatron =
      " iteration nan/ 100 | loss scale: 65536.0 | number of skipped iterations:   0 |\n";
  EXPECT_EQ(trace_error(megatron, TraceFormat::megatron), "line 1: iteration nan is not a whole number in 0..2^53");
  EXPECT_EQ(trace_error("[Rank 0] step=1e300, skipped=0, lr=[0.1]\n", TraceFormat::deepspeed),
            "line 1: step= 1.0000000000000001e+300 is not a whole number in 0..2^53");
  EXPECT_EQ(trace_error("[Rank 0] step=1, skipped=inf, lr=[0.1]\n", TraceFormat::deepspeed),
            "line 1: skipped= inf is not a whole number in 0..2^53");
  // 2^53 + 2 = 9007199254740994 is past the bound; 2^53 itself is read.
  EXPECT_EQ(trace_error("step,found_inf\n9007199254740994,0\n", TraceFormat::csv),
            "line 2: step '9007199254740994' is not a whole number in 0..2^53");
  EXPECT_EQ(trace_error("step,found_inf\n2.5,0\n", TraceFormat::csv),
            "line 2: step '2.5' is not a whole number in 0..2^53");
  std::istringstream exact("step,found_inf\n9007199254740992,0\n");
  EXPECT_EQ(training::read_trace(exact, TraceFormat::csv).steps.at(0).step, std::int64_t{1} << 53);
}

// A histograms.jsonl line that is not an object, or whose "step" or "role" has another type, escaped
// report::step_histogram as nlohmann's type_error (json::value() on an array or on a string step), and a
// step of 1e300 was converted to an integer. Found by hand while checking the histograms target (its first
// 30-second run did not reach them); refused now as std::invalid_argument naming the line.
TEST(FuzzRegressions, HistogramLinesAreCheckedBeforeTheyAreRead) {
  for (const fs::path& file : reproducers("histograms")) {
    const std::vector<nlohmann::json> lines = record::read_json_lines(file);
    try {
      report::step_histogram(lines, 0, {"weight_grad"});
      ADD_FAILURE() << file << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("histograms line 1: "), std::string::npos) << file << ": " << e.what();
    }
  }
  // Well-formed lines still sum: zeros 3 + 4 at step 0 in the asked roles; the step-1 line and the
  // activation line are left out.
  const auto line = [](std::size_t step, const char* role, unsigned zeros) {
    return nlohmann::json{{"step", step}, {"role", role}, {"zeros", zeros}, {"nans", 0u}, {"infinities", 0u},
                          {"below_range", 0u}, {"above_range", 0u}, {"first_exponent", nullptr},
                          {"counts", nlohmann::json::array()}};
  };
  const std::vector<nlohmann::json> lines = {line(0, "weight_grad", 3u), line(0, "activation_grad", 4u),
                                             line(1, "weight_grad", 100u), line(0, "activation", 1000u)};
  EXPECT_EQ(report::step_histogram(lines, 0, {"weight_grad", "activation_grad"}).zeros, 7u);
}

}  // namespace
}  // namespace mpverify
