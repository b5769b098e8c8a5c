// A layer's matrix ops under a block-scaled recipe (Precision::block_scaling): the three GEMMs of a linear
// layer as Transformer Engine names them, each with its operands' schemes, on the backend's
// block_scaled_gemm.
//
//   fprop  y  = x W^T     A = x (input scheme), B = W (weight scheme), K = the input features
//   dgrad  dx = dy W      A = dy (gradient scheme), B = W (weight scheme), K = the output features
//   wgrad  dW = dy^T x    A = dy (gradient scheme), B = x (input scheme), K = the batch
//
// A convolution runs the same three GEMMs on its im2col patches (nn/conv_lowering.h). Each GEMM quantizes its
// operands itself, along its own K, so the row-wise copy of a tensor (fprop, dgrad) and its column-wise copy
// (wgrad) are quantized apart, as Transformer Engine quantizes them.
//
// Stochastic rounding of the gradient operand (BlockScaling::gradient_rounding) draws from
// Context::rounding_key(LAYER, "dgrad.dy") and (LAYER, "wgrad.dy"). Under wgrad_hadamard (NVFP4) both wgrad
// operands are first multiplied, along K in blocks of 16, by Transformer Engine's random Hadamard transform
// with its fixed signs, rounded to bf16 as its kernels round it (emu/hadamard.h), so NVFP4's tensor scale
// comes from the transformed values' amax, as TE takes it. Where K is not a multiple of 16 (TE refuses such
// a tensor) it is padded with zero rows first: they change no product.
#pragma once

#include <span>
#include <string_view>

#include "nn/context.h"
#include "ops/gemm_shape.h"

namespace mpverify::nn {

enum class BlockGemm { fprop, dgrad, wgrad };
std::string_view to_string(BlockGemm g);

// c = op(a) op(b) per `shape`, as `gemm` of `layer` (see above); the counters go to the training tensor
// `tensor` ("fc1.y", "fc1.dx", "fc1.dw": nn/tensor_counters.h), and each operand's quantization to the store
// observer (StoreObserver::on_block_quantized: counts, SQNR, scale exponents). The caller checks
// ctx.precision().block_scaled(layer) first.
void block_scaled_matmul(Context& ctx, std::string_view layer, BlockGemm gemm, const ops::GemmShape& shape,
                         std::span<const float> a, std::span<const float> b, std::span<float> c,
                         std::string_view tensor);

}  // namespace mpverify::nn
