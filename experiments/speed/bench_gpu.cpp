// GPU speed, one run on one device: cuBLAS fp16 tensor-core GEMM (fp32
// accumulation) against the fp32 SIMT GEMM (CUBLAS_COMPUTE_32F_PEDANTIC, the
// baseline) at 8192^3, and the cost of the device counters + exponent
// histogram (gpu::tensor_counters_gpu) on the 8192 x 8192 fp32 output,
// relative to the fp16 GEMM. All data stays on the device; every time is
// measured with cudaEvents around the work (Google Benchmark's manual time),
// and the summary prints each ratio to the baseline of the same run.
//
//   build/experiments/bench_gpu [--markdown FILE] [Google Benchmark options]
//
// Without a usable device it prints "skipped: <reason>" and exits 0.
#include <benchmark/benchmark.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "emu/quantize.h"
#include "formats/format.h"
#include "gpu/check.h"
#include "gpu/device.h"
#include "gpu/device_buffer.h"
#include "gpu/gemm_gpu_device.h"
#include "gpu/tensor_counters_gpu.h"
#include "speed/bench_support.h"

namespace {

using namespace mpverify;
using gpu::GemmCompute;
using gpu::detail::DeviceBuffer;

constexpr int kN = 8192;
constexpr std::size_t kElements = static_cast<std::size_t>(kN) * kN;
constexpr double kGemmFlops = 2.0 * kN * static_cast<double>(kN) * kN;

// A and B as normal(0,1) floats (seed 42) and as their fp16 roundings, C as
// fp32; made once, on first use.
struct DeviceData {
  DeviceBuffer a32{kElements * 4}, b32{kElements * 4}, c32{kElements * 4};
  DeviceBuffer a16{kElements * 2}, b16{kElements * 2};
  gpu::DeviceGemm gemm;

  DeviceData() {
    std::mt19937_64 rng(42);
    std::normal_distribution<float> normal;
    std::vector<float> host(kElements);
    std::vector<std::uint16_t> half(kElements);
    const emu::QuantizeSpec fp16{formats::parse_format("fp16")};
    for (DeviceBuffer* pair : {&a32, &b32}) {
      for (auto& x : host) x = normal(rng);
      emu::encode(host, half, fp16);
      MPVERIFY_CUDA_CHECK(cudaMemcpy(pair->get(), host.data(), kElements * 4, cudaMemcpyHostToDevice));
      MPVERIFY_CUDA_CHECK(cudaMemcpy((pair == &a32 ? a16 : b16).get(), half.data(), kElements * 2,
                                     cudaMemcpyHostToDevice));
    }
  }
};

DeviceData& data() {
  static DeviceData d;
  return d;
}

class Events {
 public:
  Events() {
    MPVERIFY_CUDA_CHECK(cudaEventCreate(&start_));
    MPVERIFY_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~Events() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  // Seconds the device spent on what `work` enqueued (default stream).
  double seconds(const std::function<void()>& work) {
    MPVERIFY_CUDA_CHECK(cudaEventRecord(start_));
    work();
    MPVERIFY_CUDA_CHECK(cudaEventRecord(stop_));
    MPVERIFY_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    MPVERIFY_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return static_cast<double>(ms) / 1e3;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// Runs `work` once untimed (warm-up: cuBLAS picks its kernel), then timed.
void timed(benchmark::State& state, const std::function<void()>& work, double flops) {
  Events events;
  events.seconds(work);
  double total = 0;
  for (auto _ : state) {
    const double s = events.seconds(work);
    state.SetIterationTime(s);
    total += s;
  }
  if (flops > 0 && total > 0)
    state.counters["TFLOP/s"] = flops * static_cast<double>(state.iterations()) / total / 1e12;
}

// A CUDA or cuBLAS error (or no memory for the data) ends the benchmark with
// the message instead of the program.
template <typename Body>
void guarded(benchmark::State& state, Body body) {
  try {
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void gemm(benchmark::State& state, GemmCompute compute) {
  guarded(state, [&] {
    DeviceData& d = data();
    const bool fp16 = compute == GemmCompute::fp16_fp32_accumulate;
    const void* a = fp16 ? d.a16.get() : d.a32.get();
    const void* b = fp16 ? d.b16.get() : d.b32.get();
    timed(state, [&] { d.gemm.run({kN, kN, kN}, a, b, d.c32.get(), compute); }, kGemmFlops);
  });
}

void BM_Gemm8192_fp32_simt_BASELINE(benchmark::State& s) { gemm(s, GemmCompute::fp32_pedantic); }
void BM_Gemm8192_fp16_tensorcore_fp32acc(benchmark::State& s) { gemm(s, GemmCompute::fp16_fp32_accumulate); }

// Counters + histogram of rounding C (the fp16 GEMM's fp32 output) to a
// format: one pass over 8192^2 floats, totals copied back.
void counters(benchmark::State& state, const char* format) {
  guarded(state, [&] {
    DeviceData& d = data();
    const auto f = formats::parse_format(format);
    // C must hold the fp16 GEMM's output, not whatever ran last.
    d.gemm.run({kN, kN, kN}, d.a16.get(), d.b16.get(), d.c32.get(), GemmCompute::fp16_fp32_accumulate);
    gpu::TensorCounts last;
    timed(state, [&] { last = gpu::tensor_counters_gpu(d.c32.as<float>(), kElements, f); }, 0);
    state.counters["inexact"] = static_cast<double>(last.counters.inexact);
    state.counters["overflow"] = static_cast<double>(last.counters.overflow);
  });
}

void BM_Counters8192sq_fp16_with_histogram(benchmark::State& s) { counters(s, "fp16"); }
void BM_Counters8192sq_fp8e4m3_with_histogram(benchmark::State& s) { counters(s, "fp8-e4m3"); }

BENCHMARK(BM_Gemm8192_fp32_simt_BASELINE)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Gemm8192_fp16_tensorcore_fp32acc)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Counters8192sq_fp16_with_histogram)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Counters8192sq_fp8e4m3_with_histogram)->UseManualTime()->Unit(benchmark::kMillisecond);

// Prints, after the table, every time as a ratio to the baselines of this run.
class RatioReporter : public bench::TimeReporter {
 public:
  std::string summary() const {
    std::string s;
    auto line = [&](const char* what, const char* name, const char* base_name, const char* base_what) {
      const auto it = seconds_.find(name), base = seconds_.find(base_name);
      if (it == seconds_.end() || base == seconds_.end()) return;
      char buf[320];
      std::snprintf(buf, sizeof buf, "| %s | %.3f | %.4fx of %s |\n", what, it->second * 1e3,
                    it->second / base->second, base_what);
      s += buf;
    };
    const char* fp32 = "BM_Gemm8192_fp32_simt_BASELINE";
    const char* fp16 = "BM_Gemm8192_fp16_tensorcore_fp32acc";
    line("cuBLAS fp32 SIMT GEMM 8192^3 (CUBLAS_COMPUTE_32F_PEDANTIC)", fp32, fp32, "fp32 GEMM (baseline)");
    line("cuBLAS fp16 tensor-core GEMM 8192^3, fp32 accumulation", fp16, fp32, "fp32 GEMM (baseline)");
    line("device counters + histogram, fp16, on the 8192^2 output", "BM_Counters8192sq_fp16_with_histogram", fp16,
         "fp16 GEMM");
    line("device counters + histogram, fp8-e4m3, on the 8192^2 output", "BM_Counters8192sq_fp8e4m3_with_histogram",
         fp16, "fp16 GEMM");
    if (s.empty()) return s;
    return "| work | ms | time ratio |\n|---|---:|---|\n" + s;
  }

};

}  // namespace

int main(int argc, char** argv) {
  const auto args = mpverify::bench::parse_bench_args(argc, argv, "bench_gpu [--markdown FILE] [Google Benchmark options]");
  if (args.exit_code >= 0) return args.exit_code;
  const std::string markdown_path = args.markdown_path;
  if (const std::string reason = gpu::gpu_unavailable_reason(); !reason.empty()) {
    std::printf("skipped: %s\n", reason.c_str());
    return 0;
  }
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const std::string summary = reporter.summary();
  std::printf("\nRatios in this run (device times from cudaEvents):\n%s", summary.c_str());
  if (!markdown_path.empty()) {
    const gpu::DeviceInfo info = gpu::describe_device();
    std::ofstream(markdown_path) << "# GPU speed: cuBLAS GEMM 8192^3 and the device counters\n\n"
                                 << "Device: " << info.name << " (sm_" << info.compute_capability << "), driver "
                                 << info.driver_version << ", runtime " << info.runtime_version << ", cuBLAS "
                                 << info.cublas_version << ".\nCommand: `build/experiments/bench_gpu --markdown reports/gpu_bench.md` (part of "
                                    "`experiments/regenerate-reports`); normal(0,1) inputs, seed 42; times from cudaEvents.\n\n"
                                 << summary
                                 << "\nA counters row times the whole `gpu::tensor_counters_gpu` call as a user makes "
                                    "it: the counting kernels plus the call's own allocation of its totals, the "
                                    "copy of the totals back and that synchronisation; a framework that kept the "
                                    "totals buffer would pay less.\n";
  }
  benchmark::Shutdown();
  return 0;
}
