// The all-reduce simulation's speed (collective::allreduce, counters on):
// the bf16 ring over 1024 ranks x 10^6 elements (the goal: within 10 s on one
// core), the bf16 tree and the fp16 ring, against a plain float32 sum of
// the same rows in the same ring order (acc += row, no rounding to a format,
// no counters) measured in the same run.
//
//   bench_allreduce [--ranks N] [--elements n] [--rounds R] [--json FILE] [--markdown FILE]
//
// Inputs: a base vector of n normal draws (collective::synthetic_gradients,
// seed 1); rank r's row is the base rotated by 7919 r elements and scaled by
// 1 + (r mod 16) / 64, so rows differ without drawing N x n normals. One
// thread. Each of R rounds (default 3) times every variant once; reports the
// median seconds and the ratio to the plain sum's median.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "collective/allreduce.h"
#include "collective/synthetic.h"
#include "formats/format.h"

namespace {

using namespace mpverify;

struct Args {
  std::size_t ranks = 1024, elements = 1000000;
  int rounds = 3;
  std::string json_path, markdown_path;
  int exit_code = -1;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const bool has_value = i + 1 < argc;
    if (s == "--help" || s == "-h") {
      std::printf("bench_allreduce [--ranks N] [--elements n] [--rounds R] [--json FILE] [--markdown FILE]\n");
      a.exit_code = 0;
      return a;
    }
    if (!has_value) {
      std::fprintf(stderr, "bench_allreduce: error: %s needs a value (see --help)\n", s.c_str());
      a.exit_code = 2;
      return a;
    }
    const std::string v = argv[++i];
    if (s == "--ranks") a.ranks = std::strtoull(v.c_str(), nullptr, 10);
    else if (s == "--elements") a.elements = std::strtoull(v.c_str(), nullptr, 10);
    else if (s == "--rounds") a.rounds = std::atoi(v.c_str());
    else if (s == "--json") a.json_path = v;
    else if (s == "--markdown") a.markdown_path = v;
    else {
      std::fprintf(stderr, "bench_allreduce: error: unknown option %s (see --help)\n", s.c_str());
      a.exit_code = 2;
      return a;
    }
  }
  if (a.ranks < 1 || a.elements < 1 || a.rounds < 1) {
    std::fprintf(stderr, "bench_allreduce: error: --ranks, --elements and --rounds must be at least 1\n");
    a.exit_code = 2;
  }
  return a;
}

std::vector<float> rows(std::size_t ranks, std::size_t n) {
  const std::vector<float> base = collective::synthetic_gradients(1, n, 1);
  std::vector<float> x(ranks * n);
  for (std::size_t r = 0; r < ranks; ++r) {
    const float scale = 1.0f + static_cast<float>(r % 16) / 64.0f;
    const std::size_t shift = (r * 7919) % n;
    for (std::size_t i = 0; i < n; ++i) x[r * n + i] = base[(i + shift) % n] * scale;
  }
  return x;
}

// The baseline: the same ring order in plain float32.
void plain_ring(const collective::RankRows& x, std::vector<float>& out) {
  for (std::size_t c = 0; c < x.ranks; ++c) {
    const collective::Chunk k = collective::ring_chunk(x.n, x.ranks, c);
    for (std::size_t from = k.begin; from < k.end; from += 2048) {
      const std::size_t to = std::min(k.end, from + 2048);
      std::copy(x.row(c).begin() + static_cast<std::ptrdiff_t>(from), x.row(c).begin() + static_cast<std::ptrdiff_t>(to),
                out.begin() + static_cast<std::ptrdiff_t>(from));
      for (std::size_t j = 1; j < x.ranks; ++j) {
        const float* u = x.row((c + j) % x.ranks).data();
        for (std::size_t i = from; i < to; ++i) out[i] += u[i];
      }
    }
  }
}

struct Variant {
  std::string name;
  std::function<void()> run;
  std::vector<double> secs = {};
};

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void report(const std::vector<Variant>& vs, const Args& a) {
  const double base = median(vs[0].secs);
  char line[256];
  std::string md = "All-reduce simulation, " + std::to_string(a.ranks) + " ranks x " + std::to_string(a.elements) +
                   " elements, one thread, median of " + std::to_string(a.rounds) + " rounds.\n\n" +
                   "| variant | seconds (median) | ratio to the plain float32 sum |\n|---|---:|---:|\n";
  std::string json = "[";
  for (std::size_t k = 0; k < vs.size(); ++k) {
    const double s = median(vs[k].secs);
    std::snprintf(line, sizeof line, "| %s | %.3f | %.2f |\n", vs[k].name.c_str(), s, s / base);
    md += line;
    std::snprintf(line, sizeof line, "%s\n {\"variant\": \"%s\", \"seconds\": %.4f, \"ratio_to_plain\": %.4f}",
                  k ? "," : "", vs[k].name.c_str(), s, s / base);
    json += line;
  }
  json += "\n]\n";
  std::printf("\n%s", md.c_str());
  if (!a.json_path.empty()) std::ofstream(a.json_path) << json;
  if (!a.markdown_path.empty()) std::ofstream(a.markdown_path) << md;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  if (a.exit_code >= 0) return a.exit_code;
  const std::vector<float> x = rows(a.ranks, a.elements);
  const collective::RankRows in{x, a.ranks, a.elements};
  std::vector<float> out(a.elements);
  std::uint64_t additions = 0;
  auto emulated = [&](const char* format, collective::Algorithm algorithm) {
    return [&, format, algorithm] {
      collective::AllreduceSpec s;
      s.rounding = emu::QuantizeSpec{formats::parse_format(format)};
      s.algorithm = algorithm;
      additions += collective::allreduce(in, s).counters.additions.elements;
    };
  };
  std::vector<Variant> vs = {{"plain float32 sum, ring order", [&] { plain_ring(in, out); }},
                             {"bf16 ring", emulated("bf16", collective::Algorithm::ring)},
                             {"bf16 tree", emulated("bf16", collective::Algorithm::tree)},
                             {"fp16 ring", emulated("fp16", collective::Algorithm::ring)}};
  for (int r = 0; r < a.rounds; ++r) {
    for (Variant& v : vs) v.secs.push_back(seconds(v.run));
    std::printf("round %d:", r + 1);
    for (const Variant& v : vs) std::printf(" %.3f", v.secs.back());
    std::printf(" s\n");
  }
  std::printf("(additions counted: %llu; plain checksum %g)\n", static_cast<unsigned long long>(additions),
              static_cast<double>(out[0]));
  report(vs, a);
  return 0;
}
