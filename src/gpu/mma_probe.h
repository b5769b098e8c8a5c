#pragma once
// The tensor-core instruction itself, for measuring the models of emu/mma_presets.h against the hardware
// bit for bit: a kernel in which each warp issues one mma.sync per k elements of one dot product, in order
// of increasing K, each result the next one's c (the order emu::mma_dot models), with the dot's a in row 0
// of A, its b in column 0 of B, its c in C[0][0] and zeros elsewhere; d is D[0][0].
// The PTX is the model's (its name's shape and types); what it computes is the present GPU's.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "emu/mma_model.h"

namespace mpverify::gpu {

// The PTX the probe issues, as the presets spell it after their architecture ("mma.m16n8k16.f32.f16"), in the
// order of the kernel's own list: mma.sync shapes of Turing and Ampere (kept by every later architecture),
// the FP8 m16n8k32 of sm_89 and later with fp32 output, then Hopper's wgmma ("wgmma.k16.f32.f16"; sm_90a).
const std::vector<std::string>& mma_probe_instructions();

// Empty when the probe can issue the model's instruction, else why not (wgmma, for one, is not probed).
std::string mma_probe_unsupported_reason(const emu::MmaModel& m);

// Empty when the present device and this build can run the probe of m's instruction, else why not: no
// usable device, an instruction the probe does not issue, wgmma on a device other than sm_90 or from a build
// without sm_90a code, FP8 mma.sync before sm_89, or no code of the probe kernel for this device. GPU tests
// skip with it; mma_probe throws it.
std::string mma_probe_device_reason(const emu::MmaModel& m);

// n = c.size() dot products of length K (a multiple of m.k): a and b hold n * K operand bits in m.a's and
// m.b's formats (dot i at [i * K, (i + 1) * K)), c the accumulators' bits in m.c's format; returns the n
// results in m.c's format. Throws std::runtime_error with the reason when no device or no such instruction.
std::vector<std::uint32_t> mma_probe(const emu::MmaModel& m, std::span<const std::uint32_t> a,
                                     std::span<const std::uint32_t> b, std::span<const std::uint32_t> c, int K);

}  // namespace mpverify::gpu
