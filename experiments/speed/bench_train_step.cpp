// One training step of the CNN: on the emulator under o2
// with every recorder on, and with the recorders off, against the same step
// on the Eigen FP32 reference, in one run; reported as time ratios.
//
//   build/experiments/bench_train_step [--markdown FILE] [Google Benchmark options]
//
// Each benchmark builds its Trainer once (synthetic data, seed 1, batch 64,
// SGD with momentum; the torch scaler for o2) and times Trainer::step(),
// which includes the cast of the master weights, forward, loss, backward,
// unscale, the scaler and the optimizer. "Recorders on" means a per-tensor
// record of every stored tensor, weight and update at every step, with
// histograms (what `mpverify train` writes by default); "off" means no
// observer at all. Both sides run on one thread.
#include <cstdio>
#include <fstream>
#include <string>

#include "speed/bench_support.h"
#include "speed/training_steps.h"
#include "training/trainer.h"

namespace {

using mpverify::training::TrainConfig;

TrainConfig cnn(const char* recipe, const char* scaler, mpverify::nn::BackendKind backend, bool recorders) {
  TrainConfig c;
  c.model = "cnn";
  c.train_size = 1024;
  c.batch_size = 64;
  c.seed = 1;
  c.recipe = recipe;
  c.scaler = scaler;
  c.backend = backend;
  c.recorders = recorders;
  c.record_every = 1;
  c.histograms = true;
  return c;
}

void run_steps(benchmark::State& state, const TrainConfig& config) { mpverify::bench::time_training_steps(state, config); }

void BM_RefFp32Step(benchmark::State& s) { run_steps(s, cnn("fp32", "none", mpverify::nn::BackendKind::ref, false)); }
void BM_EmuO2StepRecordersOn(benchmark::State& s) {
  run_steps(s, cnn("o2", "torch", mpverify::nn::BackendKind::emu, true));
}
void BM_EmuO2StepRecordersOff(benchmark::State& s) {
  run_steps(s, cnn("o2", "torch", mpverify::nn::BackendKind::emu, false));
}

BENCHMARK(BM_RefFp32Step)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_EmuO2StepRecordersOn)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_EmuO2StepRecordersOff)->Unit(benchmark::kMillisecond)->MinTime(2.0);

class RatioReporter : public mpverify::bench::TimeReporter {
 public:
  std::string markdown() const {
    std::string s =
        "## Speed: one CNN training step, emulated o2 against the Eigen FP32 reference (one thread)\n\n"
        "Command: `build/experiments/bench_train_step` (synthetic 28x28 digits, batch 64, seed 1; the CNN of\n"
        "src/nn/models.h; SGD with momentum). A step is Trainer::step(): cast, forward, loss, backward,\n"
        "unscale, scaler, optimizer. Ratio = time / time of the fp32 step on the ref backend in the same run.\n"
        "The ref backend is the library's Eigen, built for the portable x86-64 baseline (SSE2), while the\n"
        "emulator picks AVX-512 kernels at run time (see the GEMM table for what a native Eigen gains).\n\n"
        "| step | ms | time ratio vs ref | goal |\n|---|---:|---:|---|\n";
    const auto base = seconds_.find("BM_RefFp32Step");
    if (base == seconds_.end()) return s;
    auto row = [&](const char* name, const char* what, const char* goal) {
      const auto it = seconds_.find(name);
      if (it == seconds_.end()) return;
      char buf[320];
      std::snprintf(buf, sizeof buf, "| %s | %.1f | %.2fx | %s |\n", what, it->second * 1e3,
                    it->second / base->second, goal);
      s += buf;
    };
    row("BM_RefFp32Step", "ref, fp32 (baseline)", "");
    row("BM_EmuO2StepRecordersOn", "emu, o2 + torch scaler, all recorders on", "<= 2.5x");
    row("BM_EmuO2StepRecordersOff", "emu, o2 + torch scaler, recorders off", "<= 1.5x");
    return s;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const auto args = mpverify::bench::parse_bench_args(
      argc, argv, "bench_train_step [--markdown FILE] [Google Benchmark options]");
  if (args.exit_code >= 0) return args.exit_code;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  if (!args.markdown_path.empty()) std::ofstream(args.markdown_path) << reporter.markdown();
  benchmark::Shutdown();
  return 0;
}
