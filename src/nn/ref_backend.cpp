// The ref backend: the Eigen FP32 references. It computes in FP32 only and
// says so when a policy asks for anything else, so that a "ref" run can never
// silently be something other than the FP32 baseline.
#include "nn/ref_backend.h"

#include <stdexcept>
#include <string>

#include "refs/activation_ref.h"
#include "refs/batch_norm_ref.h"
#include "refs/bias_add_ref.h"
#include "refs/conv2d_ref.h"
#include "refs/gemm_ref.h"
#include "refs/layer_norm_ref.h"
#include "refs/loss_ref.h"
#include "refs/max_pool_ref.h"
#include "refs/softmax_ref.h"

namespace mpverify::nn {

namespace {

void require_fp32(std::initializer_list<const formats::Format*> formats, std::string_view op) {
  const formats::Format fp32 = Precision::fp32();
  for (const formats::Format* f : formats) {
    if (*f == fp32) continue;
    std::string message = "ref backend: ";
    message += op;
    message += " was asked to compute in ";
    message += f->name;
    message += "; the ref backend is the Eigen FP32 reference and runs the fp32 recipe only (use --backend emu "
               "for a mixed-precision recipe)";
    throw std::invalid_argument(message);
  }
}

void require_fp32(const emu::GemmPolicy& p, std::string_view op) {
  require_fp32({&p.input}, op);
  if (p.accumulation != emu::Accumulation::fp32) {
    std::string message = "ref backend: ";
    message += op;
    message += " was asked for ";
    message += emu::to_string(p.accumulation);
    message += " accumulation; the ref backend accumulates in FP32 only (use --backend emu)";
    throw std::invalid_argument(message);
  }
}

}  // namespace

void RefBackend::gemm(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                      std::span<float> c, const emu::GemmPolicy& policy, emu::CounterSet*) {
  require_fp32(policy, "gemm");
  refs::gemm_ref(shape, a, b, c);
}

void RefBackend::conv2d_forward(const ops::Conv2dShape& shape, std::span<const float> x, std::span<const float> wgt,
                                std::span<float> y, const emu::GemmPolicy& policy, emu::CounterSet*) {
  require_fp32(policy, "conv2d");
  refs::conv2d_forward_ref(shape, x, wgt, y);
}

void RefBackend::conv2d_backward_data(const ops::Conv2dShape& shape, std::span<const float> dy,
                                      std::span<const float> wgt, std::span<float> dx, const emu::GemmPolicy& policy,
                                      emu::CounterSet*) {
  require_fp32(policy, "conv2d_backward_data");
  refs::conv2d_backward_data_ref(shape, dy, wgt, dx);
}

void RefBackend::conv2d_backward_filter(const ops::Conv2dShape& shape, std::span<const float> x,
                                        std::span<const float> dy, std::span<float> dw,
                                        const emu::GemmPolicy& policy, emu::CounterSet*) {
  require_fp32(policy, "conv2d_backward_filter");
  refs::conv2d_backward_filter_ref(shape, x, dy, dw);
}

void RefBackend::bias_add(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> b,
                          std::span<float> y, const emu::BiasAddPolicy& policy, emu::CounterSet*) {
  require_fp32({&policy.input, &policy.output}, "bias_add");
  refs::bias_add_ref(s, x, b, y);
}

void RefBackend::bias_add_backward(const ops::ChannelShape& s, std::span<const float> dy, std::span<float> db,
                                   const emu::BiasAddPolicy& policy, emu::CounterSet*) {
  require_fp32({&policy.input, &policy.output, &policy.accumulation}, "bias_add_backward");
  refs::bias_add_backward_ref(s, dy, db);
}

void RefBackend::activation(const ops::ActivationParams& p, std::span<const float> x, std::span<float> y,
                            const emu::ElementwisePolicy& policy, emu::CounterSet*) {
  require_fp32({&policy.input, &policy.output}, "activation");
  refs::activation_ref(p, x, y);
}

void RefBackend::activation_backward(const ops::ActivationParams& p, std::span<const float> x,
                                     std::span<const float> dy, std::span<float> dx,
                                     const emu::ElementwisePolicy& policy, emu::CounterSet*) {
  require_fp32({&policy.input, &policy.output}, "activation_backward");
  refs::activation_backward_ref(p, x, dy, dx);
}

void RefBackend::max_pool(const ops::PoolShape& p, std::span<const float> x, std::span<float> y,
                          const emu::MaxPoolPolicy& policy, emu::CounterSet*) {
  require_fp32({&policy.input, &policy.output}, "max_pool");
  refs::max_pool_ref(p, x, y);
}

void RefBackend::max_pool_backward(const ops::PoolShape& p, std::span<const float> x, std::span<const float> dy,
                                   std::span<float> dx, const emu::MaxPoolPolicy& policy, emu::CounterSet*) {
  require_fp32({&policy.input, &policy.output, &policy.accumulation}, "max_pool_backward");
  refs::max_pool_backward_ref(p, x, dy, dx);
}

void RefBackend::batch_norm(const ops::ChannelShape& s, const ops::BatchNormParams& p, std::span<const float> x,
                            std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                            std::span<float> mean, std::span<float> invstd, std::span<float> running_mean,
                            std::span<float> running_var, const emu::BatchNormPolicy& policy, emu::CounterSet*) {
  require_fp32({&policy.input, &policy.output, &policy.statistics, &policy.parameters}, "batch_norm");
  refs::batch_norm_ref(s, p, x, gamma, beta, y, mean, invstd, running_mean, running_var);
}

void RefBackend::batch_norm_backward(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> dy,
                                     std::span<const float> gamma, std::span<const float> mean,
                                     std::span<const float> invstd, std::span<float> dx, std::span<float> dgamma,
                                     std::span<float> dbeta, const emu::BatchNormPolicy& policy, emu::CounterSet*) {
  require_fp32({&policy.input, &policy.output, &policy.statistics, &policy.parameters}, "batch_norm_backward");
  refs::batch_norm_backward_ref(s, x, dy, gamma, mean, invstd, dx, dgamma, dbeta);
}

void RefBackend::layer_norm(const ops::LayerNormShape& s, const ops::LayerNormParams& p, std::span<const float> x,
                            std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                            std::span<float> mean, std::span<float> rstd, const emu::LayerNormPolicy& policy,
                            emu::CounterSet*) {
  require_fp32({&policy.input, &policy.output, &policy.statistics, &policy.parameters}, "layer_norm");
  refs::layer_norm_ref(s, p, x, gamma, beta, y, mean, rstd);
}

void RefBackend::layer_norm_backward(const ops::LayerNormShape& s, std::span<const float> x,
                                     std::span<const float> dy, std::span<const float> gamma,
                                     std::span<const float> mean, std::span<const float> rstd, std::span<float> dx,
                                     std::span<float> dgamma, std::span<float> dbeta,
                                     const emu::LayerNormPolicy& policy, emu::CounterSet*) {
  require_fp32({&policy.input, &policy.output, &policy.statistics, &policy.parameters}, "layer_norm_backward");
  refs::layer_norm_backward_ref(s, x, dy, gamma, mean, rstd, dx, dgamma, dbeta);
}

void RefBackend::softmax(const ops::SoftmaxShape& s, std::span<const float> x, std::span<float> y,
                         const emu::SoftmaxPolicy& policy, emu::CounterSet*) {
  require_fp32({&policy.input, &policy.output, &policy.accumulate}, "softmax");
  refs::softmax_ref(s, x, y);
}

void RefBackend::softmax_backward(const ops::SoftmaxShape& s, std::span<const float> y, std::span<const float> dy,
                                  std::span<float> dx, const emu::SoftmaxPolicy& policy, emu::CounterSet*) {
  require_fp32({&policy.input, &policy.output, &policy.accumulate}, "softmax_backward");
  refs::softmax_backward_ref(s, y, dy, dx);
}

float RefBackend::softmax_cross_entropy(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                        std::span<const std::int32_t> labels, const emu::LossPolicy& policy,
                                        emu::CounterSet*) {
  require_fp32({&policy.input, &policy.accumulate, &policy.output}, "softmax_cross_entropy");
  return refs::softmax_cross_entropy_ref(s, logits, labels);
}

void RefBackend::softmax_cross_entropy_backward(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                                std::span<const std::int32_t> labels, std::span<float> dlogits,
                                                const emu::LossPolicy& policy, emu::CounterSet*) {
  require_fp32({&policy.input, &policy.accumulate, &policy.output}, "softmax_cross_entropy_backward");
  refs::softmax_cross_entropy_backward_ref(s, logits, labels, dlogits);
}

float RefBackend::bce_with_logits(std::span<const float> x, std::span<const float> t, const emu::LossPolicy& policy,
                                  emu::CounterSet*) {
  require_fp32({&policy.input, &policy.accumulate, &policy.output}, "bce_with_logits");
  return refs::bce_with_logits_ref(x, t);
}

void RefBackend::bce_with_logits_backward(std::span<const float> x, std::span<const float> t, std::span<float> dx,
                                          const emu::LossPolicy& policy, emu::CounterSet*) {
  require_fp32({&policy.input, &policy.accumulate, &policy.output}, "bce_with_logits_backward");
  refs::bce_with_logits_backward_ref(x, t, dx);
}

// emu::*_step_emu with every format fp32 is refs::*_step_ref bit for bit
// (tests/optimizer_emu_test holds it), and it reports the update.
void RefBackend::sgd_step(const ops::SgdParams& p, std::int64_t step, std::span<float> w, std::span<float> v,
                          std::span<const float> g, const emu::OptimizerPolicy& policy, emu::CounterSet*,
                          std::span<float> update) {
  require_fp32({&policy.weights, &policy.state, &policy.grad}, "sgd_step");
  emu::sgd_step_emu(p, step, w, v, g, policy, nullptr, update);
}

void RefBackend::adam_step(const ops::AdamParams& p, std::int64_t step, std::span<float> w, std::span<float> m,
                           std::span<float> v, std::span<const float> g, const emu::OptimizerPolicy& policy,
                           emu::CounterSet*, std::span<float> update) {
  require_fp32({&policy.weights, &policy.state, &policy.grad}, "adam_step");
  emu::adam_step_emu(p, step, w, m, v, g, policy, nullptr, update);
}

}  // namespace mpverify::nn
