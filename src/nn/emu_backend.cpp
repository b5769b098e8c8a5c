// The emu backend: each op forwards to its emulated twin, policy and counters as given.
#include "nn/emu_backend.h"

namespace mpverify::nn {

void EmuBackend::gemm(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                      std::span<float> c, const emu::GemmPolicy& policy, emu::CounterSet* counters) {
  emu::gemm_emu(shape, a, b, c, policy, counters);
}

void EmuBackend::block_scaled_gemm(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                                   std::span<float> c, const emu::BlockScaledGemmPolicy& policy,
                                   emu::BlockScaledGemmCounters* counters) {
  emu::block_scaled_gemm(shape, a, b, c, policy, counters);
}

void EmuBackend::conv2d_forward(const ops::Conv2dShape& shape, std::span<const float> x, std::span<const float> wgt,
                                std::span<float> y, const emu::GemmPolicy& policy, emu::CounterSet* counters) {
  emu::conv2d_forward_emu(shape, x, wgt, y, policy, counters);
}

void EmuBackend::conv2d_backward_data(const ops::Conv2dShape& shape, std::span<const float> dy,
                                      std::span<const float> wgt, std::span<float> dx, const emu::GemmPolicy& policy,
                                      emu::CounterSet* counters) {
  emu::conv2d_backward_data_emu(shape, dy, wgt, dx, policy, counters);
}

void EmuBackend::conv2d_backward_filter(const ops::Conv2dShape& shape, std::span<const float> x,
                                        std::span<const float> dy, std::span<float> dw,
                                        const emu::GemmPolicy& policy, emu::CounterSet* counters) {
  emu::conv2d_backward_filter_emu(shape, x, dy, dw, policy, counters);
}

void EmuBackend::bias_add(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> b,
                          std::span<float> y, const emu::BiasAddPolicy& policy, emu::CounterSet* counters) {
  emu::bias_add_emu(s, x, b, y, policy, counters);
}

void EmuBackend::bias_add_backward(const ops::ChannelShape& s, std::span<const float> dy, std::span<float> db,
                                   const emu::BiasAddPolicy& policy, emu::CounterSet* counters) {
  emu::bias_add_backward_emu(s, dy, db, policy, counters);
}

void EmuBackend::activation(const ops::ActivationParams& p, std::span<const float> x, std::span<float> y,
                            const emu::ElementwisePolicy& policy, emu::CounterSet* counters) {
  emu::activation_emu(p, x, y, policy, counters);
}

void EmuBackend::activation_backward(const ops::ActivationParams& p, std::span<const float> x,
                                     std::span<const float> dy, std::span<float> dx,
                                     const emu::ElementwisePolicy& policy, emu::CounterSet* counters) {
  emu::activation_backward_emu(p, x, dy, dx, policy, counters);
}

void EmuBackend::max_pool(const ops::PoolShape& p, std::span<const float> x, std::span<float> y,
                          const emu::MaxPoolPolicy& policy, emu::CounterSet* counters) {
  emu::max_pool_emu(p, x, y, policy, counters);
}

void EmuBackend::max_pool_backward(const ops::PoolShape& p, std::span<const float> x, std::span<const float> dy,
                                   std::span<float> dx, const emu::MaxPoolPolicy& policy,
                                   emu::CounterSet* counters) {
  emu::max_pool_backward_emu(p, x, dy, dx, policy, counters);
}

void EmuBackend::batch_norm(const ops::ChannelShape& s, const ops::BatchNormParams& p, std::span<const float> x,
                            std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                            std::span<float> mean, std::span<float> invstd, std::span<float> running_mean,
                            std::span<float> running_var, const emu::BatchNormPolicy& policy,
                            emu::CounterSet* counters) {
  emu::batch_norm_emu(s, p, x, gamma, beta, y, mean, invstd, running_mean, running_var, policy, counters);
}

void EmuBackend::batch_norm_backward(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> dy,
                                     std::span<const float> gamma, std::span<const float> mean,
                                     std::span<const float> invstd, std::span<float> dx, std::span<float> dgamma,
                                     std::span<float> dbeta, const emu::BatchNormPolicy& policy,
                                     emu::CounterSet* counters) {
  emu::batch_norm_backward_emu(s, x, dy, gamma, mean, invstd, dx, dgamma, dbeta, policy, counters);
}

void EmuBackend::layer_norm(const ops::LayerNormShape& s, const ops::LayerNormParams& p, std::span<const float> x,
                            std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                            std::span<float> mean, std::span<float> rstd, const emu::LayerNormPolicy& policy,
                            emu::CounterSet* counters) {
  emu::layer_norm_emu(s, p, x, gamma, beta, y, mean, rstd, policy, counters);
}

void EmuBackend::layer_norm_backward(const ops::LayerNormShape& s, std::span<const float> x,
                                     std::span<const float> dy, std::span<const float> gamma,
                                     std::span<const float> mean, std::span<const float> rstd, std::span<float> dx,
                                     std::span<float> dgamma, std::span<float> dbeta,
                                     const emu::LayerNormPolicy& policy, emu::CounterSet* counters) {
  emu::layer_norm_backward_emu(s, x, dy, gamma, mean, rstd, dx, dgamma, dbeta, policy, counters);
}

void EmuBackend::softmax(const ops::SoftmaxShape& s, std::span<const float> x, std::span<float> y,
                         const emu::SoftmaxPolicy& policy, emu::CounterSet* counters) {
  emu::softmax_emu(s, x, y, policy, counters);
}

void EmuBackend::softmax_backward(const ops::SoftmaxShape& s, std::span<const float> y, std::span<const float> dy,
                                  std::span<float> dx, const emu::SoftmaxPolicy& policy, emu::CounterSet* counters) {
  emu::softmax_backward_emu(s, y, dy, dx, policy, counters);
}

float EmuBackend::softmax_cross_entropy(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                        std::span<const std::int32_t> labels, const emu::LossPolicy& policy,
                                        emu::CounterSet* counters) {
  return emu::softmax_cross_entropy_emu(s, logits, labels, policy, counters);
}

void EmuBackend::softmax_cross_entropy_backward(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                                std::span<const std::int32_t> labels, std::span<float> dlogits,
                                                const emu::LossPolicy& policy, emu::CounterSet* counters) {
  emu::softmax_cross_entropy_backward_emu(s, logits, labels, dlogits, policy, counters);
}

float EmuBackend::bce_with_logits(std::span<const float> x, std::span<const float> t, const emu::LossPolicy& policy,
                                  emu::CounterSet* counters) {
  return emu::bce_with_logits_emu(x, t, policy, counters);
}

void EmuBackend::bce_with_logits_backward(std::span<const float> x, std::span<const float> t, std::span<float> dx,
                                          const emu::LossPolicy& policy, emu::CounterSet* counters) {
  emu::bce_with_logits_backward_emu(x, t, dx, policy, counters);
}

void EmuBackend::sgd_step(const ops::SgdParams& p, std::int64_t step, std::span<float> w, std::span<float> v,
                          std::span<const float> g, const emu::OptimizerPolicy& policy, emu::CounterSet* counters,
                          std::span<float> update) {
  emu::sgd_step_emu(p, step, w, v, g, policy, counters, update);
}

void EmuBackend::adam_step(const ops::AdamParams& p, std::int64_t step, std::span<float> w, std::span<float> m,
                           std::span<float> v, std::span<const float> g, const emu::OptimizerPolicy& policy,
                           emu::CounterSet* counters, std::span<float> update) {
  emu::adam_step_emu(p, step, w, m, v, g, policy, counters, update);
}

}  // namespace mpverify::nn
