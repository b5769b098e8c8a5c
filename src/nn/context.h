// What a layer needs while it runs a pass: the backend, the precision, the
// loss scale, and the one place where tensors are stored.
//
// Every tensor a layer keeps (an activation, an activation gradient, a weight
// gradient) goes through store(): the op produced it in fp32, store() shows
// those fp32 values to the observer (the recorders), rounds them to the
// format of their role (nearest-even, in place), and notes the first
// non-finite value of the step with the layer, tensor and pass where it
// appeared. Rounding at the store is how an fp16 kernel that computes in fp32
// writes its output; for the matrix ops it equals the op's own output
// rounding (their fp32 result is the accumulator).
//
// Under grad_rounding=stochastic (Precision::grad_rounding) a gradient
// (roles activation_grad and weight_grad) is rounded stochastically instead,
// element i drawing from emu::rounding_key(seed, "LAYER.TENSOR", step) at
// index i; the n-th store of the same name within a step (n >= 1, counted
// from reset_step) is named "LAYER.TENSOR#n", so it draws afresh.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "emu/block_stats.h"
#include "emu/counters.h"
#include "emu/rounding_key.h"
#include "formats/format.h"
#include "nn/backend.h"
#include "nn/precision.h"

namespace mpverify::nn {

// Counter sets by training tensor ("conv1.y", "fc2.dw"), each keyed by op site.
using TensorCounterSets = std::map<std::string, emu::CounterSet, std::less<>>;

// Where a non-finite value first appeared in a step.
struct NonfiniteOrigin {
  std::string layer, tensor;
  Pass pass = Pass::forward;
  std::uint64_t count = 0;  // non-finite values in that tensor after storing
};

// Sees every stored tensor before and after its rounding (the recorders).
class StoreObserver {
 public:
  virtual ~StoreObserver() = default;
  // `exact`: the fp32 values the op produced; `stored`: after rounding to `format`.
  virtual void on_store(std::string_view layer, std::string_view tensor, Role role, Pass pass,
                        std::span<const float> exact, std::span<const float> stored,
                        const formats::Format& format) = 0;
  // A block-scaled GEMM quantized one of its operands (nn/block_scaled_matmul.h): `operand` is the GEMM and
  // the tensor ("fprop.x", "fprop.w", "dgrad.dy", "dgrad.w", "wgrad.dy", "wgrad.x"). Default: nothing.
  virtual void on_block_quantized(std::string_view /*layer*/, std::string_view /*operand*/, Pass /*pass*/,
                                  const emu::BlockScheme& /*scheme*/, const emu::BlockCounters& /*counters*/,
                                  const emu::BlockStats& /*stats*/) {}
};

class Context {
 public:
  Context(Backend& backend, const Precision& precision) : backend_(&backend), precision_(&precision) {}

  Backend& backend() const { return *backend_; }
  const Precision& precision() const { return *precision_; }

  // The loss scale of this step (multiplies the loss gradient).
  double loss_scale() const { return loss_scale_; }
  void set_loss_scale(double s) { loss_scale_ = s; }

  Pass pass() const { return pass_; }
  void set_pass(Pass p) { pass_ = p; }

  // The emulator's counters (nullptr: counting off), handed to every op.
  emu::CounterSet* counters() const { return counters_; }
  void set_counters(emu::CounterSet* c) { counters_ = c; }
  // The matrix ops' counters per training tensor (nn/tensor_counters.h); nullptr: not kept.
  TensorCounterSets* tensor_counters() const { return tensor_counters_; }
  void set_tensor_counters(TensorCounterSets* c) { tensor_counters_ = c; }

  // Stochastic rounding's run seed and step (emu/rounding_key.h); both 0 until set.
  void set_rounding_seed(std::uint64_t seed) { seed_ = seed; }
  void set_step(std::uint64_t step) { step_ = step; }

  void set_observer(StoreObserver* o) { observer_ = o; }
  StoreObserver* observer() const { return observer_; }

  // The format a tensor of `role` is stored in.
  const formats::Format& format_of(Role role) const;

  // Rounds `values` in place to the format of `role` (see above).
  void store(std::string_view layer, std::string_view tensor, Role role, std::span<float> values);
  // The same with the format given: batch norm's parameter gradients are
  // stored in norm_parameters (fp32), not in weight_grads.
  void store(std::string_view layer, std::string_view tensor, Role role, const formats::Format& format,
             std::span<float> values);

  // The key of a stochastic rounding named "LAYER.TENSOR" in this step (emu/rounding_key.h; a second one of
  // the same name within the step is "LAYER.TENSOR#1", ...): store()'s, and a block-scaled GEMM's
  // quantization of a gradient operand (nn/block_scaled_matmul.h).
  emu::RoundingKey rounding_key(std::string_view layer, std::string_view tensor);

  // The first non-finite value stored since the last reset, if any.
  const std::optional<NonfiniteOrigin>& first_nonfinite() const { return first_nonfinite_; }
  // Notes a non-finite value found outside store() (e.g. an injected fault,
  // or the loss itself), if none was noted before.
  void note_nonfinite(std::string_view layer, std::string_view tensor, std::uint64_t count);
  void reset_step();

 private:
  // The name a stochastic rounding of this store is keyed by (see above).
  std::string rounding_name(std::string_view layer, std::string_view tensor);

  Backend* backend_;
  const Precision* precision_;
  double loss_scale_ = 1.0;
  Pass pass_ = Pass::forward;
  emu::CounterSet* counters_ = nullptr;
  TensorCounterSets* tensor_counters_ = nullptr;
  StoreObserver* observer_ = nullptr;
  std::optional<NonfiniteOrigin> first_nonfinite_;
  std::vector<float> exact_;  // scratch: the fp32 values shown to the observer
  std::uint64_t seed_ = 0, step_ = 0;
  std::map<std::string, std::uint64_t, std::less<>> stored_this_step_;  // stochastic stores per name
};

}  // namespace mpverify::nn
