// --policy for ops that multiply and accumulate (gemm, conv2d): input=FORMAT, input-b=FORMAT,
// accumulate=fp32|fp16|tensor-core|ARCHITECTURE|PRESET, promotion=N, output=FORMAT, block=N, extra=N,
// tc-rounding=rtz|rne, step-inexact=0|1. Shared so the two read the same keys the same way.
#pragma once

#include <nlohmann/json.hpp>

#include "cli/ops/op_common.h"
#include "emu/gemm_emu.h"

namespace mpverify::cli::ops {

inline constexpr const char* kGemmPolicyHelp =
    "input=FORMAT (fp16; A's, and B's unless input-b=FORMAT), accumulate=fp32|fp16|tensor-core|ARCHITECTURE|PRESET "
    "(volta..blackwell: the architecture's tensor-core instruction; a preset of mpverify eval --op dot --list), "
    "promotion=N (with an architecture: fp32 promotion every N elements), output=FORMAT (fp32), block=N and "
    "extra=N (tensor-core model), tc-rounding=rtz|rne, step-inexact=1 (with accumulate=fp32: count each step's "
    "inexact at gemm.accumulate too, which slows the counted GEMM; fp16 and the instruction models always count it)";

// Reads the keys above (and only those: others are the caller's to check).
emu::GemmPolicy gemm_policy_option(const KeyValues& policy);
nlohmann::json to_json(const emu::GemmPolicy& policy);

// The unit roundoff of one accumulation step under the policy: fp32 2^-24,
// fp16 2^-11, the tensor-core model 2^-21 (the bound used for the default
// 3 extra bits; truncation and the round-toward-zero of each block's sum),
// an instruction model's per its F and output (see the .cpp).
double accumulation_unit_roundoff(const emu::GemmPolicy& policy);

}  // namespace mpverify::cli::ops
