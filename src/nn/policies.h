// The emulated ops' policies a layer hands its backend, built from the
// Precision. Outputs are always fp32: the layer rounds them when it stores
// them (Context::store), after the recorders have seen them.
#pragma once

#include "nn/backend.h"
#include "nn/precision.h"

namespace mpverify::nn {

// Which operand of a backward GEMM or convolution is the gradient (in the op's order: gemm (A, B);
// conv2d_forward (x, w); conv2d_backward_data (dy, w); conv2d_backward_filter (x, dy)).
enum class GradientOperand { first, second };

// Matrix ops (GEMM, convolution): forward, both operands in matmul_forward; backward, the gradient in
// matmul_backward and the other operand (a weight or an activation) still in matmul_forward, as
// Transformer Engine's HYBRID format runs E4M3 x E5M2 GEMMs. The recipe's accumulation: its own, or the
// architecture's tensor-core instruction for the two operand formats.
emu::GemmPolicy matmul_policy(const Precision& p, Pass pass, GradientOperand gradient = GradientOperand::first);
// The attention's batched matmuls (nn/causal_self_attention.h): matmul_policy with both operands in the
// activation format and no per-tensor operand scaling. Frameworks run them in the activations' precision:
// Transformer Engine keeps attention in bf16 under its FP8 recipes unless fp8_dpa is asked for, and
// DeepSeek-V3 and NVIDIA's NVFP4 recipe keep it in bf16; under fp32, o1, o2 and bf16-* this is the recipe's
// matmul format anyway.
emu::GemmPolicy attention_matmul_policy(const Precision& p, Pass pass, GradientOperand gradient = GradientOperand::first);
// Bias add as a GEMM epilogue: the fp32 result plus the bias, one fp32
// rounding (the store then rounds once more to the activation format); the
// bias gradient's sum in fp32.
emu::BiasAddPolicy bias_policy(const Precision& p);
// Activation functions: inputs in the element-wise format.
emu::ElementwisePolicy elementwise_policy(const Precision& p);
emu::MaxPoolPolicy max_pool_policy(const Precision& p);
// Batch norm: x and dy in the element-wise format, statistics and
// parameters in their formats.
emu::BatchNormPolicy batch_norm_policy(const Precision& p);
// Layer norm: x and dy in the element-wise format, statistics and parameters
// in their formats (norm_statistics, norm_parameters: fp32 in every recipe's
// table, as frameworks compute LayerNorm in fp32 for fp16 and bf16 inputs).
emu::LayerNormPolicy layer_norm_policy(const Precision& p);
// Softmax (attention's): inputs in the element-wise format, x - max, exp and
// the sums in fp32 always (frameworks' softmax computes in fp32).
emu::SoftmaxPolicy softmax_policy(const Precision& p);
// Losses: logits in loss_input, sums in loss_accumulate.
emu::LossPolicy loss_policy(const Precision& p);

}  // namespace mpverify::nn
