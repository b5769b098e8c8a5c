#include "nn/policies.h"

#include "emu/mma_presets.h"

namespace mpverify::nn {

emu::GemmPolicy matmul_policy(const Precision& p, Pass pass, GradientOperand gradient) {
  emu::GemmPolicy policy;
  policy.input = p.matmul_forward;
  if (pass == Pass::backward) {
    if (gradient == GradientOperand::first) policy.input = p.matmul_backward;
    else policy.input_b = p.matmul_backward;
    if (!policy.input_b && !(p.matmul_backward == p.matmul_forward)) policy.input_b = p.matmul_forward;
  }
  policy.accumulation = p.accumulation;
  policy.tensor_core = p.tensor_core;
  if (!p.mma_architecture.empty()) {
    policy.accumulation = emu::Accumulation::mma;
    policy.mma = emu::mma_for_architecture(p.mma_architecture, policy.input, policy.b_format(), Precision::fp32());
    policy.promotion_interval = p.promotion_interval;
  }
  policy.output = Precision::fp32();
  return policy;
}

emu::GemmPolicy attention_matmul_policy(const Precision& p, Pass pass, GradientOperand gradient) {
  Precision activations = p;
  activations.matmul_forward = activations.matmul_backward = p.activations;
  return matmul_policy(activations, pass, gradient);
}

emu::BiasAddPolicy bias_policy(const Precision&) {
  emu::BiasAddPolicy policy;
  policy.input = Precision::fp32();
  policy.output = Precision::fp32();
  policy.accumulation = Precision::fp32();
  return policy;
}

emu::ElementwisePolicy elementwise_policy(const Precision& p) {
  return emu::ElementwisePolicy{p.elementwise, Precision::fp32()};
}

emu::MaxPoolPolicy max_pool_policy(const Precision& p) {
  emu::MaxPoolPolicy policy;
  policy.input = p.elementwise;
  policy.output = Precision::fp32();
  policy.accumulation = Precision::fp32();
  return policy;
}

emu::BatchNormPolicy batch_norm_policy(const Precision& p) {
  emu::BatchNormPolicy policy;
  policy.input = p.elementwise;
  policy.output = Precision::fp32();
  policy.statistics = p.norm_statistics;
  policy.parameters = p.norm_parameters;
  return policy;
}

emu::LayerNormPolicy layer_norm_policy(const Precision& p) {
  emu::LayerNormPolicy policy;
  policy.input = p.elementwise;
  policy.output = Precision::fp32();
  policy.statistics = p.norm_statistics;
  policy.parameters = p.norm_parameters;
  return policy;
}

emu::SoftmaxPolicy softmax_policy(const Precision& p) {
  emu::SoftmaxPolicy policy;
  policy.input = p.elementwise;
  policy.output = Precision::fp32();
  policy.accumulate = Precision::fp32();
  return policy;
}

emu::LossPolicy loss_policy(const Precision& p) {
  emu::LossPolicy policy;
  policy.input = p.loss_input;
  policy.accumulate = p.loss_accumulate;
  policy.output = Precision::fp32();
  return policy;
}

}  // namespace mpverify::nn
