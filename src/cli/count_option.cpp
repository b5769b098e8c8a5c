#include "cli/count_option.h"

#include <charconv>

namespace mpverify::cli {

CLI::Validator count_from_to(std::uint64_t least, std::uint64_t most, const std::string& why_most) {
  const std::string range = "a whole number from " + std::to_string(least) + " to " + std::to_string(most);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        std::uint64_t n = 0;
        const char* end = text.data() + text.size();
        const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        const auto [stop, ec] = std::from_chars(text.data(), end, n);
        if (!digits || ec != std::errc() || stop != end) return "'" + text + "' is not " + range;
        if (n < least) return "'" + text + "' is below " + std::to_string(least) + ": give " + range;
        if (n > most) return "'" + text + "' is above " + std::to_string(most) + " (" + why_most + "): give " + range;
        return "";
      },
      "COUNT");
}

}  // namespace mpverify::cli
