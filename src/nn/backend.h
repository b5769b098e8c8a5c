// One side of the comparison, behind one interface: a layer calls
// backend.gemm(...) and never knows whether Eigen (ref), the emulator (emu)
// or CUDA (gpu) computes it. The methods have the emulated ops' signatures
// (emu/*_emu.h): the policy says in which formats the op computes, and
// `counters` (nullptr: off) receives the emulator's counts.
//
//  - ref: the Eigen FP32 references (refs/*_ref.h). It computes in FP32 and
//    rejects a policy asking for anything else (check_policy throws), so a
//    ref run is always the FP32 baseline. The optimizers are
//    emu::*_step_emu with fp32 formats, which equal refs::*_step_ref bit for
//    bit (tests/optimizer_emu_test) and also report the update.
//  - emu: emu::*_emu with the policy as given.
//  - gpu: gpu::*_gpu; a policy the CUDA kernels cannot run throws (their
//    element-wise kernels are fp16 only, see gpu/*.h).
//
// Outputs of the matrix ops come back in fp32 (the callers set policy.output
// to fp32 and round them when they store them: nn/context.h), so the
// recorders see every value before it is stored.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "emu/activation_emu.h"
#include "emu/batch_norm_emu.h"
#include "emu/bias_add_emu.h"
#include "emu/block_scaled_gemm.h"
#include "emu/conv2d_emu.h"
#include "emu/counters.h"
#include "emu/gemm_emu.h"
#include "emu/layer_norm_emu.h"
#include "emu/loss_emu.h"
#include "emu/max_pool_emu.h"
#include "emu/optimizer_emu.h"
#include "emu/softmax_emu.h"

namespace mpverify::nn {

enum class BackendKind { ref, emu, gpu };
std::string_view to_string(BackendKind k);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;

  virtual void gemm(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                    std::span<float> c, const emu::GemmPolicy& policy, emu::CounterSet* counters) = 0;

  // A GEMM on block-scaled operands (emu/block_scaled_gemm.h), C in fp32. Only the emulator has it: the
  // others throw std::invalid_argument saying so (the trainer refuses such a recipe before it starts).
  // `counters` (nullptr: off) receives the quantizations' counts and statistics and the instructions' counts;
  // nn/block_scaled_matmul.h turns them into counter sites and records.
  virtual void block_scaled_gemm(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                                 std::span<float> c, const emu::BlockScaledGemmPolicy& policy,
                                 emu::BlockScaledGemmCounters* counters);

  virtual void conv2d_forward(const ops::Conv2dShape& shape, std::span<const float> x, std::span<const float> wgt,
                              std::span<float> y, const emu::GemmPolicy& policy, emu::CounterSet* counters) = 0;
  virtual void conv2d_backward_data(const ops::Conv2dShape& shape, std::span<const float> dy,
                                    std::span<const float> wgt, std::span<float> dx, const emu::GemmPolicy& policy,
                                    emu::CounterSet* counters) = 0;
  virtual void conv2d_backward_filter(const ops::Conv2dShape& shape, std::span<const float> x,
                                      std::span<const float> dy, std::span<float> dw, const emu::GemmPolicy& policy,
                                      emu::CounterSet* counters) = 0;

  virtual void bias_add(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> b,
                        std::span<float> y, const emu::BiasAddPolicy& policy, emu::CounterSet* counters) = 0;
  virtual void bias_add_backward(const ops::ChannelShape& s, std::span<const float> dy, std::span<float> db,
                                 const emu::BiasAddPolicy& policy, emu::CounterSet* counters) = 0;

  virtual void activation(const ops::ActivationParams& p, std::span<const float> x, std::span<float> y,
                          const emu::ElementwisePolicy& policy, emu::CounterSet* counters) = 0;
  virtual void activation_backward(const ops::ActivationParams& p, std::span<const float> x,
                                   std::span<const float> dy, std::span<float> dx,
                                   const emu::ElementwisePolicy& policy, emu::CounterSet* counters) = 0;

  virtual void max_pool(const ops::PoolShape& p, std::span<const float> x, std::span<float> y,
                        const emu::MaxPoolPolicy& policy, emu::CounterSet* counters) = 0;
  virtual void max_pool_backward(const ops::PoolShape& p, std::span<const float> x, std::span<const float> dy,
                                 std::span<float> dx, const emu::MaxPoolPolicy& policy,
                                 emu::CounterSet* counters) = 0;

  virtual void batch_norm(const ops::ChannelShape& s, const ops::BatchNormParams& p, std::span<const float> x,
                          std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                          std::span<float> mean, std::span<float> invstd, std::span<float> running_mean,
                          std::span<float> running_var, const emu::BatchNormPolicy& policy,
                          emu::CounterSet* counters) = 0;
  virtual void batch_norm_backward(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> dy,
                                   std::span<const float> gamma, std::span<const float> mean,
                                   std::span<const float> invstd, std::span<float> dx, std::span<float> dgamma,
                                   std::span<float> dbeta, const emu::BatchNormPolicy& policy,
                                   emu::CounterSet* counters) = 0;

  // The transformer's ops (emu/layer_norm_emu.h, emu/softmax_emu.h; refs/layer_norm_ref.h, refs/softmax_ref.h):
  // layer norm over the last dimension (mean and rstd per row saved for backward) and the row softmax
  // (backward from its output y). ref and emu implement them; the default, which the gpu backend keeps,
  // throws std::invalid_argument saying that the backend has no such kernel yet.
  virtual void layer_norm(const ops::LayerNormShape& s, const ops::LayerNormParams& p, std::span<const float> x,
                          std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                          std::span<float> mean, std::span<float> rstd, const emu::LayerNormPolicy& policy,
                          emu::CounterSet* counters);
  virtual void layer_norm_backward(const ops::LayerNormShape& s, std::span<const float> x, std::span<const float> dy,
                                   std::span<const float> gamma, std::span<const float> mean,
                                   std::span<const float> rstd, std::span<float> dx, std::span<float> dgamma,
                                   std::span<float> dbeta, const emu::LayerNormPolicy& policy,
                                   emu::CounterSet* counters);
  virtual void softmax(const ops::SoftmaxShape& s, std::span<const float> x, std::span<float> y,
                       const emu::SoftmaxPolicy& policy, emu::CounterSet* counters);
  virtual void softmax_backward(const ops::SoftmaxShape& s, std::span<const float> y, std::span<const float> dy,
                                std::span<float> dx, const emu::SoftmaxPolicy& policy, emu::CounterSet* counters);

  // The losses' gradients are of the mean loss with upstream gradient 1; the
  // caller multiplies them by the loss scale (in fp32) before storing them.
  virtual float softmax_cross_entropy(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                      std::span<const std::int32_t> labels, const emu::LossPolicy& policy,
                                      emu::CounterSet* counters) = 0;
  virtual void softmax_cross_entropy_backward(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                              std::span<const std::int32_t> labels, std::span<float> dlogits,
                                              const emu::LossPolicy& policy, emu::CounterSet* counters) = 0;
  virtual float bce_with_logits(std::span<const float> x, std::span<const float> t, const emu::LossPolicy& policy,
                                emu::CounterSet* counters) = 0;
  virtual void bce_with_logits_backward(std::span<const float> x, std::span<const float> t, std::span<float> dx,
                                        const emu::LossPolicy& policy, emu::CounterSet* counters) = 0;

  // One optimizer step on the master weights w; `update` (same size as w, or
  // empty) receives each element's update u, the value added to w.
  virtual void sgd_step(const ops::SgdParams& p, std::int64_t step, std::span<float> w, std::span<float> v,
                        std::span<const float> g, const emu::OptimizerPolicy& policy, emu::CounterSet* counters,
                        std::span<float> update) = 0;
  virtual void adam_step(const ops::AdamParams& p, std::int64_t step, std::span<float> w, std::span<float> m,
                         std::span<float> v, std::span<const float> g, const emu::OptimizerPolicy& policy,
                         emu::CounterSet* counters, std::span<float> update) = 0;
};

// ref, emu, gpu. The gpu backend throws std::runtime_error naming the reason
// (gpu::gpu_unavailable_reason) when no device is usable.
std::unique_ptr<Backend> make_backend(BackendKind kind);
// "ref", "emu", "gpu"; std::invalid_argument listing them otherwise.
BackendKind parse_backend(std::string_view name);

}  // namespace mpverify::nn
