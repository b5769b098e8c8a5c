// The hyperparameters and the shape check of batch normalisation, shared by
// the three sides (refs::batch_norm_ref, emu::batch_norm_emu,
// gpu::batch_norm_gpu).
#pragma once

#include "ops/channel_shape.h"

namespace mpverify::ops {

struct BatchNormParams {
  double eps = 1e-5;
  double momentum = 0.1;
};

// Throws std::invalid_argument unless the dimensions are >= 1, M >= 2 (the
// unbiased variance divides by M - 1) and M <= 2^24 (M and M - 1 are exact
// in fp32, as the GPU kernels need).
void check_batch_norm_shape(const ChannelShape& s, const char* op);

}  // namespace mpverify::ops
