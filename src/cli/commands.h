// The subcommands of the `mpverify` program. Each file adds one subcommand
// to the root CLI11 app and says what to run when it was chosen; the work
// itself is library calls, so tests can make the same calls directly.
#pragma once

#include <functional>
#include <stdexcept>
#include <vector>

#include <CLI/CLI.hpp>

namespace mpverify::cli {

struct Command {
  CLI::App* app;
  std::function<int()> run;  // returns the exit code
};

// Thrown for bad input found after parsing (an unknown format name, a value
// that does not parse): main prints it as one line and exits with 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs `work`, turning the library's refusals of bad input (std::invalid_argument,
// data::DataFileError) into a UsageError with the same text: one place for the
// rule that a command's bad input exits with 2.
void with_usage_errors(const std::function<void()>& work);

void add_formats_command(CLI::App& root, std::vector<Command>& commands);
void add_round_command(CLI::App& root, std::vector<Command>& commands);
void add_eval_command(CLI::App& root, std::vector<Command>& commands);
void add_ops_command(CLI::App& root, std::vector<Command>& commands);
void add_replay_scalers_command(CLI::App& root, std::vector<Command>& commands);
void add_train_command(CLI::App& root, std::vector<Command>& commands);
void add_compare_runs_command(CLI::App& root, std::vector<Command>& commands);
void add_summarize_command(CLI::App& root, std::vector<Command>& commands);
void add_gate_command(CLI::App& root, std::vector<Command>& commands);
void add_fid_command(CLI::App& root, std::vector<Command>& commands);
void add_analyze_command(CLI::App& root, std::vector<Command>& commands);
void add_swamp_command(CLI::App& root, std::vector<Command>& commands);
void add_quantize_command(CLI::App& root, std::vector<Command>& commands);
void add_feature_extractor_command(CLI::App& root, std::vector<Command>& commands);
void add_study_command(CLI::App& root, std::vector<Command>& commands);
void add_report_page_command(CLI::App& root, std::vector<Command>& commands);
void add_allreduce_command(CLI::App& root, std::vector<Command>& commands);
void add_sweep_command(CLI::App& root, std::vector<Command>& commands);

}  // namespace mpverify::cli
