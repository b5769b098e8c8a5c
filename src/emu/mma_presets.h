#pragma once
// The tensor-core instructions of each NVIDIA architecture as named models (mma_model.h), named the way
// CUTLASS names its kernels: ARCH.INSTRUCTION.SHAPE.OUTPUT.INPUTS, e.g. sm80.mma.m16n8k16.f32.bf16 (Ampere's
// mma.sync, bf16 operands, fp32 accumulator and output) or sm90.wgmma.k32.f32.e4m3.e5m2 (Hopper's warpgroup
// MMA, A in E4M3, B in E5M2). F per architecture, the split into halves and the FP8 exceptions follow
// MMA-Sim (microsoft/MMA-Sim at commit c785138: mmasim/simulator/nv_ptx.py, classes mma, wgmma and
// tcgen05mma with arch_accum_fractional_bits, is_split_k and the Ada and wgmma FP8 cases; the instruction
// lists of mmasim/isa/nv_ptx/nv_mma.py, nv_wgmma.py and nv_tcgen05mma.py. Older snapshots named them
// simulator/nv.py and isa/nv_mma.py.)
#include <string>
#include <string_view>
#include <vector>

#include "emu/mma_model.h"

namespace mpverify::emu {

// Every preset, in architecture order.
const std::vector<MmaModel>& mma_presets();

// The preset of that name; throws std::invalid_argument naming the architectures and how to list the names.
const MmaModel& mma_preset(std::string_view name);

// The architectures' names (volta, turing, ampere, ada, hopper, blackwell).
const std::vector<std::string>& mma_architectures();

// The instruction a GEMM uses on that architecture for these operand and accumulator formats: the largest k
// of the architecture's main instruction (Hopper: wgmma; Blackwell: tcgen05.mma); throws
// std::invalid_argument when the architecture has no such instruction.
const MmaModel& mma_for_architecture(std::string_view arch, const formats::Format& a, const formats::Format& b,
                                     const formats::Format& c);

// A model from raw parameters ("custom"); validated.
MmaModel mma_custom(const formats::Format& a, const formats::Format& b, const formats::Format& c, int k,
                    int fraction_bits, bool split_halves, MmaOutput output);

std::string_view to_string(MmaOutput o);

}  // namespace mpverify::emu
