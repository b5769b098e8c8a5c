// The commands that read their cases from standard input, `mpverify round` and `mpverify eval` (TestFloat
// lines and --op dot), run as main() runs them: CLI11 parses the arguments, then the command runs.
// Input: a first line of arguments (split at spaces, "round" or "eval" first), then standard input.
// A refusal is what main() exits 2 for (a CLI11 parse error, UsageError, FormatError); any other escape
// is a finding (main would print it and exit 1, or crash).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "formats/format.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  const std::string text(fuzz::text_of(data, size));
  const std::size_t end = text.find('\n');
  std::istringstream line(text.substr(0, end));
  std::vector<std::string> args{"mpverify"};
  for (std::string a; line >> a && args.size() < 32;) args.push_back(a);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());

  CLI::App root{"fuzz", "mpverify"};
  root.require_subcommand(1);
  std::vector<cli::Command> commands;
  cli::add_round_command(root, commands);
  cli::add_eval_command(root, commands);
  fuzz::StandardStreams streams(end == std::string::npos ? "" : text.substr(end + 1));
  try {
    root.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    return 0;
  }
  for (const cli::Command& c : commands) {
    if (!c.app->parsed()) continue;
    try {
      (void)c.run();
    } catch (const cli::UsageError&) {
    } catch (const formats::FormatError&) {
    }
  }
  return 0;
}
