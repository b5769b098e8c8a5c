#include "cli/ops/gemm_policy_option.h"

#include "cli/commands.h"

namespace mpverify::cli::ops {

emu::GemmPolicy gemm_policy_option(const KeyValues& kv) {
  emu::GemmPolicy policy;
  policy.input = format_option(kv, "input", "--policy", policy.input);
  policy.output = format_option(kv, "output", "--policy", policy.output);
  if (auto it = kv.find("accumulate"); it != kv.end()) {
    if (it->second == "fp32") policy.accumulation = emu::Accumulation::fp32;
    else if (it->second == "fp16") policy.accumulation = emu::Accumulation::fp16;
    else if (it->second == "tensor-core") policy.accumulation = emu::Accumulation::tensor_core;
    else throw UsageError("--policy: accumulate=" + it->second + ": expected fp32, fp16 or tensor-core");
  }
  policy.tensor_core.block_size = whole_number(kv, "block", "--policy", policy.tensor_core.block_size);
  policy.tensor_core.extra_bits = whole_number(kv, "extra", "--policy", policy.tensor_core.extra_bits);
  if (policy.tensor_core.block_size < 1) throw UsageError("--policy: block must be at least 1");
  if (auto it = kv.find("tc-rounding"); it != kv.end()) {
    if (it->second == "rtz") policy.tensor_core.rounding = formats::Rounding::toward_zero;
    else if (it->second == "rne") policy.tensor_core.rounding = formats::Rounding::nearest_even;
    else throw UsageError("--policy: tc-rounding=" + it->second + ": expected rtz or rne");
  }
  return policy;
}

nlohmann::json to_json(const emu::GemmPolicy& policy) {
  nlohmann::json j = {{"input", policy.input.name},
                      {"accumulate", std::string(emu::to_string(policy.accumulation))},
                      {"output", policy.output.name}};
  if (policy.accumulation == emu::Accumulation::tensor_core) {
    j["block"] = policy.tensor_core.block_size;
    j["extra"] = policy.tensor_core.extra_bits;
    j["tc-rounding"] = policy.tensor_core.rounding == formats::Rounding::toward_zero ? "rtz" : "rne";
  }
  return j;
}

double accumulation_unit_roundoff(const emu::GemmPolicy& policy) {
  switch (policy.accumulation) {
    case emu::Accumulation::fp16: return 0x1p-11;
    case emu::Accumulation::tensor_core: return 0x1p-21;
    case emu::Accumulation::fp32: break;
  }
  return 0x1p-24;
}

}  // namespace mpverify::cli::ops
