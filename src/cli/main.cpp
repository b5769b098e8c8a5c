// The `mpverify` program: the root command line, its subcommands (each in its
// own file, see commands.h), and the one-line usage errors (exit code 2).
#include <algorithm>
#include <exception>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "formats/format.h"
#include "record/run_log.h"
#include "gpu/device.h"
#include "io/shrunk_mapping.h"

#ifndef MPVERIFY_VERSION
#error "MPVERIFY_VERSION (the CMake project version) must be defined by the build"
#endif

namespace {

using mpverify::cli::Command;

std::vector<Command> add_commands(CLI::App& root) {
  using namespace mpverify::cli;
  std::vector<Command> commands;
  add_formats_command(root, commands);
  add_round_command(root, commands);
  add_eval_command(root, commands);
  add_ops_command(root, commands);
  add_replay_scalers_command(root, commands);
  add_train_command(root, commands);
  add_compare_runs_command(root, commands);
  add_summarize_command(root, commands);
  add_gate_command(root, commands);
  add_fid_command(root, commands);
  add_analyze_command(root, commands);
  add_swamp_command(root, commands);
  add_quantize_command(root, commands);
  add_feature_extractor_command(root, commands);
  add_study_command(root, commands);
  add_report_page_command(root, commands);
  add_allreduce_command(root, commands);
  add_sweep_command(root, commands);
  return commands;
}

// CLI11 reports an unknown command as "a subcommand is required"; this names
// it and lists the commands. nullopt when argv[1] is a command or an option.
std::optional<std::string> unknown_command(int argc, char** argv, const std::vector<Command>& commands) {
  if (argc < 2 || argv[1][0] == '-') return std::nullopt;
  std::string known;
  for (const Command& c : commands) {
    if (c.app->get_name() == argv[1]) return std::nullopt;
    known += (known.empty() ? "" : ", ") + c.app->get_name();
  }
  return "mpverify: error: unknown command '" + std::string(argv[1]) + "' (commands: " + known + ")";
}

// The first argument the chosen command (or the root) did not recognise.
// CLI11 checks required options before it looks at what is left over, so a
// misspelt option would otherwise be reported as the option it was meant to
// be ("--format is required" for "--formt"); the leftover is the real error.
std::optional<std::string> first_leftover(const CLI::App& app) {
  const std::vector<std::string> left = app.remaining(false);
  if (left.empty()) return std::nullopt;
  return left.front();
}

// One line naming what is wrong and the help that says how to fix it.
std::string usage_error(const std::string& prefix, const std::optional<std::string>& leftover,
                        const CLI::ParseError& e) {
  if (leftover && leftover->size() > 1 && leftover->front() == '-') {
    const std::string option = leftover->substr(0, leftover->find('='));  // "--formt=fp16": --formt
    return prefix + ": unknown option " + option + "; see " + prefix + " --help";
  }
  if (leftover) return prefix + ": unexpected argument '" + *leftover + "'; see " + prefix + " --help";
  return prefix + ": error: " + e.what() + " (see '" + prefix + " --help')";
}

int run_chosen(const std::vector<Command>& commands) {
  for (const Command& c : commands) {
    if (!c.app->parsed()) continue;
    try {
      return c.run();
    } catch (const mpverify::cli::UsageError& e) {
      std::cerr << "mpverify " << c.app->get_name() << ": error: " << e.what() << "\n";
      return 2;
    } catch (const mpverify::formats::FormatError& e) {
      std::cerr << "mpverify " << c.app->get_name() << ": error: " << e.what() << "\n";
      return 2;
    } catch (const mpverify::record::OutputError& e) {
      std::cerr << "mpverify " << c.app->get_name() << ": error: " << e.what() << "\n";
      return 2;
    } catch (const std::bad_alloc&) {
      // An input that asks for more memory than there is (a count, a size, a file that inflates): bad input.
      std::cerr << "mpverify " << c.app->get_name() << ": error: out of memory: the input or an option asks for "
                << "more memory than this machine has; use a smaller size or count\n";
      return 2;
    } catch (const std::exception& e) {
      // Exit 1 and 3 are verdicts, which commands return; anything thrown is input the command cannot use.
      std::cerr << "mpverify " << c.app->get_name() << ": error: " << e.what() << "\n";
      return 2;
    }
  }
  return 2;
}

// One line per command for `mpverify --help`: each command's own --help keeps its long description.
const char* summary(const std::string& command) {
  static const std::vector<std::pair<std::string, const char*>> lines{
      {"formats", "list the number formats and their constants"},
      {"round", "round values to a format once: bits, value and IEEE flags"},
      {"eval", "evaluate operations or tensor-core dot products case by case (TestFloat lines)"},
      {"ops", "one op on the reference, the emulator and the GPU, every pair of sides compared"},
      {"replay-scalers", "replay a recorded trace under several loss-scale strategies"},
      {"train", "train a model under a precision recipe and loss scaler, recording every step"},
      {"compare-runs", "compare two run directories step by step"},
      {"summarize", "one run directory per layer and tensor: underflow, overflow, what-if scales"},
      {"gate", "the parity gate for CI: is the candidate equivalent to the baseline?"},
      {"fid", "FID and KID between two feature matrices"},
      {"analyze", "what casting dumped tensors to a format would do: underflow, overflow, headroom"},
      {"swamp", "lost updates (swamping) of dumped weights and updates"},
      {"quantize", "quantize a tensor in blocks (MX, NVFP4, block-wise FP8)"},
      {"feature-extractor", "train the feature extractor of FID and KID"},
      {"study", "the default study: fp32 against o2 on the MNIST CNN, with its report"},
      {"report-page", "every report of a folder on one self-contained HTML page"},
      {"allreduce", "sum gradients across ranks in a format, in NCCL's or FSDP's order"},
      {"sweep", "train every run of a plan (recipe x scaler x seed, ...)"},
  };
  for (const auto& [name, line] : lines)
    if (name == command) return line;
  return nullptr;
}

std::string root_help(const std::vector<Command>& commands) {
  std::string text =
      "mpverify: verifies the numerics of mixed-precision (fp16, bf16, fp8) training.\n"
      "Usage: mpverify COMMAND [OPTIONS]; 'mpverify COMMAND --help' describes a command and its options.\n\n"
      "Commands:\n";
  for (const Command& c : commands) {
    const std::string name = c.app->get_name();
    const char* line = summary(name);
    text += "  " + name + std::string(name.size() < 19 ? 19 - name.size() : 1, ' ') +
            (line ? line : c.app->get_description().substr(0, c.app->get_description().find('\n'))) + "\n";
  }
  return text + "\nOptions:\n  -h, --help         this list\n"
                "  --version          the version and the GPU it can use\n";
}

// The version and the GPU this build can use (a second line, so scripts can tell whether the gpu side
// runs here: experiments/regenerate-reports does). Asked only when --version is given: probing the
// device takes a while.
std::string version_text() {
  namespace gpu = mpverify::gpu;
  std::string text = std::string("mpverify ") + MPVERIFY_VERSION + "\ngpu: ";
  if (const std::string reason = gpu::gpu_unavailable_reason(); !reason.empty()) return text + "none (" + reason + ")";
  const gpu::DeviceInfo info = gpu::describe_device();
  return text + info.name + " (sm_" + std::to_string(info.compute_capability) + "), cuBLAS " + info.cublas_version +
         ", cuDNN " + info.cudnn_version;
}

}  // namespace

int main(int argc, char** argv) {
  mpverify::io::exit_on_shrunk_mapping();  // an input truncated while mapped: exit 2 naming it, not a SIGBUS
  CLI::App root{"mpverify: verifies the numerics of mixed-precision (fp16, bf16, fp8) training.\n"
                "Run 'mpverify COMMAND --help' for a command's options.",
                "mpverify"};
  root.require_subcommand(1);
  root.set_version_flag("--version", version_text, "Print the version and the GPU it can use, and exit");
  const std::vector<Command> commands = add_commands(root);
  if (const std::optional<std::string> error = unknown_command(argc, argv, commands)) {
    std::cerr << *error << "\n";
    return 2;
  }
  try {
    root.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    // A command's --help is its own page (CLI11 hands it to the parsed subcommand); the root's is the list.
    const bool for_a_command = std::any_of(commands.begin(), commands.end(), [](const Command& c) {
      return c.app->parsed();
    });
    std::cout << (for_a_command ? root.help() : root_help(commands));
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << root.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    const bool has_command = argc > 1 && argv[1][0] != '-';
    const CLI::App& app = has_command ? *root.get_subcommand(argv[1]) : root;
    const std::string prefix = has_command ? "mpverify " + std::string(argv[1]) : std::string("mpverify");
    std::cerr << usage_error(prefix, first_leftover(app), e) << "\n";
    return 2;
  }
  return run_chosen(commands);
}
