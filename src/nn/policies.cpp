#include "nn/policies.h"

namespace mpverify::nn {

emu::GemmPolicy matmul_policy(const Precision& p, Pass pass) {
  emu::GemmPolicy policy;
  policy.input = pass == Pass::forward ? p.matmul_forward : p.matmul_backward;
  policy.accumulation = p.accumulation;
  policy.tensor_core = p.tensor_core;
  policy.output = Precision::fp32();
  return policy;
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

emu::LossPolicy loss_policy(const Precision& p) {
  emu::LossPolicy policy;
  policy.input = p.loss_input;
  policy.accumulate = p.loss_accumulate;
  policy.output = Precision::fp32();
  return policy;
}

}  // namespace mpverify::nn
