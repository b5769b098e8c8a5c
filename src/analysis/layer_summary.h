// A dump's tensors followed over its steps: the tensors of the step
// directories (dump_steps.h) grouped by their name within a step
// ("grads.safetensors:fc1.weight" is one layer's gradient at every step) and,
// per group and scale, how the share of values that underflow to zero (and
// that overflow) moves over the steps: first and last step, the worst step,
// and the trend as a least-squares slope.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/dump_analysis.h"

namespace mpverify::analysis {

struct LayerScaleSummary {
  double scale = 1;        // NaN when the steps were analysed at different scales (each at its own)
  std::size_t steps = 0;   // steps holding this tensor
  std::int64_t first_step = 0;
  std::int64_t last_step = 0;
  double first_underflow_to_zero_rate = 0;
  double last_underflow_to_zero_rate = 0;
  std::int64_t worst_underflow_step = 0;  // the highest underflow-to-zero rate (the earliest step on a tie)
  double worst_underflow_to_zero_rate = 0;
  std::int64_t worst_overflow_step = 0;   // the highest overflow rate (the earliest step on a tie)
  double worst_overflow_rate = 0;
  // The least-squares slope of the underflow-to-zero rate against the step number, in rate per step
  // (a rate is a share, 0 to 1); nullopt with fewer than two steps.
  std::optional<double> underflow_to_zero_slope;
};

struct LayerSummary {
  std::string layer;   // the name within a step directory: "grads.safetensors:fc1.weight"
  std::string kind;    // the first component of the file's path within the step, without extension: "grads"
  std::string tensor;  // the tensor's name in its file: "fc1.weight"
  std::vector<LayerScaleSummary> per_scale;  // in the analysis's scale order
};

// The groups in the order their tensors first appear; tensors outside step directories are left out.
// Each step's rates are those of TensorReport::per_scale (ScaleStats::rate: a share of the non-zero
// finite values; 0 for a tensor without any).
std::vector<LayerSummary> summarize_layers(const std::vector<TensorReport>& tensors);

}  // namespace mpverify::analysis
