// Block quantization's speed (emu::block_quantize, counters always on) against
// the plain float32 -> fp8-e4m3 array conversion (emu::quantize) in the same
// run (the goal: at least half its throughput).
//
//   bench_block_quantize [--log2-elements N] [--rounds R] [--json FILE] [--markdown FILE]
//
// Inputs: 2^N floats (default 2^22) with magnitudes log-uniform in
// [2^-27, 2^16) and random signs, seed 42 (as bench_quantize). Each of R
// rounds (default 7) times, one after another on the same input, the plain
// conversion with counters off and on, then mxfp8-e4m3 (rceil), nvfp4,
// mxfp4 and fp8-tile1x128 as a 2^(N-10) x 1024 matrix blocked along its
// rows, fp8-block128x128 on the same matrix, mxfp8-e4m3 blocked down its
// columns (axis 0), and mxfp8-e4m3 and nvfp4 with stochastic rounding (the
// two the goal is about come first: mxfp8-e4m3 and nvfp4, round to nearest
// even). Reports each one's median
// throughput, and for the block schemes the ratio of their throughput to the
// plain conversion's in the same round: the median and the range over the
// rounds. block_quantize allocates its outputs (values, codes, scales) in
// every call, as its callers get them; the plain conversion writes into a
// buffer allocated once.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "emu/block_quantize.h"
#include "emu/quantize.h"
#include "formats/format.h"

namespace {

using namespace mpverify;

struct Args {
  int log2_elements = 22;
  int rounds = 7;
  std::string json_path, markdown_path;
  int exit_code = -1;
};

const char* const kUsage =
    "bench_block_quantize [--log2-elements N] [--rounds R] [--json FILE] [--markdown FILE]\n"
    "Times emu::block_quantize (mxfp8-e4m3, nvfp4, mxfp4, fp8-tile1x128, fp8-block128x128) against the plain\n"
    "float32 -> fp8-e4m3 conversion (emu::quantize) on 2^N floats (default 22), R interleaved rounds (default 7).";

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const bool takes_value = s == "--log2-elements" || s == "--rounds" || s == "--json" || s == "--markdown";
    if (s == "--help" || s == "-h") {
      std::printf("%s\n", kUsage);
      a.exit_code = 0;
      return a;
    }
    if (!takes_value || i + 1 >= argc) {
      std::fprintf(stderr, "%s: error: %s %s\n%s\n", argv[0], takes_value ? "missing a value for" : "unknown option",
                   s.c_str(), kUsage);
      a.exit_code = 2;
      return a;
    }
    const std::string v = argv[++i];
    if (s == "--log2-elements") a.log2_elements = std::clamp(std::stoi(v), 10, 28);
    else if (s == "--rounds") a.rounds = std::max(1, std::stoi(v));
    else if (s == "--json") a.json_path = v;
    else a.markdown_path = v;
  }
  return a;
}

std::vector<float> inputs(std::size_t n) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> log2_magnitude(-27.0, 16.0);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(std::exp2(log2_magnitude(rng)) * ((rng() & 1) ? -1.0 : 1.0));
  return v;
}

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Variant {
  std::string name;
  std::function<void()> run;
  bool is_block = false;
  std::vector<double> secs = {};          // per round
  std::vector<double> ratio_vs_off = {};  // throughput / plain counters-off throughput, per round
  std::vector<double> ratio_vs_on = {};   // throughput / plain counters-on throughput, per round
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string fmt(const char* format, double a, double b = 0, double c = 0) {
  char buf[128];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

// The table (Markdown) and the JSON of the results.
void report(const std::vector<Variant>& vs, std::size_t n, int rounds, const Args& args) {
  std::string md = "# Speed: block quantization against the plain fp8-e4m3 conversion (one thread)\n\n";
  md += "Command: `build/experiments/bench_block_quantize --log2-elements " + std::to_string(args.log2_elements) +
        " --rounds " + std::to_string(rounds) + "` (" + std::to_string(n) +
        " floats, magnitudes log-uniform in [2^-27, 2^16), seed 42). Ratio = block throughput / plain throughput in "
        "the same round: median [min, max] over the rounds; goal >= 0.5 against the plain conversion.\n\n";
  md += "| variant | Melem/s (median) | ratio vs plain, counters off | ratio vs plain, counters on |\n|---|---:|---:|---:|\n";
  std::string json = "[\n";
  for (const Variant& v : vs) {
    const double rate = static_cast<double>(n) / median(v.secs) / 1e6;
    std::string off = "", on = "";
    if (v.is_block) {
      off = fmt("%.2f [%.2f, %.2f]", median(v.ratio_vs_off), *std::min_element(v.ratio_vs_off.begin(), v.ratio_vs_off.end()),
                *std::max_element(v.ratio_vs_off.begin(), v.ratio_vs_off.end()));
      on = fmt("%.2f [%.2f, %.2f]", median(v.ratio_vs_on), *std::min_element(v.ratio_vs_on.begin(), v.ratio_vs_on.end()),
               *std::max_element(v.ratio_vs_on.begin(), v.ratio_vs_on.end()));
    }
    md += "| " + v.name + " | " + fmt("%.1f", rate) + " | " + off + " | " + on + " |\n";
    json += std::string(json.size() > 2 ? ",\n" : "") + "  {\"variant\": \"" + v.name + "\", \"melem_per_s\": " +
            fmt("%.3f", rate);
    if (v.is_block)
      json += fmt(", \"ratio_vs_plain_off\": {\"median\": %.4f, \"min\": %.4f, \"max\": %.4f}", median(v.ratio_vs_off),
                  *std::min_element(v.ratio_vs_off.begin(), v.ratio_vs_off.end()),
                  *std::max_element(v.ratio_vs_off.begin(), v.ratio_vs_off.end())) +
              fmt(", \"ratio_vs_plain_on\": {\"median\": %.4f, \"min\": %.4f, \"max\": %.4f}", median(v.ratio_vs_on),
                  *std::min_element(v.ratio_vs_on.begin(), v.ratio_vs_on.end()),
                  *std::max_element(v.ratio_vs_on.begin(), v.ratio_vs_on.end()));
    json += "}";
  }
  json += "\n]\n";
  std::printf("\n%s", md.c_str());
  if (!args.json_path.empty()) std::ofstream(args.json_path) << json;
  if (!args.markdown_path.empty()) std::ofstream(args.markdown_path) << md;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  if (args.exit_code >= 0) return args.exit_code;
  const std::size_t n = std::size_t{1} << args.log2_elements;
  const std::vector<std::size_t> matrix{n / 1024, 1024};
  const std::vector<float> in = inputs(n);
  std::vector<float> out(n);
  const emu::QuantizeSpec e4m3{formats::parse_format("fp8-e4m3")};
  emu::Counters plain_counters;
  emu::BlockCounters block_counters;
  auto block = [&](const char* name, int axis = -1, bool stochastic = false) {
    return [&, name, axis, stochastic] {
      emu::BlockQuantizeOptions o;
      if (stochastic) o.rounding = formats::Rounding::stochastic;
      block_counters += emu::block_quantize(in, matrix, axis, *emu::find_block_scheme(name), o).counters;
    };
  };
  std::vector<Variant> vs = {
      {"plain fp8-e4m3, counters off", [&] { emu::quantize(in, out, e4m3); }},
      {"plain fp8-e4m3, counters on", [&] { emu::quantize(in, out, e4m3, &plain_counters); }},
      {"mxfp8-e4m3 (rceil)", block("mxfp8-e4m3"), true},
      {"nvfp4", block("nvfp4"), true},
      {"mxfp4 (rceil)", block("mxfp4"), true},
      {"fp8-tile1x128", block("fp8-tile1x128"), true},
      {"fp8-block128x128", block("fp8-block128x128"), true},
      {"mxfp8-e4m3 along axis 0 (strided blocks)", block("mxfp8-e4m3", 0), true},
      {"mxfp8-e4m3, stochastic rounding", block("mxfp8-e4m3", -1, true), true},
      {"nvfp4, stochastic rounding", block("nvfp4", -1, true), true},
  };
  for (int r = 0; r < args.rounds; ++r) {
    for (Variant& v : vs) v.secs.push_back(seconds(v.run));
    for (Variant& v : vs) {
      if (!v.is_block) continue;
      v.ratio_vs_off.push_back(vs[0].secs.back() / v.secs.back());
      v.ratio_vs_on.push_back(vs[1].secs.back() / v.secs.back());
    }
    std::printf("round %d:", r + 1);
    for (const Variant& v : vs) std::printf(" %.1f", static_cast<double>(n) / v.secs.back() / 1e6);
    std::printf(" Melem/s\n");
  }
  std::printf("(elements counted: plain %llu, block %llu)\n", static_cast<unsigned long long>(plain_counters.elements),
              static_cast<unsigned long long>(block_counters.elements));
  report(vs, n, args.rounds, args);
  return 0;
}
