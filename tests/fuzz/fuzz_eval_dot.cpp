// `mpverify eval --op dot` (cli::run_eval_dot): the model's options and the hex lines it reads from
// standard input. Input: a first line "ARCH A_FORMAT B_FORMAT C_FORMAT PROMOTION [K F SPLIT OUTPUT]"
// ("-" leaves a format out), then the lines. A refusal is what the command would exit 2 with
// (UsageError, FormatError).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "cli/eval_dot.h"
#include "formats/format.h"
#include "fuzz_support.h"

namespace {

std::string optional_field(std::istringstream& in) {
  std::string s;
  in >> s;
  return s == "-" ? "" : s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  const std::string text(fuzz::text_of(data, size));
  const std::size_t end = text.find('\n');
  std::istringstream header(text.substr(0, end));
  cli::DotOptions o;
  header >> o.arch;
  o.a_format = optional_field(header);
  o.b_format = optional_field(header);
  o.c_format = optional_field(header);
  header >> o.promotion_interval;
  header >> o.custom_k >> o.custom_fraction_bits >> o.custom_split;
  o.custom_output = optional_field(header);
  if (o.promotion_interval < 0) return 0;  // CLI11 refuses it (NonNegativeNumber)
  o.check = size > 0 && (data[size - 1] & 1);
  o.json = size > 0 && (data[size - 1] & 2);
  fuzz::StandardStreams streams(end == std::string::npos ? "" : text.substr(end + 1));
  try {
    (void)cli::run_eval_dot(o);
  } catch (const cli::UsageError&) {
  } catch (const formats::FormatError&) {
  }
  return 0;
}
