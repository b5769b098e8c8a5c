// What every experiment's command shares (experiments/<name>/main.cpp): the
// common options, progress lines, and the exit codes of the whole toolkit
// (0 done; 2 bad input: the message says what, where and how to fix it, and
// nothing is written; 1 anything else).
//
//   int main(int argc, char** argv) {
//     CLI::App app{"What the experiment shows. Example: ..."};
//     ExperimentOptions common{"reports/underflow.md", "runs/underflow"};
//     add_common_options(app, common);
//     app.add_option(...);  // the experiment's own
//     return experiment_main(app, argc, argv, [&](const Progress& progress) {
//       validate(...);      // throws std::invalid_argument before anything is written
//       ... run, write the report ...
//       return 0;
//     });
//   }
#pragma once

#include <unistd.h>

#include <exception>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

#include "data/data_file_error.h"

namespace mpverify::experiments {

using Progress = std::function<void(const std::string&)>;

struct ExperimentOptions {
  std::string report;  // the Markdown report; figures go next to it as <stem>-<what>.svg
  std::string runs;    // the run directories (replaced)
  std::size_t jobs = 2;
  bool json = false, progress = false, quiet = false;
};

inline void add_common_options(CLI::App& app, ExperimentOptions& o) {
  app.add_option("--report", o.report, "The Markdown report; its figures are written next to it")->capture_default_str();
  app.add_option("--runs", o.runs, "Directory for the training runs (replaced)")->capture_default_str();
  app.add_option("--jobs", o.jobs, "Runs trained at a time (threads); the results do not depend on it")
      ->capture_default_str();
  app.add_flag("--json", o.json, "Print the results and the files written as JSON on standard output");
  app.add_flag("--progress", o.progress, "Progress lines on standard error even when it is not a terminal");
  app.add_flag("--quiet", o.quiet, "No progress lines");
}

// Parses the command line and runs `body` with a progress callback (lines on
// standard error when it is a terminal or --progress, never with --quiet).
inline int experiment_main(CLI::App& app, int argc, char** argv, const ExperimentOptions& o,
                           const std::function<int(const Progress&)>& body) {
  const std::string name = app.get_name().empty() ? std::string("experiment") : app.get_name();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << name << ": error: " << e.what() << "\n(run with --help for the options)\n";
    return 2;
  }
  if (o.jobs < 1) {
    std::cerr << name << ": error: --jobs must be at least 1\n";
    return 2;
  }
  const bool show = !o.quiet && (o.progress || ::isatty(2));
  try {
    return body([&](const std::string& line) {
      if (show) std::cerr << name << ": " << line << std::endl;
    });
  } catch (const std::invalid_argument& e) {
    std::cerr << name << ": error: " << e.what() << "\n";
    return 2;
  } catch (const data::DataFileError& e) {
    std::cerr << name << ": error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << name << ": failed: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace mpverify::experiments
