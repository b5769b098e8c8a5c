// The GPU 2-D convolution through cuDNN's convolution API
// (cudnnConvolutionForward / BackwardData / BackwardFilter), same shape as
// refs::conv2d_*_ref and emu::conv2d_*_emu: NCHW float tensors in and out on
// the host; inputs converted to the compute's data type on the device. Each
// direction runs one fixed, deterministic algorithm (implicit precomputed
// GEMM; backward data and filter algorithm 1), so repeated runs give the same
// bits.
#pragma once

#include <span>
#include <string_view>

#include "ops/conv2d_shape.h"

namespace mpverify::gpu {

enum class ConvCompute {
  fp32,                  // fp32 tensors, fp32 compute, CUDNN_FMA_MATH: no TF32
  fp16_fp32_accumulate,  // fp16 tensors (inputs and output), fp32 compute, tensor-op math
};

inline std::string_view to_string(ConvCompute c) {
  return c == ConvCompute::fp32 ? "fp32-fma" : "fp16-fp32acc";
}

// Throw std::runtime_error with gpu_unavailable_reason() when no device is
// usable, and on any CUDA/cuDNN error (with file and line).
void conv2d_forward_gpu(const ops::Conv2dShape& shape, std::span<const float> x, std::span<const float> wgt,
                        std::span<float> y, ConvCompute compute);
void conv2d_backward_data_gpu(const ops::Conv2dShape& shape, std::span<const float> dy, std::span<const float> wgt,
                              std::span<float> dx, ConvCompute compute);
void conv2d_backward_filter_gpu(const ops::Conv2dShape& shape, std::span<const float> x, std::span<const float> dy,
                                std::span<float> dw, ConvCompute compute);

}  // namespace mpverify::gpu
