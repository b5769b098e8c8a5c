#include <exception>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "formats/format.h"

int main(int argc, char** argv) {
  using namespace mpverify::cli;
  CLI::App root{"mpverify: verifies the numerics of mixed-precision (fp16, bf16, fp8) training.\n"
                "Run 'mpverify COMMAND --help' for a command's options.",
                "mpverify"};
  root.require_subcommand(1);
  std::vector<Command> commands;
  add_formats_command(root, commands);
  add_round_command(root, commands);
  add_eval_command(root, commands);
  add_ops_command(root, commands);
  add_replay_scalers_command(root, commands);
  add_train_command(root, commands);
  add_compare_runs_command(root, commands);
  add_gate_command(root, commands);
  add_fid_command(root, commands);
  add_analyze_command(root, commands);
  add_swamp_command(root, commands);
  add_feature_extractor_command(root, commands);
  add_study_command(root, commands);
  add_report_page_command(root, commands);

  // CLI11 reports an unknown command as "a subcommand is required"; name it.
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const Command& c : commands) {
      found |= c.app->get_name() == argv[1];
      known += (known.empty() ? "" : ", ") + c.app->get_name();
    }
    if (!found) {
      std::cerr << "mpverify: error: unknown command '" << argv[1] << "' (commands: " << known << ")\n";
      return 2;
    }
  }
  try {
    root.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << root.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << root.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::ParseError& e) {
    // One line naming what is wrong, and the command whose help says how to
    // fix it; exit code 2 for every usage error.
    const std::string command = argc > 1 && argv[1][0] != '-' ? std::string(argv[1]) : std::string();
    const std::string prefix = command.empty() ? "mpverify" : "mpverify " + command;
    std::cerr << prefix << ": error: " << e.what() << " (see '" << prefix << " --help')\n";
    return 2;
  }
  for (const Command& c : commands) {
    if (!c.app->parsed()) continue;
    try {
      return c.run();
    } catch (const UsageError& e) {
      std::cerr << "mpverify " << c.app->get_name() << ": error: " << e.what() << "\n";
      return 2;
    } catch (const mpverify::formats::FormatError& e) {
      std::cerr << "mpverify " << c.app->get_name() << ": error: " << e.what() << "\n";
      return 2;
    } catch (const std::exception& e) {
      std::cerr << "mpverify " << c.app->get_name() << ": error: " << e.what() << "\n";
      return 1;
    }
  }
  return 2;
}
