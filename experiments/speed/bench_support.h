// What the benchmark programs share: the command line (--help, --markdown
// FILE, and --json FILE where a program writes one, with Google Benchmark's
// own options passed through; a usage error exits 2, like the mpverify
// program) and a reporter that keeps every time for the ratio tables.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace mpverify::bench {

struct BenchArgs {
  std::string markdown_path, json_path;
  int exit_code = -1;  // >= 0: main should return it now (after --help, or on a usage error)
};

// Parses the options above and initialises Google Benchmark with the rest.
inline BenchArgs parse_bench_args(int argc, char** argv, const char* usage, bool accepts_json = false) {
  BenchArgs out;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s\n", usage);
      benchmark::PrintDefaultHelp();
      out.exit_code = 0;
      return out;
    }
    const bool takes_file = a == "--markdown" || (accepts_json && a == "--json");
    if (takes_file && i + 1 >= argc) {
      std::fprintf(stderr, "%s: error: %s needs a file name\n", argv[0], a.c_str());
      out.exit_code = 2;
      return out;
    }
    if (a == "--markdown") out.markdown_path = argv[++i];
    else if (takes_file) out.json_path = argv[++i];
    else rest.push_back(argv[i]);
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  if (benchmark::ReportUnrecognizedArguments(n, rest.data())) out.exit_code = 2;
  return out;
}

// The console table as usual, and each benchmark's real time in seconds by
// name, without the "/iterations:N" or "/manual_time" suffix, e.g.
// "BM_EigenSgemm/512". A program's reporter derives from it and writes its
// own ratio table.
class TimeReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      std::string name = r.benchmark_name();
      for (const char* suffix : {"/iterations:", "/manual_time", "/min_time:"}) name = name.substr(0, name.find(suffix));
      if (r.error_occurred)
        errors_[name] = r.error_message;
      else
        seconds_[name] = r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
    }
  }

 protected:
  std::map<std::string, double> seconds_;
  std::map<std::string, std::string> errors_;  // benchmarks that ended with SkipWithError, and why
};

}  // namespace mpverify::bench
