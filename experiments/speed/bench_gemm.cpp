// Speed of the emulated GEMM against Eigen's FP32 GEMM in the same run, one
// thread, at 512^3 and 1024^3: against refs::gemm_ref (built for the portable
// x86-64 baseline, like the whole library) and against the same Eigen product
// built with -march=native (eigen_native_sgemm.cpp).
//
//   build/experiments/bench_gemm [--markdown FILE] [Google Benchmark options]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "emu/gemm_emu.h"
#include "emu/mma_gemm_simd.h"
#include "emu/mma_presets.h"
#include "emu/quantize.h"
#include "refs/gemm_ref.h"
#include "speed/bench_support.h"

namespace mpverify::bench {
void eigen_native_sgemm(int n, const float* a, const float* b, float* c);
}

namespace {

using namespace mpverify;

struct Inputs {
  std::vector<float> a, b;
};

const Inputs& inputs(int n) {
  static std::map<int, Inputs> cache;
  auto it = cache.find(n);
  if (it == cache.end()) {
    std::mt19937_64 rng(42);
    std::normal_distribution<double> normal;
    Inputs in{std::vector<float>(static_cast<std::size_t>(n) * n), std::vector<float>(static_cast<std::size_t>(n) * n)};
    for (auto& x : in.a) x = static_cast<float>(normal(rng));
    for (auto& x : in.b) x = static_cast<float>(normal(rng));
    it = cache.emplace(n, std::move(in)).first;
  }
  return it->second;
}

void BM_EigenSgemm(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const auto& in = inputs(n);
  std::vector<float> c(static_cast<std::size_t>(n) * n);
  for (auto _ : state) {
    refs::gemm_ref({n, n, n}, in.a, in.b, c);
    benchmark::DoNotOptimize(c.data());
  }
}

void BM_EigenSgemmNative(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const auto& in = inputs(n);
  std::vector<float> c(static_cast<std::size_t>(n) * n);
  for (auto _ : state) {
    bench::eigen_native_sgemm(n, in.a.data(), in.b.data(), c.data());
    benchmark::DoNotOptimize(c.data());
  }
}

void emulated(benchmark::State& state, emu::Accumulation acc, bool counting = true, bool step_inexact = false) {
  const int n = static_cast<int>(state.range(0));
  const auto& in = inputs(n);
  std::vector<float> c(static_cast<std::size_t>(n) * n);
  emu::GemmPolicy policy;
  policy.accumulation = acc;
  policy.count_step_inexact = step_inexact;
  for (auto _ : state) {
    emu::CounterSet counters;
    emu::gemm_emu({n, n, n}, in.a, in.b, c, policy, counting ? &counters : nullptr);
    benchmark::DoNotOptimize(c.data());
  }
}

// The tensor-core instruction model of an architecture (Accumulation::mma: emu/mma_gemm.h), counters on;
// path forces the vector kernel (the AVX2 one on a CPU that would choose AVX-512), else the CPU's choice.
void emulated_mma(benchmark::State& state, const char* input, const char* arch,
                  emu::detail::MmaPath path = emu::detail::MmaPath::automatic) {
  if (!emu::detail::mma_path_available(path)) {
    state.SkipWithError("this CPU lacks the forced kernel");
    return;
  }
  struct Forced {  // restored after the run, whatever the next benchmark is
    emu::detail::MmaPath previous;
    ~Forced() { emu::detail::force_mma_path(previous); }
  } forced{emu::detail::force_mma_path(path)};
  const int n = static_cast<int>(state.range(0));
  const auto& in = inputs(n);
  std::vector<float> c(static_cast<std::size_t>(n) * n);
  emu::GemmPolicy policy;
  policy.input = formats::parse_format(input);
  policy.accumulation = emu::Accumulation::mma;
  policy.mma = emu::mma_for_architecture(arch, policy.input, policy.input, formats::parse_format("fp32"));
  for (auto _ : state) {
    emu::CounterSet counters;
    emu::gemm_emu({n, n, n}, in.a, in.b, c, policy, &counters);
    benchmark::DoNotOptimize(c.data());
  }
}

void BM_EmuFp16InFp32Acc(benchmark::State& s) { emulated(s, emu::Accumulation::fp32); }
// What the counting costs: the same GEMM with counters off (not the goal's measure).
void BM_EmuFp16InFp32AccUncounted(benchmark::State& s) { emulated(s, emu::Accumulation::fp32, false); }
// The same, counters on and each step's inexact counted too (GemmPolicy::count_step_inexact: two more FMAs).
void BM_EmuFp16InFp32AccStepInexact(benchmark::State& s) { emulated(s, emu::Accumulation::fp32, true, true); }
void BM_EmuMmaHopperFp16(benchmark::State& s) { emulated_mma(s, "fp16", "hopper"); }
void BM_EmuMmaHopperBf16(benchmark::State& s) { emulated_mma(s, "bf16", "hopper"); }
void BM_EmuMmaAmpereFp16(benchmark::State& s) { emulated_mma(s, "fp16", "ampere"); }
// The AVX2 kernel, forced: what a CPU without AVX-512 gets (the same bits and counts).
void BM_EmuMmaHopperFp16Avx2(benchmark::State& s) { emulated_mma(s, "fp16", "hopper", emu::detail::MmaPath::avx2); }
void BM_EmuMmaHopperBf16Avx2(benchmark::State& s) { emulated_mma(s, "bf16", "hopper", emu::detail::MmaPath::avx2); }
void BM_EmuMmaAmpereFp16Avx2(benchmark::State& s) { emulated_mma(s, "fp16", "ampere", emu::detail::MmaPath::avx2); }
void BM_EmuFp16InFp16Acc(benchmark::State& s) { emulated(s, emu::Accumulation::fp16); }
// What the counting costs: the same GEMM with counters off (not the goal's measure).
void BM_EmuFp16InFp16AccUncounted(benchmark::State& s) { emulated(s, emu::Accumulation::fp16, false); }
void BM_EmuTensorCoreModel(benchmark::State& s) { emulated(s, emu::Accumulation::tensor_core); }

BENCHMARK(BM_EigenSgemm)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EigenSgemmNative)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmuFp16InFp32Acc)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmuFp16InFp32AccUncounted)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmuFp16InFp32AccStepInexact)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmuFp16InFp16Acc)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmuFp16InFp16AccUncounted)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmuTensorCoreModel)->Arg(512)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_EmuMmaHopperFp16)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmuMmaHopperBf16)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmuMmaAmpereFp16)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmuMmaHopperFp16Avx2)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmuMmaHopperBf16Avx2)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmuMmaAmpereFp16Avx2)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);

class RatioReporter : public bench::TimeReporter {
 public:
  std::string markdown() const {
    std::string s =
        "## Speed: emulated GEMM against Eigen's FP32 GEMM (one thread, counters on unless a row says off)\n\n"
        "Command: `build/experiments/bench_gemm` (normal(0,1) inputs, seed 42; the emulated GEMM rounds the\n"
        "inputs to fp16 and counts every rounding). Ratio = time / time of an Eigen SGEMM at the same size in\n"
        "the same run: the library's `refs::gemm_ref`, built like the whole library for the portable x86-64\n"
        "baseline (SSE2), and the same Eigen product built with `-march=native` for this CPU. The emulator\n"
        "chooses its AVX-512 kernels at run time, so the second ratio is the fair one; the goals are read\n"
        "against it.\n\n"
        "| GEMM | n | ms | ratio vs Eigen (x86-64 baseline) | ratio vs Eigen (-march=native) | goal |\n"
        "|---|---:|---:|---:|---:|---|\n";
    for (int n : {512, 1024}) {
      const auto base = seconds_.find("BM_EigenSgemm/" + std::to_string(n));
      const auto native = seconds_.find("BM_EigenSgemmNative/" + std::to_string(n));
      if (base == seconds_.end() || native == seconds_.end()) continue;
      auto row = [&](const char* name, const char* what, const char* goal) {
        const auto it = seconds_.find(std::string(name) + "/" + std::to_string(n));
        if (it == seconds_.end()) return;
        char buf[320];
        std::snprintf(buf, sizeof buf, "| %s | %d | %.1f | %.2fx | %.2fx | %s |\n", what, n, it->second * 1e3,
                      it->second / base->second, it->second / native->second, goal);
        s += buf;
      };
      row("BM_EigenSgemm", "Eigen FP32, x86-64 baseline build (refs::gemm_ref)", "");
      row("BM_EigenSgemmNative", "Eigen FP32, -march=native build", "");
      row("BM_EmuFp16InFp32Acc", "emulated fp16 in, fp32 accumulation (every step's lost update counted)",
          "<= 1.5x (set before the steps were counted)");
      row("BM_EmuFp16InFp32AccUncounted", "the same, counters off (what counting costs)", "");
      row("BM_EmuFp16InFp32AccStepInexact", "the same, each step's inexact counted too (step-inexact=1)", "");
      row("BM_EmuFp16InFp16Acc", "emulated fp16 in, fp16 accumulation", "<= 4x");
      row("BM_EmuFp16InFp16AccUncounted", "the same, counters off (what counting costs)", "");
      row("BM_EmuTensorCoreModel", "emulated tensor-core model (scalar)", "");
    }
    return s + step_inexact_markdown() + mma_markdown();
  }

  // What counting each fp32 step's inexact costs, against the counted and uncounted fp32 GEMM of the run.
  std::string step_inexact_markdown() const {
    std::string s =
        "\n## Speed: fp32 accumulation counting each step's inexact (GemmPolicy::count_step_inexact)\n\n"
        "Same inputs. Ratio = time / time of \"emulated fp16 in, fp32 accumulation\" at the same size in the\n"
        "same run, counted as by default (inexact not counted), and with counters off.\n\n"
        "| GEMM | n | ms | ratio vs emulated fp32 accumulation | the same, vs its counters off |\n"
        "|---|---:|---:|---:|---:|\n";
    for (int n : {512, 1024}) {
      const auto base = seconds_.find("BM_EmuFp16InFp32Acc/" + std::to_string(n));
      const auto uncounted = seconds_.find("BM_EmuFp16InFp32AccUncounted/" + std::to_string(n));
      const auto it = seconds_.find("BM_EmuFp16InFp32AccStepInexact/" + std::to_string(n));
      if (base == seconds_.end() || uncounted == seconds_.end() || it == seconds_.end()) continue;
      char buf[320];
      std::snprintf(buf, sizeof buf, "| fp16 in, fp32 accumulation, step-inexact=1 | %d | %.1f | %.2fx | %.2fx |\n", n,
                    it->second * 1e3, it->second / base->second, it->second / uncounted->second);
      s += buf;
    }
    return s;
  }

  // The instruction models against the fp32-accumulation emulated GEMM of the same run and size.
  std::string mma_markdown() const {
    std::string s =
        "\n## Speed: tensor-core instruction models against the fp32-accumulation emulated GEMM\n\n"
        "Same inputs, counters on; the model is the architecture's GEMM instruction for the input format\n"
        "with an fp32 accumulator (`emu::mma_for_architecture`). Ratio = time / time of \"emulated fp16 in,\n"
        "fp32 accumulation\" at the same size in the same run, counting its steps (the goal's measure) and\n"
        "with counters off (the fp32 GEMM's cost before it counted its steps, for a fair reading). The\n"
        "instruction models run the AVX-512 kernel where the CPU has it; the rows marked AVX2 force the AVX2\n"
        "kernel, which a CPU without AVX-512 chooses (the same bits and counts).\n\n"
        "| GEMM | n | ms | ratio vs emulated fp32 accumulation | the same, vs its counters off | goal |\n"
        "|---|---:|---:|---:|---:|---|\n";
    for (int n : {512, 1024}) {
      const auto base = seconds_.find("BM_EmuFp16InFp32Acc/" + std::to_string(n));
      const auto uncounted = seconds_.find("BM_EmuFp16InFp32AccUncounted/" + std::to_string(n));
      if (base == seconds_.end() || uncounted == seconds_.end()) continue;
      auto row = [&](const char* name, const char* what) {
        const auto it = seconds_.find(std::string(name) + "/" + std::to_string(n));
        if (it == seconds_.end()) return;
        char buf[320];
        std::snprintf(buf, sizeof buf, "| %s | %d | %.1f | %.2fx | %.2fx | <= 3x |\n", what, n, it->second * 1e3,
                      it->second / base->second, it->second / uncounted->second);
        s += buf;
      };
      row("BM_EmuMmaHopperFp16", "Hopper wgmma k16, fp16 in, fp32 accumulator");
      row("BM_EmuMmaHopperBf16", "Hopper wgmma k16, bf16 in, fp32 accumulator");
      row("BM_EmuMmaAmpereFp16", "Ampere mma k16 (two halves), fp16 in, fp32 accumulator");
      row("BM_EmuMmaHopperFp16Avx2", "Hopper wgmma k16, fp16 in, AVX2 kernel (forced)");
      row("BM_EmuMmaHopperBf16Avx2", "Hopper wgmma k16, bf16 in, AVX2 kernel (forced)");
      row("BM_EmuMmaAmpereFp16Avx2", "Ampere mma k16 (two halves), fp16 in, AVX2 kernel (forced)");
    }
    return s;
  }

};

}  // namespace

int main(int argc, char** argv) {
  const auto args = mpverify::bench::parse_bench_args(argc, argv, "bench_gemm [--markdown FILE] [Google Benchmark options]");
  if (args.exit_code >= 0) return args.exit_code;
  const std::string markdown_path = args.markdown_path;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  if (!markdown_path.empty()) std::ofstream(markdown_path) << reporter.markdown();
  benchmark::Shutdown();
  return 0;
}
