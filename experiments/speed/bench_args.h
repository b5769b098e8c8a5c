// The command line the benchmark programs share: --help, --markdown FILE
// (and --json FILE where a program writes one), with Google Benchmark's own
// options passed through. A usage error exits 2, like the mpverify program.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
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

}  // namespace mpverify::bench
