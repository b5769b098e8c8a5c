// The emulated 2-D convolution (NCHW, square stride and padding): forward,
// backward-data and backward-filter, each built on emu::gemm_emu so that every
// accumulation model of the GEMM (fp32, fp16, tensor-core) applies unchanged.
// Same shape as refs::conv2d_*_ref.
//
// Each output element is ONE reduction under the policy's accumulation, in a
// fixed order, as in an implicit-GEMM kernel that keeps a running sum:
//  - forward: y = W (k x crs) * im2col(x) (crs x npq), the windows of the
//    whole batch as columns; terms in (c, r, s) order, c r s per element;
//  - backward filter: dw = dy (k x npq) * im2col(x)^T (npq x crs), all images
//    in one reduction of n p q terms per element, (n, p, q) order;
//  - backward data: NOT col2im after a GEMM, which would sum each element in
//    two stages (a GEMM over k, then the overlapping windows). Instead the
//    stride-phase (sub-pixel) decomposition: input row ih is reached only by
//    the taps r with r = (ih + pad) mod stride (mod stride), from output row
//    (ih + pad - r) / stride, and likewise for columns. So the input elements
//    of one phase (a, b) in [0, stride)^2 form a stride-1 convolution of dy
//    with the sub-filter of those taps, transposed: a GEMM of
//    W_ab^T (c x k|R_a||S_b|) by a gather of dy (k|R_a||S_b| x positions).
//    Terms in (k, r, s) order, k |R_a| |S_b| <= k ceil(r/stride)
//    ceil(s/stride) of them. The zeros that the "dilate dy, then convolve
//    with the flipped filter" formulation inserts between dy's elements are
//    never terms, so they never count.
// (The GEMMs run on blocks of columns that fit in cache; a block changes no
// element's reduction or rounding.)
//
// Counter sites ("<op>" = conv2d, conv2d_backward_data, conv2d_backward_filter):
//  - the inputs, each rounded ONCE (not once per im2col copy), the first
//    named to policy.input, the second to policy.b_format(): conv2d.x, .w;
//    conv2d_backward_data.dy, .w; conv2d_backward_filter.x, .dy;
//  - "<op>.accumulate" (fp16 and mma accumulation, as gemm.accumulate): with fp16 one
//    element per term of every reduction. Taps that fall in the padding (or
//    past dy's border in backward data) are terms with a zero product, as in
//    an implicit GEMM that loads zeros there: they count as elements (exact,
//    never inexact or swamped, zeros_in while the sum is still 0);
//  - the output, rounded once to policy.output: conv2d.y,
//    conv2d_backward_data.dx, conv2d_backward_filter.dw.
#pragma once

#include <span>

#include "emu/counters.h"
#include "emu/gemm_emu.h"
#include "ops/conv2d_shape.h"

namespace mpverify::emu {

void conv2d_forward_emu(const ops::Conv2dShape& shape, std::span<const float> x, std::span<const float> wgt,
                        std::span<float> y, const GemmPolicy& policy, CounterSet* counters = nullptr);
void conv2d_backward_data_emu(const ops::Conv2dShape& shape, std::span<const float> dy, std::span<const float> wgt,
                              std::span<float> dx, const GemmPolicy& policy, CounterSet* counters = nullptr);
void conv2d_backward_filter_emu(const ops::Conv2dShape& shape, std::span<const float> x, std::span<const float> dy,
                                std::span<float> dw, const GemmPolicy& policy, CounterSet* counters = nullptr);

}  // namespace mpverify::emu
