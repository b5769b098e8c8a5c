// A convolution as the GEMMs of a linear layer over its patches, for the block-scaled recipes
// (nn/block_scaled_matmul.h), whose quantization needs a reduction dimension laid out in memory:
//
//   fprop  Y  (npq x k)   = P (npq x crs) W^T        P = im2col(x): row (image, oh, ow), column (ci, ri, si)
//   dgrad  dP (npq x crs) = dY (npq x k) W           then dx = col2im(dP)
//   wgrad  dW (k x crs)   = dY^T P                   K = npq, the batch's output positions
//
// with W the filters as a k x crs matrix (their NCHW storage) and Y, dY the output and its gradient with one
// row per output position. col2im adds each patch element back onto its input element in fp32, in the
// order of P's rows, then columns: an implicit-GEMM kernel reduces dgrad in one pass instead (the plain
// emulator's conv2d_backward_data does), so under these recipes dx carries this extra, uncounted fp32
// summation of at most r s terms per element.
#pragma once

#include <span>
#include <vector>

#include "ops/conv2d_shape.h"

namespace mpverify::nn {

// P = im2col(x), x in NCHW; zeros where a window reaches into the padding.
std::vector<float> im2col_rows(const ops::Conv2dShape& s, std::span<const float> x);

// dx = col2im(dP): dx (NCHW, overwritten) gets the sum of every patch element that window read it as.
void col2im_rows(const ops::Conv2dShape& s, std::span<const float> patches, std::span<float> dx);

// y (n k p q, NCHW) from the position-major Y (npq x k), and back.
void positions_to_nchw(const ops::Conv2dShape& s, std::span<const float> rows, std::span<float> y);
std::vector<float> nchw_to_positions(const ops::Conv2dShape& s, std::span<const float> y);

}  // namespace mpverify::nn
