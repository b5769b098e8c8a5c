// `ops --op gemm` with a hook on the emulator's side: the policy the emulator runs is --policy's, changed by
// `alter_emulator`, while the reference keeps --policy's. A test changes the emulator's tensor-core model by
// one fraction bit this way and sees the comparison fail (the model reference is independent code).
#pragma once

#include <functional>
#include <vector>

#include "cli/ops/op_common.h"
#include "emu/gemm_emu.h"

namespace mpverify::cli::ops {

OpResult run_gemm_altering_emulator(const OpArgs& args, std::vector<Side> sides,
                                    const std::function<void(emu::GemmPolicy&)>& alter_emulator);

}  // namespace mpverify::cli::ops
