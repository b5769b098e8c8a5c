// The summation order of this toolkit's CUDA reductions over one channel
// (the bias gradient, the batch-norm statistics and parameter gradients),
// modelled exactly so that the emulator's sums, and its swamping counts, are
// the kernel's:
//
//   one block of `lanes` threads per channel; thread t keeps a running sum of
//   terms t, t + lanes, t + 2 lanes, ... in that order (starting from 0);
//   then the lane sums are combined in shared memory, for
//   stride = lanes/2, lanes/4, ..., 1: s[t] <- s[t] + s[t + stride], t < stride.
//
// Every addition is one rounding of (sum + exact term) to the format, as an
// fp32 kernel's fadd or fma into the running sum (see emu::Accumulator).
// lanes = 1 is plain recursive summation. A term goes through at most
// block_sum_depth(M, lanes) = ceil(M / lanes) + log2(lanes) roundings, so the
// error is at most gamma_depth(u) * sum |term| (Higham, 2002, sec. 4.2).
#pragma once

#include <cstddef>
#include <span>

#include "emu/counters.h"
#include "formats/format.h"

namespace mpverify::emu {

// The block size of the GPU reductions in src/gpu (bias_add_gpu, batch_norm_gpu).
inline constexpr int kGpuReductionLanes = 256;

// Throws std::invalid_argument unless lanes is a power of two in 1..1024.
void check_lanes(int lanes);

// Counts every addition (lane steps and tree steps, idle lanes' zeros
// included: the kernel performs them) into *counters when not null.
double block_sum(std::span<const double> terms, const formats::Format& format, int lanes,
                 Counters* counters = nullptr);

// ceil(m / lanes) + log2(lanes): the most roundings any term goes through.
std::size_t block_sum_depth(std::size_t m, int lanes);

}  // namespace mpverify::emu
