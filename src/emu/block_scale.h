// A block's scale from its amax, for each ScaleFormat of block_quantize.h
// (where the rules and their sources are written down). Internal to
// block_quantize.cpp.
#pragma once

#include "emu/block_quantize.h"
#include "formats/format.h"

namespace mpverify::emu::detail {

struct BlockScale {
  double divisor = 1;         // X: each element is stored as round(x / X); exact (at most 28 significant bits)
  float stored = 1;           // the value BlockQuantized::scales reports
  bool power_of_two = false;  // X = 2^k, so x / X is exact in double
  bool clamped = false;       // counted in BlockCounters::scales_clamped
};

// E8M0 under `rule`; amax 0 gives 2^-127, an infinite amax 2^127 (neither clamped).
BlockScale e8m0_scale(float amax, const formats::Format& element, ScaleRule rule);

// fl32(max(amax, amax_floor) / max_elem); 1 for an amax (after the floor) of 0 or infinity.
BlockScale fp32_scale(float amax, const formats::Format& element, float amax_floor);

// NVFP4's fp32 tensor scale: fl32(tensor_amax / (448 * max_elem)) (2688 for
// E2M1), 1 for an amax of 0 or infinity.
float nvfp4_tensor_scale(float tensor_amax, const formats::Format& element);

// NVFP4's UE4M3 block scale: RNE((block_amax / max_elem) / s_tensor),
// saturating at 448; `stored` is the UE4M3 value and `divisor` it times s_tensor.
BlockScale nvfp4_block_scale(float block_amax, float tensor_scale, const formats::Format& element);

}  // namespace mpverify::emu::detail
