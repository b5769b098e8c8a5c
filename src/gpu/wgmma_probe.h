#pragma once
// The probe of mma_probe.h for Hopper's wgmma (sm_90a): one warpgroup per dot product issues one
// wgmma.mma_async m64n8kK per k elements, A from registers (the dot's a in row 0), B from shared memory
// through a descriptor (the dot's b in column 0), D in registers starting at c, so the chain is the one
// emu::mma_dot models. Internal to the GPU side: mma_probe() calls it for the sm90.wgmma presets.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "emu/mma_model.h"

namespace mpverify::gpu::detail {

// Empty when this build holds sm_90a code of the wgmma kernel for the present device (an sm_90 one), else
// why not; mma_probe_device_reason() asks it. A build for compute_90 or sm_90 without the "a" compiles the
// kernel's stub, which only reports that it was not built.
std::string wgmma_build_reason();

// Before any case, a layout check: k dots whose a is one-hot must each give back the b it was paired with;
// throws std::runtime_error saying which pairing failed, or that this build holds no sm_90a code.
std::vector<std::uint32_t> wgmma_probe(const emu::MmaModel& m, std::span<const std::uint32_t> a,
                                       std::span<const std::uint32_t> b, std::span<const std::uint32_t> c, int K);

}  // namespace mpverify::gpu::detail
