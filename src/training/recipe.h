// Precision recipes: which format each tensor of a model lives in, by name,
// as the frameworks' mixed-precision modes set them. A recipe is written NAME[:KEY=VALUE[,KEY=VALUE...]], e.g.
// `o2`, `bf16-o2`, `o2:low=e5m7`, `fp8:fp8_scaling=delayed`.
//
// name       matmul operands    activations,   weights the     master   norm     loss input   optimizer
//            (fwd / bwd)        their grads,   layers use      (the     params   (logits as   state
//                               element-wise   (bias incl.)    optimizer         the loss
//                                                              writes)           reads them)
// ---------  -----------------  -------------  --------------  -------  -------  -----------  ---------
// fp32       fp32               fp32           fp32            fp32     fp32     fp32         fp32
// o1         fp16               fp16           fp32            fp32     fp32     fp32         fp32
// o2         fp16               fp16           fp16            fp32     fp32     fp16         fp32
// fp16-pure  fp16               fp16           fp16            fp16     fp16     fp16         fp16
// bf16-o1, bf16-o2, bf16-pure: the same with bf16.
// fp8        fp8-e4m3 /         bf16           fp32            fp32     fp32     fp32         fp32
//            E4M3 x E5M2,
//            per-tensor scales
//
// The fp8 recipe is Transformer Engine's HYBRID: OCP E4M3 (max 448) forward, E5M2 for the gradients, so
// a backward GEMM multiplies an E5M2 gradient by an E4M3 weight or activation; its casts saturate.
//
// The block-scaled recipes (nn/precision.h BlockScaling, nn/block_scaled_matmul.h; the emu backend only):
// bf16 activations, gradients and element-wise ops, fp32 master weights, weight gradients and optimizer
// state; each GEMM of a linear or convolution layer quantizes its operands along its K and accumulates them
// with a block-scaled tensor-core model (emu/block_scaled_gemm.h):
//
// name           x (activations)  W (weights)       dy (gradients)           accumulation
// -------------  ---------------  ----------------  -----------------------  -------------------------------
// mxfp8          mxfp8-e4m3       mxfp8-e4m3        mxfp8-e4m3               sm100.mxf8f6f4 (rceil scales)
// nvfp4          nvfp4 (1 x 16)   nvfp4 16 x 16     nvfp4, stochastic; wgrad sm100.mxf4nvf4
//                                 tiles             operands Hadamard-transformed
// fp8-blockwise  fp8-tile1x128    fp8-block128x128  fp8-tile1x128            sm90.fp8-blockwise (promotion
//                                                                            every 128)
//
// In all three the last matrix layer (the output head) keeps bf16 matrix ops (high_precision_last=1), as
// Transformer Engine's users, NVIDIA's NVFP4 recipe and DeepSeek-V3 keep it.
//
// Weight gradients are stored in the low format in every mixed recipe (an
// autocast GEMM's output is fp16 even for an fp32 parameter) and widened to
// fp32 by the unscale; batch-norm statistics are fp32 everywhere; losses
// and bias gradients sum in fp32. Accumulation is fp32 unless asked.
//
// o1 vs o2 in this emulator: autocast (o1) rounds the fp32 weights to fp16 at
// every matrix op, which gives the same operands as o2's fp16 copy; what
// differs is the bias (o1 keeps it fp32 and adds it in the GEMM's fp32
// epilogue; o2 holds it in fp16) and the loss input (autocast runs the loss
// in fp32 on the widened fp16 logits: the same values). So o1 and o2 agree
// closely for these models, as they should: their arithmetic differs little.
//
// Keys (any format the foundation parses: fp16, bf16, e4m3, e5m7, ...):
//   low=F            every tensor the recipe keeps in its low format (fp16 / bf16 above)
//   matmul_forward=F, matmul_backward=F, activations=F, activation_grads=F,
//   elementwise=F, weights=F, weight_grads=F, master=F, norm_statistics=F,
//   norm_parameters=F, loss_input=F, loss_accumulate=F, optimizer_state=F
//   accumulation=fp32|fp16|tensor_core|ARCHITECTURE|PRESET (volta .. blackwell: every GEMM as that
//   architecture's tensor-core instruction for its operand formats; emu/mma_presets.h)
//   promotion=N (with an architecture: fp32 promotion every N elements of k, DeepSeek-V3's 128)
//   fp8_scaling=current|delayed|none (fp8 recipe: how each operand's scale is
//   chosen; delayed is TE's DelayedScaling with history=1024, algo max)
//   grad_rounding=rne|stochastic (how every stored gradient is rounded into its
//   format: activation gradients, weight gradients, batch-norm parameter
//   gradients; the matrix ops' operand casts, fp8's E5M2 included, stay rne)
//   update_rounding=rne|stochastic (how the optimizer writes the update, and
//   adamw's decay, into master weights held in a low format: fp16-pure,
//   bf16-pure, master=F; an fp32 master write stays rne)
// Both default to rne, and stochastic is refused where there is no low format
// to round into. The draws: emu/rounding_key.h (run seed, tensor name, step).
// The emu backend only: the trainer refuses them on ref and gpu.
// The block-scaled recipes' keys:
//   scale_rule=floor|ceil|even|rceil (mxfp8: how each E8M0 block scale is chosen; emu/block_quantize.h)
//   high_precision_last=N (the last N matrix layers keep bf16 matrix ops; 0: every layer block-scaled)
//   dy_rounding=rne|stochastic (how dy is quantized for dgrad and wgrad; nvfp4: stochastic)
//   hadamard=on|off (nvfp4: the random Hadamard transform on wgrad's operands)
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "formats/format.h"
#include "nn/precision.h"

namespace mpverify::training {

enum class OperandScaling { none, current, delayed };

struct Recipe {
  std::string name;   // as given, e.g. "o2:low=e5m7"
  nn::Precision precision;  // operand_scale unset: the trainer installs it from `operand_scaling`
  formats::Format optimizer_state = nn::Precision::fp32();
  OperandScaling operand_scaling = OperandScaling::none;
};

// fp32, o1, o2, fp16-pure, bf16-o1, bf16-o2, bf16-pure, fp8, mxfp8, nvfp4, fp8-blockwise.
std::vector<std::string> recipe_names();

// Throws std::invalid_argument naming the unknown recipe or key, or the bad
// value, and listing what is accepted.
Recipe parse_recipe(std::string_view text);

}  // namespace mpverify::training
