// `mpverify eval`'s TestFloat lines (io::parse_operation, io::parse_case, io::evaluate, io::matches).
// Input: a first line "OP FORMAT" (e.g. "add fp16", "from-bf16 fp8-e4m3"), then the case lines. The
// first byte of the first line's text after the format picks the rounding mode and whether the
// expected fields are required.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "formats/format.h"
#include "formats/philox.h"
#include "formats/rounding.h"
#include "fuzz_support.h"
#include "io/testfloat_cases.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  std::istringstream in(std::string(fuzz::text_of(data, size)));
  std::string header, op_name, format_name, options;
  std::getline(in, header);
  std::istringstream fields(header);
  fields >> op_name >> format_name >> options;
  const std::uint8_t choice = options.empty() ? 0 : static_cast<std::uint8_t>(options[0]);
  io::Operation op;
  try {
    op = io::parse_operation(op_name, formats::parse_format(format_name));
  } catch (const io::CaseError&) {
    return 0;
  } catch (const formats::FormatError&) {
    return 0;
  }
  constexpr formats::Rounding modes[] = {formats::Rounding::nearest_even, formats::Rounding::toward_zero,
                                         formats::Rounding::up, formats::Rounding::down,
                                         formats::Rounding::nearest_away, formats::Rounding::odd,
                                         formats::Rounding::stochastic};
  formats::RoundingContext rc{modes[choice % 7],
                              choice & 8 ? formats::Tininess::before_rounding : formats::Tininess::after_rounding,
                              1 + choice % 32, 0};
  const bool require_expected = choice & 16;
  std::string line;
  for (std::uint64_t k = 0; std::getline(in, line); ++k) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    io::Case c;
    try {
      c = io::parse_case(line, op, require_expected);
    } catch (const io::CaseError&) {
      continue;
    }
    rc.random = formats::stochastic_draw(0, 0, k);
    const io::Outcome ours = io::evaluate(op, c, rc);
    (void)io::hex_field(ours.result, op.result_bits());
    if (c.expected_result && c.expected_flags)
      (void)io::matches(op, ours, *c.expected_result, *c.expected_flags, choice & 32);
  }
  return 0;
}
