// Reference bias add over NCHW, one bias per channel (a Linear layer's output
// is the case n x c x 1 x 1): y = x + b[c]; backward db[c] = sum over n, h, w
// of dy. dx = dy is the identity and is not computed (no arithmetic happens).
// In FP64, the float outputs rounded once. Same signature shape as
// emu::bias_add_emu and gpu::bias_add_gpu.
#pragma once

#include <span>
#include <vector>

#include "ops/channel_shape.h"

namespace mpverify::refs {

// The oracle in double (finite-difference checks perturb its inputs).
std::vector<double> bias_add_fp64(const ops::ChannelShape& s, std::span<const double> x, std::span<const double> b);
std::vector<double> bias_add_backward_fp64(const ops::ChannelShape& s, std::span<const double> dy);

// Sizes: x, y, dy: s.size(); b, db: s.c. Throws std::invalid_argument naming a wrong one.
void bias_add_ref(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> b, std::span<float> y);
void bias_add_backward_ref(const ops::ChannelShape& s, std::span<const float> dy, std::span<float> db);

}  // namespace mpverify::refs
