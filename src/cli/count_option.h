// Options that count (ranks, elements, replicates, examples): read by their text, so that what CLI11 would
// convert quietly is refused by name. CLI11 reads "-1" into a std::size_t as 2^64 - 1 and "1e12" as 10^12;
// both then reached an allocation (std::bad_alloc, no option named) or a message echoing 18446744073709551615.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace mpverify::cli {

// A check for CLI::Option::check: the text must be a whole number (digits only) from `least` to `most`;
// `why_most` says what the upper bound protects, e.g. "memory: ranks x elements floats".
CLI::Validator count_from_to(std::uint64_t least, std::uint64_t most, const std::string& why_most);

}  // namespace mpverify::cli
