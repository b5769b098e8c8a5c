// The block size of a row-wise reduction (layer norm's statistics, softmax's
// max and sum): one warp of 32 threads per row, each thread summing the
// elements lane, lane + 32, ... and the lanes combined as a tree, which is
// emu/block_sum.h with 32 lanes. No CUDA kernel of this toolkit runs these
// ops yet; 32 is the order the emulator models (PyTorch's persistent-warp
// LayerNorm and softmax kernels for rows of up to 1024 elements give each
// warp one row).
#pragma once

namespace mpverify::emu {

inline constexpr int kRowReductionLanes = 32;

}  // namespace mpverify::emu
