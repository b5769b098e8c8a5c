// Speed of the emulated conv2d forward (fp16 inputs, counters on) against the
// Eigen FP32 reference (refs::conv2d_forward_ref: im2col + SGEMM) in the same
// run, one thread, on two ResNet-like layers; and against the same algorithm
// built with -march=native (eigen_native_conv2d.cpp), the fair baseline for
// an emulator that picks AVX-512 kernels at run time.
//
//   build/experiments/bench_conv [--markdown FILE] [Google Benchmark options]
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "emu/conv2d_emu.h"
#include "refs/conv2d_ref.h"
#include "speed/bench_support.h"

namespace mpverify::bench {
void eigen_native_conv2d_forward(int n, int c, int h, int w, int k, int r, int s, int stride, int pad,
                                 const float* x, const float* weight, float* y);
}

namespace {

using namespace mpverify;

void native_conv2d(const ops::Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w,
                   std::vector<float>& y) {
  bench::eigen_native_conv2d_forward(s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride, s.pad, x.data(), w.data(),
                                     y.data());
}

struct Layer {
  const char* label;
  ops::Conv2dShape shape;
};

// 0: a 3x3 layer of a ResNet stage at 28x28; 1: a strided 3x3 layer that halves 56x56.
const Layer kLayers[] = {
    {"n=8 c=64 h=w=28 k=64 r=s=3 pad=1", {8, 64, 28, 28, 64, 3, 3, 1, 1}},
    {"n=8 c=64 h=w=56 k=128 r=s=3 stride=2 pad=1", {8, 64, 56, 56, 128, 3, 3, 2, 1}},
};

struct Inputs {
  std::vector<float> x, w;
};

const Inputs& inputs(int layer) {
  static std::map<int, Inputs> cache;
  auto it = cache.find(layer);
  if (it == cache.end()) {
    const auto& s = kLayers[layer].shape;
    std::mt19937_64 rng(42);
    std::normal_distribution<double> normal;
    Inputs in{std::vector<float>(s.x_size()), std::vector<float>(s.weight_size())};
    for (auto& v : in.x) v = static_cast<float>(normal(rng));
    for (auto& v : in.w) v = static_cast<float>(normal(rng));
    it = cache.emplace(layer, std::move(in)).first;
  }
  return it->second;
}

void BM_EigenConv2d(benchmark::State& state) {
  const int layer = static_cast<int>(state.range(0));
  const auto& s = kLayers[layer].shape;
  const auto& in = inputs(layer);
  std::vector<float> y(s.y_size());
  for (auto _ : state) {
    refs::conv2d_forward_ref(s, in.x, in.w, y);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(kLayers[layer].label);
}

void BM_EigenNativeConv2d(benchmark::State& state) {
  const int layer = static_cast<int>(state.range(0));
  const auto& s = kLayers[layer].shape;
  const auto& in = inputs(layer);
  std::vector<float> y(s.y_size());
  for (auto _ : state) {
    native_conv2d(s, in.x, in.w, y);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(kLayers[layer].label);
}

// The native baseline must compute the reference's convolution: the same
// im2col and the same products, summed in another order by another SGEMM
// kernel. Each side is within gamma_crs sum|w||x| of the exact result per
// element (Higham, eq. 3.5; gamma_crs ~ crs 2^-24), so normwise
// ||y_native - y_ref|| / ||y|| <= 2 crs 2^-24 ||sum|w||x||| / ||y||. With
// normal(0,1) data, sum|w||x| ~ crs (2/pi) and |y| ~ sqrt(crs), a ratio of
// (2/pi) sqrt(crs); the bound takes 2 sqrt(crs) (a margin of 3 for the
// sampling): 2 crs 2^-24 2 sqrt(crs), about 3.3e-3 for crs = 576. A correct
// kernel gives about 1e-7, a wrong one order 1.
bool native_baseline_matches_reference() {
  bool ok = true;
  for (int layer = 0; layer < 2; ++layer) {
    const auto& s = kLayers[layer].shape;
    const auto& in = inputs(layer);
    std::vector<float> y_ref(s.y_size()), y_native(s.y_size());
    refs::conv2d_forward_ref(s, in.x, in.w, y_ref);
    native_conv2d(s, in.x, in.w, y_native);
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < y_ref.size(); ++i) {
      diff += (static_cast<double>(y_native[i]) - y_ref[i]) * (static_cast<double>(y_native[i]) - y_ref[i]);
      norm += static_cast<double>(y_ref[i]) * y_ref[i];
    }
    const double crs = static_cast<double>(s.forward_terms());
    const double bound = 2 * crs * std::ldexp(1.0, -24) * std::sqrt(crs) * 2;
    const double relative = std::sqrt(diff / norm);
    std::fprintf(stderr, "check native conv2d baseline, layer %d: normwise difference %.3g (bound %.3g)\n", layer,
                 relative, bound);
    ok = ok && norm > 0 && relative <= bound;
  }
  return ok;
}

void emulated(benchmark::State& state, emu::Accumulation acc) {
  const int layer = static_cast<int>(state.range(0));
  const auto& s = kLayers[layer].shape;
  const auto& in = inputs(layer);
  std::vector<float> y(s.y_size());
  emu::GemmPolicy policy;
  policy.accumulation = acc;
  for (auto _ : state) {
    emu::CounterSet counters;  // counters on
    emu::conv2d_forward_emu(s, in.x, in.w, y, policy, &counters);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(kLayers[layer].label);
}

void BM_EmuConv2dFp16InFp32Acc(benchmark::State& s) { emulated(s, emu::Accumulation::fp32); }
void BM_EmuConv2dFp16InFp16Acc(benchmark::State& s) { emulated(s, emu::Accumulation::fp16); }

BENCHMARK(BM_EigenConv2d)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EigenNativeConv2d)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmuConv2dFp16InFp32Acc)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmuConv2dFp16InFp16Acc)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

class RatioReporter : public bench::TimeReporter {
 public:
  std::string markdown() const {
    std::string s =
        "## Speed: emulated conv2d forward against Eigen FP32 (one thread, counters on)\n\n"
        "Command: `build/experiments/bench_conv` (normal(0,1) inputs, seed 42; the emulator rounds the inputs\n"
        "to fp16 and counts every rounding; every side builds an im2col matrix per image). Ratio = time / time\n"
        "of an Eigen convolution on the same layer in the same run: the library's `refs::conv2d_forward_ref`,\n"
        "built like the whole library for the portable x86-64 baseline (SSE2), and the same im2col + SGEMM\n"
        "built with `-march=native` for this CPU (checked against the reference before timing). As for the\n"
        "GEMM, the second ratio is the fair one and the goals are read against it.\n\n"
        "| conv2d forward | layer | ms | ratio vs Eigen (x86-64 baseline) | ratio vs Eigen (-march=native) | goal |\n"
        "|---|---|---:|---:|---:|---|\n";
    for (int layer = 0; layer < 2; ++layer) {
      std::string arg = "/";  // appended piecewise: GCC 12 warns (falsely, -Wrestrict) on "literal" + std::string
      arg += std::to_string(layer);
      const auto base = seconds_.find("BM_EigenConv2d" + arg);
      const auto native = seconds_.find("BM_EigenNativeConv2d" + arg);
      if (base == seconds_.end() || native == seconds_.end()) continue;
      auto row = [&](const char* name, const char* what, const char* goal) {
        const auto it = seconds_.find(std::string(name) + arg);
        if (it == seconds_.end()) return;
        char buf[320];
        std::snprintf(buf, sizeof buf, "| %s | %s | %.1f | %.2fx | %.2fx | %s |\n", what, kLayers[layer].label,
                      it->second * 1e3, it->second / base->second, it->second / native->second, goal);
        s += buf;
      };
      row("BM_EigenConv2d", "Eigen FP32, x86-64 baseline build (refs::conv2d_forward_ref)", "");
      row("BM_EigenNativeConv2d", "Eigen FP32, -march=native build", "");
      row("BM_EmuConv2dFp16InFp32Acc", "emulated fp16 in, fp32 accumulation", "<= 1.5x");
      row("BM_EmuConv2dFp16InFp16Acc", "emulated fp16 in, fp16 accumulation", "<= 4x");
    }
    return s;
  }

};

}  // namespace

int main(int argc, char** argv) {
  const auto args = mpverify::bench::parse_bench_args(argc, argv, "bench_conv [--markdown FILE] [Google Benchmark options]");
  if (args.exit_code >= 0) return args.exit_code;
  const std::string markdown_path = args.markdown_path;
  if (!native_baseline_matches_reference()) {
    std::fprintf(stderr, "bench_conv: the -march=native baseline does not compute the reference's convolution\n");
    return 1;
  }
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  if (!markdown_path.empty()) std::ofstream(markdown_path) << reporter.markdown();
  benchmark::Shutdown();
  return 0;
}
