// Speed of float -> fp16 array rounding, as ratios against the plain F16C
// instruction loop measured in the same run (one thread).
//
//   build/experiments/bench_quantize [--benchmark_min_time=0.5] [--json FILE]
//
// Inputs: 2^24 floats with magnitudes log-uniform in [2^-27, 2^16) and random
// signs (so underflow, subnormal and overflow paths all occur), seed 42.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "speed/bench_support.h"

namespace {

using namespace mpverify;

const std::vector<float>& inputs() {
  static const std::vector<float> data = [] {
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> log2_magnitude(-27.0, 16.0);
    std::vector<float> v(std::size_t{1} << 24);
    for (auto& x : v) x = static_cast<float>(std::exp2(log2_magnitude(rng)) * ((rng() & 1) ? -1.0 : 1.0));
    return v;
  }();
  return data;
}

const formats::Format& fp16() {
  static const formats::Format f = formats::parse_format("fp16");
  return f;
}

void set_items(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(inputs().size()));
}

// The baseline: nothing but the 8-wide conversion instruction.
__attribute__((target("avx2,f16c"))) void f16c_loop(const float* in, std::uint16_t* out, std::size_t n) {
  for (std::size_t i = 0; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
}

void BM_F16cInstructionLoop(benchmark::State& state) {
  std::vector<std::uint16_t> out(inputs().size());
  for (auto _ : state) {
    f16c_loop(inputs().data(), out.data(), inputs().size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_items(state);
}

void encode_bench(benchmark::State& state, emu::SimdPath path, bool counters_on) {
  if (!emu::path_available(path)) {
    state.SkipWithError("path not available on this CPU");
    return;
  }
  std::vector<std::uint16_t> out(inputs().size());
  const emu::QuantizeSpec spec{fp16()};
  emu::Counters counters;
  for (auto _ : state) {
    emu::encode(inputs(), out, spec, counters_on ? &counters : nullptr, path);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(counters);
  set_items(state);
}

void BM_EncodeCountersOff(benchmark::State& s) { encode_bench(s, emu::SimdPath::automatic, false); }
void BM_EncodeCountersOn(benchmark::State& s) { encode_bench(s, emu::SimdPath::automatic, true); }
void BM_EncodeAvx2CountersOn(benchmark::State& s) { encode_bench(s, emu::SimdPath::avx2_f16c, true); }
void BM_EncodePortableCountersOn(benchmark::State& s) { encode_bench(s, emu::SimdPath::portable, true); }

// The classic scalar bit-twiddling conversion (round to nearest even, with
// subnormals), the way it is written by hand without F16C.
std::uint16_t float_to_half_bits(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u | ((magnitude >> 13) & 0x3ffu) : 0u));
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to >= 65536
  if (magnitude < 0x38800000u) {                                                      // below 2^-14: subnormal
    if (magnitude < 0x33000000u) return static_cast<std::uint16_t>(sign);             // below 2^-25
    const std::uint32_t shift = 126u - (magnitude >> 23);  // value / 2^-24 = significand >> (126 - E)
    const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const std::uint32_t kept = significand >> shift;
    const std::uint32_t rest = significand & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    return static_cast<std::uint16_t>(sign | (kept + (rest > half || (rest == half && (kept & 1u)))));
  }
  const std::uint32_t rebiased = magnitude - 0x38000000u;  // exponent bias 127 -> 15
  const std::uint32_t rounded = rebiased + 0xfffu + ((rebiased >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

void BM_ScalarBitTwiddling(benchmark::State& state) {
  std::vector<std::uint16_t> out(inputs().size());
  const auto& in = inputs();
  for (auto _ : state) {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = float_to_half_bits(in[i]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_items(state);
}

void BM_ScalarEmulator(benchmark::State& state) {
  std::vector<std::uint16_t> out(inputs().size());
  const auto& in = inputs();
  for (auto _ : state) {
    for (std::size_t i = 0; i < in.size(); ++i) {
      formats::Flags flags;
      out[i] = static_cast<std::uint16_t>(formats::from_float(fp16(), in[i], {}, flags));
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_items(state);
}

BENCHMARK(BM_F16cInstructionLoop)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeCountersOff)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeCountersOn)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeAvx2CountersOn)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodePortableCountersOn)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ScalarBitTwiddling)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ScalarEmulator)->Unit(benchmark::kMillisecond);

// Prints the usual table, then each benchmark's throughput as a ratio to the
// F16C loop of the same run.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const auto it = r.counters.find("items_per_second");
      if (it != r.counters.end()) rate_[r.benchmark_name()] = it->second.value;
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    const double base = rate_["BM_F16cInstructionLoop"];
    std::printf("\n%-32s %14s %22s\n", "benchmark", "Melem/s", "F16C loop time ratio");
    nlohmann_like_.clear();
    for (const auto& [name, rate] : rate_) {
      const double ratio = base / rate;  // > 1: slower than the F16C loop by that factor
      std::printf("%-32s %14.1f %21.2fx\n", name.c_str(), rate / 1e6, ratio);
      nlohmann_like_ += (nlohmann_like_.empty() ? "" : ",\n") + std::string("  {\"benchmark\": \"") + name +
                        "\", \"melem_per_s\": " + std::to_string(rate / 1e6) +
                        ", \"time_ratio_vs_f16c_loop\": " + std::to_string(ratio) + "}";
    }
  }
  std::string json() const { return "[\n" + nlohmann_like_ + "\n]\n"; }

  // The report section: each path as a ratio to the F16C loop, with the goals.
  std::string markdown() const {
    const double base = rate_.at("BM_F16cInstructionLoop");
    auto row = [&](const char* name, const char* what, const char* goal) {
      const auto it = rate_.find(name);
      if (it == rate_.end()) return std::string("| ") + what + " | not run on this CPU | | " + goal + " |\n";
      char buf[256];
      std::snprintf(buf, sizeof buf, "| %s | %.0f | %.2fx | %s |\n", what, it->second / 1e6, base / it->second, goal);
      return std::string(buf);
    };
    std::string s =
        "## Speed: float -> fp16 array rounding (one thread)\n\n"
        "Command: `build/experiments/bench_quantize --benchmark_min_time=0.5` (2^24 floats, magnitudes\n"
        "log-uniform in [2^-27, 2^16), seed 42). Time ratio = time per element / time per element of the\n"
        "plain F16C instruction loop measured in the same run (1.00x = as fast as the bare instruction).\n"
        "Absolute rates depend on the machine and its load; the ratios are the result.\n\n"
        "| path | Melem/s | time ratio vs F16C loop | goal |\n|---|---:|---:|---|\n";
    s += row("BM_F16cInstructionLoop", "F16C instruction loop (baseline)", "");
    s += row("BM_EncodeCountersOff", "mpverify encode, counters off (automatic path)", "<= 1.5x");
    s += row("BM_EncodeCountersOn", "mpverify encode, counters on (automatic path)", "<= 3x");
    s += row("BM_EncodeAvx2CountersOn", "mpverify encode, counters on, AVX2+F16C path", "");
    s += row("BM_EncodePortableCountersOn", "mpverify encode, counters on, portable path", "");
    s += row("BM_ScalarBitTwiddling", "scalar bit-twiddling loop (hand-written conversion)", "far behind");
    s += row("BM_ScalarEmulator", "scalar emulator (formats::from_float per element)", "far behind");
    return s;
  }

 private:
  std::map<std::string, double> rate_;
  std::string nlohmann_like_;
};

}  // namespace

int main(int argc, char** argv) {
  const auto args = mpverify::bench::parse_bench_args(argc, argv, "bench_quantize [--json FILE] [--markdown FILE] [Google Benchmark options]\n"
                                              "Times float -> fp16 array rounding against the F16C instruction loop (ratios).", true);
  if (args.exit_code >= 0) return args.exit_code;
  const std::string markdown_path = args.markdown_path;
  const std::string json_path = args.json_path;
  // Like llm.c's kernel mains: check every candidate against the F16C loop
  // before timing anything.
  const auto& in = inputs();
  std::vector<std::uint16_t> truth(in.size()), got(in.size());
  f16c_loop(in.data(), truth.data(), in.size());
  auto check = [&](const char* name) {
    std::size_t bad = 0;
    for (std::size_t i = 0; i < in.size(); ++i) bad += got[i] != truth[i];
    std::printf("check %-28s %zu mismatches of %zu\n", name, bad, in.size());
    return bad == 0;
  };
  bool ok = true;
  for (std::size_t i = 0; i < in.size(); ++i) got[i] = float_to_half_bits(in[i]);
  ok &= check("scalar bit-twiddling");
  for (std::size_t i = 0; i < in.size(); ++i) {
    formats::Flags flags;
    got[i] = static_cast<std::uint16_t>(formats::from_float(fp16(), in[i], {}, flags));
  }
  ok &= check("scalar emulator");
  for (auto path : {emu::SimdPath::portable, emu::SimdPath::avx2_f16c, emu::SimdPath::avx512}) {
    if (!emu::path_available(path)) continue;
    emu::Counters counters;
    emu::encode(in, got, emu::QuantizeSpec{fp16()}, &counters, path);
    ok &= check(std::string(emu::to_string(path)).c_str());
  }
  if (!ok) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  if (!json_path.empty()) std::ofstream(json_path) << reporter.json();
  if (!markdown_path.empty()) std::ofstream(markdown_path) << reporter.markdown();
  benchmark::Shutdown();
  return 0;
}
