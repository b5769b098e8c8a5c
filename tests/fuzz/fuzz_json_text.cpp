// io::parse_json_text, the one door for JSON from outside: nesting bounded, every parser error one type.
// What it accepts must print and parse back to the same value.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "io/json_text.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  const auto text = fuzz::text_of(data, size);
  std::string why;
  const auto quiet = io::try_parse_json_text(text, &why);
  try {
    const nlohmann::json j = io::parse_json_text(text);
    if (!quiet || *quiet != j) __builtin_trap();  // the two doors disagree
    const std::string printed = j.dump();
    if (io::parse_json_text(printed) != j) __builtin_trap();
  } catch (const io::JsonTextError&) {
    if (quiet) __builtin_trap();
  }
  return 0;
}
