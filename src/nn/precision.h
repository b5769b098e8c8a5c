// Which format every tensor of a model is stored in and which precision every
// op computes in: what a training recipe (training/recipe.h) decides, in the
// form the layers read. Every field defaults to fp32, the reference.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "emu/block_scaled_gemm.h"
#include "emu/gemm_emu.h"
#include "formats/format.h"
#include "formats/rounding.h"

namespace mpverify::nn {

// The roles the recorders sort tensors into.
enum class Role { activation, activation_grad, weight, weight_grad, update };
std::string_view to_string(Role r);

enum class Pass { forward, backward, optimizer };
std::string_view to_string(Pass p);

// Block-scaled matrix ops (the mxfp8, nvfp4 and fp8-blockwise recipes, training/recipe.h): each GEMM of a
// layer quantizes its two operands along its reduction dimension with the scheme of the operand's role and
// accumulates them with a block-scaled tensor-core model (emu/block_scaled_gemm.h). A layer's three GEMMs, as
// Transformer Engine names them (nn/block_scaled_matmul.h):
//   fprop  y  = x  W^T    x along the input features (input),   W along them too (weight)
//   dgrad  dx = dy W      dy along the output features (gradient), W along them (weight)
//   wgrad  dW = dy^T x    dy and x along the batch (gradient, input), with the random Hadamard transform first
//                         when wgrad_hadamard is set (NVFP4)
// Each operand is quantized afresh for each GEMM (the row- and column-wise copies are quantized apart, as
// Transformer Engine does); the layers named in high_precision_layers keep the plain matrix ops of the
// recipe's formats (bf16) instead.
struct BlockScaling {
  emu::BlockScaledAccumulation accumulation = emu::BlockScaledAccumulation::sm100_mxf8f6f4;
  emu::BlockScheme input = *emu::find_block_scheme("mxfp8-e4m3");
  emu::BlockScheme weight = *emu::find_block_scheme("mxfp8-e4m3");
  emu::BlockScheme gradient = *emu::find_block_scheme("mxfp8-e4m3");
  emu::ScaleRule scale_rule = emu::kDefaultScaleRule;  // E8M0 scales (MX)
  // How the gradient operand (dy) is quantized: nearest-even, or stochastic (NVFP4), keyed by
  // emu::rounding_key with the names of nn/block_scaled_matmul.h.
  formats::Rounding gradient_rounding = formats::Rounding::nearest_even;
  bool wgrad_hadamard = false;
  // The last this-many matrix layers (Linear, Conv2d) of a model keep the plain matrix ops; the trainer
  // turns the count into names once it has built the model.
  int high_precision_last = 1;
  std::vector<std::string> high_precision_layers;

  bool applies_to(std::string_view layer) const;
};

struct Precision {
  static formats::Format fp32() { return formats::parse_format("fp32"); }

  // GEMM and convolution operands (the matrix-op inputs): forward, and the
  // gradient operand of the backward ones, whose other operand keeps
  // matmul_forward (the fp8 recipe: E4M3 forward, E4M3 x E5M2 backward);
  // and how their products are accumulated.
  formats::Format matmul_forward = fp32();
  formats::Format matmul_backward = fp32();
  emu::Accumulation accumulation = emu::Accumulation::fp32;
  emu::TensorCoreModel tensor_core;
  // When set (volta .. blackwell, or a preset's name): every GEMM and convolution accumulates as that
  // architecture's tensor-core instruction for its operand formats (emu/mma_presets.h), promoted into fp32
  // every promotion_interval elements when that is positive.
  std::string mma_architecture;
  int promotion_interval = 0;

  // Storage: every layer output (activations), every activation gradient,
  // the weights the layers compute with (a copy of the master weights,
  // rounded once per step), the weight gradients, and the master weights the
  // optimizer updates (fp32 with master weights; the weight format without).
  formats::Format activations = fp32();
  formats::Format activation_grads = fp32();
  formats::Format weights = fp32();
  formats::Format weight_grads = fp32();
  formats::Format master = fp32();

  // Element-wise ops (activation functions, bias add, max-pool) compute on
  // inputs in this format (an fp16 kernel: fp16).
  formats::Format elementwise = fp32();
  // Batch norm: statistics and parameters (frameworks keep both fp32).
  formats::Format norm_statistics = fp32();
  formats::Format norm_parameters = fp32();
  // Losses: the logits' format as the loss reads them, and the running sums.
  formats::Format loss_input = fp32();
  formats::Format loss_accumulate = fp32();

  // Per-tensor scaling of matrix-op operands (the fp8 recipe): when set, an
  // operand x is multiplied by operand_scale(site, amax(|x|)) in fp32 before
  // it is rounded to the operand format, and the fp32 result is multiplied by
  // the inverse scales. `site` names the operand ("fc1.x", "fc1.w", ...), so
  // that a delayed-scaling strategy can keep a history per tensor.
  std::function<float(std::string_view site, float amax)> operand_scale;

  // How gradients are rounded into their formats when they are stored (activation_grads, weight_grads,
  // and batch norm's parameter gradients in norm_parameters): nearest_even, or stochastic with the draws
  // of emu::rounding_key (Context::store). And how the optimizer writes its update into the master
  // weights (emu::OptimizerPolicy::update_rounding; the trainer applies stochastic only to a write into a
  // format other than fp32). The matrix ops' operand casts stay nearest-even either way.
  formats::Rounding grad_rounding = formats::Rounding::nearest_even;
  formats::Rounding update_rounding = formats::Rounding::nearest_even;

  // Set by the block-scaled recipes: the matrix ops of every layer it applies to run block-scaled.
  std::optional<BlockScaling> block_scaling;

  bool is_fp32() const;
  // Whether `layer`'s matrix ops run block-scaled.
  bool block_scaled(std::string_view layer) const { return block_scaling && block_scaling->applies_to(layer); }
};

}  // namespace mpverify::nn
