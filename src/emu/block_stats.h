// What the training recorders report about one block quantization of a tensor beyond its event counts
// (BlockCounters, block_quantize.h): the signal-to-quantization-noise ratio of the dequantized values
// against the input (torchao's numerics gate asks for more than 20 dB), the denominator of the underflow rate,
// and a histogram of the blocks' scale exponents (where in the scale format's range the blocks sit, and how
// many press against its ends).
#pragma once

#include <cstdint>
#include <map>
#include <span>

#include "emu/block_quantize.h"

namespace mpverify::emu {

struct BlockStats {
  std::uint64_t nonzero_in = 0;  // finite non-zero inputs (underflow_to_zero / nonzero_in is the underflow rate)
  double signal = 0;             // sum of x^2 over the finite inputs whose dequantized value is finite
  double noise = 0;              // sum of (x - v)^2 over the same elements
  std::uint64_t counted = 0;     // those elements
  // floor(log2 s) of each block's scale s > 0 (an NVFP4 block: its UE4M3 scale alone, without the tensor
  // scale) -> the number of blocks; blocks whose scale is 0 (an NVFP4 block scale that rounded to 0) apart.
  std::map<int, std::uint64_t> scale_exponents;
  std::uint64_t zero_scales = 0;

  // 10 log10(signal / noise): +inf when there is no noise, NaN when no element counted (as sqnr_db).
  double sqnr_db() const;
  BlockStats& operator+=(const BlockStats& other);
  friend bool operator==(const BlockStats&, const BlockStats&) = default;
};

// The statistics of q = block_quantize(x, ...). Throws std::invalid_argument when the sizes differ.
BlockStats block_stats(std::span<const float> x, const BlockQuantized& q);

}  // namespace mpverify::emu
