// Times Trainer::step() for a Google Benchmark: the trainer is built and run
// one step untimed (first-touch allocations; cuDNN/cuBLAS handles on the GPU),
// then each iteration is one step plus taking its per-tensor lines (a run
// writes them, so they are part of the recorders' work). A trainer that
// cannot be built or stepped (a CUDA error, no memory) ends the benchmark
// with the reason (SkipWithError) instead of the program.
#pragma once

#include <benchmark/benchmark.h>

#include <exception>

#include "training/trainer.h"

namespace mpverify::bench {

inline void time_training_steps(benchmark::State& state, const training::TrainConfig& config) {
  try {
    training::Trainer trainer(config);
    trainer.step();
    for (auto _ : state) {
      auto log = trainer.step();
      benchmark::DoNotOptimize(log);
      auto tensors = trainer.take_tensor_lines();
      auto histograms = trainer.take_histogram_lines();
      benchmark::DoNotOptimize(tensors);
      benchmark::DoNotOptimize(histograms);
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace mpverify::bench
