// The reference 2-D convolution (NCHW, square stride and padding, no
// dilation, no groups): forward, backward-data and backward-filter as Eigen
// GEMMs over an im2col matrix, in FP32 and in FP64 (the tighter oracle). Same
// signature shape as emu::conv2d_*_emu and gpu::conv2d_*_gpu; the definition
// and the shape are in ops/conv2d_shape.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ops/conv2d_shape.h"

namespace mpverify::refs {

// FP32: Eigen's float GEMM (the speed baseline of the emulator).
void conv2d_forward_ref(const ops::Conv2dShape& shape, std::span<const float> x, std::span<const float> wgt,
                        std::span<float> y);
void conv2d_backward_data_ref(const ops::Conv2dShape& shape, std::span<const float> dy, std::span<const float> wgt,
                              std::span<float> dx);
void conv2d_backward_filter_ref(const ops::Conv2dShape& shape, std::span<const float> x, std::span<const float> dy,
                                std::span<float> dw);

// FP64 on the same float inputs.
void conv2d_forward_ref_fp64(const ops::Conv2dShape& shape, std::span<const float> x, std::span<const float> wgt,
                             std::span<double> y);
void conv2d_backward_data_ref_fp64(const ops::Conv2dShape& shape, std::span<const float> dy, std::span<const float> wgt,
                                   std::span<double> dx);
void conv2d_backward_filter_ref_fp64(const ops::Conv2dShape& shape, std::span<const float> x, std::span<const float> dy,
                                     std::span<double> dw);

// || op(|a|, |b|) ||_F / || op(a, b) ||_F in FP64, as refs::gemm_condition:
// the factor that turns the componentwise bound |out - out_hat| <= gamma_L
// op(|a|,|b|) of each dot product into a normwise relative bound. Infinity
// when the result is 0.
double conv2d_condition(const ops::Conv2dShape& shape, std::span<const float> x, std::span<const float> wgt);
double conv2d_backward_data_condition(const ops::Conv2dShape& shape, std::span<const float> dy,
                                      std::span<const float> wgt);
double conv2d_backward_filter_condition(const ops::Conv2dShape& shape, std::span<const float> x,
                                        std::span<const float> dy);

}  // namespace mpverify::refs
