// The speed experiment's table: one CNN training step in mixed
// precision (o2 with the torch scaler) against the same step in fp32, over
// batch sizes and image sizes, in the shape of NVIDIA's GauGAN/SPADE table
// (batch size x resolution -> speed-up), plus the cost of the recorders.
//
//   build/experiments/bench_step_speedup --device cpu|gpu [--markdown FILE] [Google Benchmark options]
//
// --device gpu: both sides on the CUDA backend (fp32 recipe vs o2); the
//   ratio is fp32 time / o2 time, a speed-up. Without a usable device it
//   prints "skipped: <reason>", writes that into the Markdown, and exits 0.
// --device cpu: fp32 on the Eigen reference against o2 on the emulator; the
//   ratio is o2 time / fp32 time, the emulator's overhead (a slow-down: the
//   emulator rounds every value in software and counts what it loses).
// Every cell times Trainer::step() (cast, forward, loss, backward, unscale,
// scaler, optimizer) on synthetic digits of that size (TrainConfig::
// image_size), seed 1, one thread; the baseline of each cell is measured in
// the same run.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "speed/bench_support.h"
#include "speed/training_steps.h"
#include "training/trainer.h"

namespace {

using mpverify::nn::BackendKind;
using mpverify::training::TrainConfig;

struct Grid {
  std::vector<int> batches, sizes;
};

// The CPU grid stays small (an o2 step at 56 x 56, batch 64 costs over a
// second on the emulator); the GPU grid follows GauGAN's batch sizes.
const Grid kCpuGrid{{16, 64}, {28, 56}};
const Grid kGpuGrid{{8, 16, 32, 64}, {28, 56, 112, 224}};

TrainConfig step_config(const char* recipe, BackendKind backend, int batch, int size, bool recorders) {
  TrainConfig c;
  c.model = "cnn";
  c.train_size = static_cast<std::size_t>(4 * batch);
  c.test_size = 2;
  c.image_size = size;
  c.batch_size = static_cast<std::size_t>(batch);
  c.seed = 1;
  c.recipe = recipe;
  c.scaler = std::strcmp(recipe, "fp32") == 0 ? "none" : "torch";
  c.backend = backend;
  c.recorders = recorders;
  return c;
}

std::string cell_name(const char* side, int batch, int size) {
  std::string name = "BM_";  // piecewise: GCC 12's false -Wrestrict on "literal" + string
  name += side;
  name += "/batch:";
  name += std::to_string(batch);
  name += "/size:";
  name += std::to_string(size);
  return name;
}

void register_grid(const Grid& grid, BackendKind fp32_backend, BackendKind mixed_backend) {
  for (const int size : grid.sizes)
    for (const int batch : grid.batches) {
      struct Side {
        const char* name;
        TrainConfig config;
      };
      for (const Side& side : {Side{"fp32", step_config("fp32", fp32_backend, batch, size, false)},
                               Side{"o2", step_config("o2", mixed_backend, batch, size, false)},
                               Side{"o2_recorders", step_config("o2", mixed_backend, batch, size, true)}}) {
        benchmark::RegisterBenchmark(cell_name(side.name, batch, size).c_str(),
                                     [config = side.config](benchmark::State& state) {
                                       // a cell that cannot run is reported with its reason
                                       mpverify::bench::time_training_steps(state, config);
                                     })
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.5);
      }
    }
}

class SpeedupReporter : public mpverify::bench::TimeReporter {
 public:
  SpeedupReporter(Grid grid, bool gpu) : grid_(std::move(grid)), gpu_(gpu) {}

  std::string markdown() const {
    std::string s;
    if (gpu_) {
      s += "### GPU: o2 (fp16) speed-up over fp32, one CNN training step\n\n"
           "Ratio = fp32 step time / o2 step time, both on the CUDA backend, in the same run "
           "(GauGAN's table reports the same ratio for apex O1 on a V100).\n\n";
    } else {
      s += "### CPU: the emulator's overhead, one CNN training step\n\n"
           "Ratio = o2 step time on the emulator / fp32 step time on the Eigen reference, in the same run "
           "(one thread).\n\n";
    }
    s += table("fp32", "o2", gpu_);
    s += '\n';
    s += gpu_ ? "Cost of the recorders on the GPU" : "Cost of the recorders on the emulator";
    s += ": o2 step time with every recorder on (per-tensor records and exponent histograms at every step) / "
         "o2 step time with them off.\n\n";
    s += table("o2", "o2_recorders", false);
    if (!gpu_) {
      // The goal with the recorders on is read against the reference step itself.
      s += "\nThe two together: o2 step time on the emulator with every recorder on / fp32 step time on the Eigen "
           "reference, in the same run.\n\n";
      s += table("fp32", "o2_recorders", false);
    }
    if (!errors_.empty()) {
      s += "\nCells marked – did not run:\n\n";
      for (const auto& [name, why] : errors_) s += "- `" + name + "`: " + why + "\n";
    }
    return s;
  }

 private:
  // rows: batch sizes; columns: image sizes; cell: time(a)/time(b) when
  // `a_over_b`, else time(b)/time(a).
  std::string table(const char* a, const char* b, bool a_over_b) const {
    std::string s = "| batch size |";
    for (const int size : grid_.sizes) {
      s += ' ';
      s += std::to_string(size);
      s += 'x';
      s += std::to_string(size);
      s += " |";
    }
    s += "\n|---|";
    for (std::size_t i = 0; i < grid_.sizes.size(); ++i) s += "---:|";
    s += "\n";
    for (const int batch : grid_.batches) {
      s += "| ";
      s += std::to_string(batch);
      s += " |";
      for (const int size : grid_.sizes) {
        const auto ta = seconds_.find(cell_name(a, batch, size)), tb = seconds_.find(cell_name(b, batch, size));
        char buf[64];
        if (ta == seconds_.end() || tb == seconds_.end())
          std::snprintf(buf, sizeof buf, " – |");
        else
          std::snprintf(buf, sizeof buf, " %.2fx |", a_over_b ? ta->second / tb->second : tb->second / ta->second);
        s += buf;
      }
      s += "\n";
    }
    return s;
  }

  Grid grid_;
  bool gpu_;
};

}  // namespace

int main(int argc, char** argv) {
  // --device is ours; the rest goes to parse_bench_args (--markdown, Google Benchmark's options).
  std::string device = "cpu";
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--device") == 0) {
      if (i + 1 >= argc || (std::strcmp(argv[i + 1], "cpu") != 0 && std::strcmp(argv[i + 1], "gpu") != 0)) {
        std::fprintf(stderr, "%s: error: --device needs cpu or gpu\n", argv[0]);
        return 2;
      }
      device = argv[++i];
    } else {
      rest.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(rest.size());
  const auto args = mpverify::bench::parse_bench_args(
      n, rest.data(), "bench_step_speedup --device cpu|gpu [--markdown FILE] [Google Benchmark options]");
  if (args.exit_code >= 0) return args.exit_code;
  const bool gpu = device == "gpu";
  if (gpu) {
    if (const std::string reason = mpverify::gpu::gpu_unavailable_reason(); !reason.empty()) {
      std::printf("skipped: %s\n", reason.c_str());
      if (!args.markdown_path.empty())
        std::ofstream(args.markdown_path) << "### GPU: o2 (fp16) speed-up over fp32\n\nNot measured: no usable GPU ("
                                          << reason << ").\n";
      return 0;
    }
    register_grid(kGpuGrid, BackendKind::gpu, BackendKind::gpu);
  } else {
    register_grid(kCpuGrid, BackendKind::ref, BackendKind::emu);
  }
  SpeedupReporter reporter(gpu ? kGpuGrid : kCpuGrid, gpu);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  if (!args.markdown_path.empty()) std::ofstream(args.markdown_path) << reporter.markdown();
  benchmark::Shutdown();
  return 0;
}
