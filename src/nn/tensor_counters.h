// The counters of one matrix op of a layer, attributed to the training tensor it produces ("conv1.y",
// "conv1.dx", "conv1.dw"): the op counts into a set of its own, which is then added both to the context's
// counters (the totals per op site: gemm.accumulate, conv2d.c, ...) and, under the tensor's name, to the
// context's per-tensor counters. So what a GEMM's accumulation lost (truncated terms, terms shifted out,
// inexact or overflowing results) is known per tensor, not only summed over the model.
#pragma once

#include <string>

#include "emu/counters.h"
#include "nn/context.h"

namespace mpverify::nn {

class TensorCounters {
 public:
  TensorCounters(const Context& ctx, std::string tensor) : ctx_(ctx), tensor_(std::move(tensor)) {}
  TensorCounters(const TensorCounters&) = delete;
  TensorCounters& operator=(const TensorCounters&) = delete;
  ~TensorCounters() {
    if (!ctx_.counters()) return;
    ctx_.counters()->merge(local_);
    if (ctx_.tensor_counters()) (*ctx_.tensor_counters())[tensor_].merge(local_);
  }

  // What to hand to the backend: nullptr when counting is off.
  emu::CounterSet* get() { return ctx_.counters() ? &local_ : nullptr; }

 private:
  const Context& ctx_;
  std::string tensor_;
  emu::CounterSet local_;
};

}  // namespace mpverify::nn
