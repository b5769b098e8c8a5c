#include "cli/ops/gemm_policy_option.h"

#include <algorithm>
#include <cmath>

#include "cli/commands.h"
#include "emu/mma_presets.h"

namespace mpverify::cli::ops {

namespace {

// accumulate=ARCHITECTURE (the architecture's GEMM instruction for the input formats, fp32 accumulator) or
// accumulate=PRESET (emu/mma_presets.h), whose operand formats must be the policy's.
emu::GemmPolicy with_mma(emu::GemmPolicy policy, const std::string& name) {
  static const formats::Format fp32 = formats::parse_format("fp32");
  try {
    const bool preset = name.find('.') != std::string::npos;
    const emu::MmaModel& m = preset ? emu::mma_preset(name)
                                    : emu::mma_for_architecture(name, policy.input, policy.b_format(), fp32);
    policy.accumulation = emu::Accumulation::mma;
    policy.mma = m;
    const bool same = formats::same_values(m.a, policy.input) && formats::same_values(m.b, policy.b_format());
    const bool swapped = formats::same_values(m.b, policy.input) && formats::same_values(m.a, policy.b_format());
    if (!same && !swapped)
      throw UsageError("--policy: accumulate=" + name + " multiplies " + m.a.name + " by " + m.b.name + ", but the "
                       "inputs are " + policy.input.name + " and " + policy.b_format().name + " (set input= and input-b=)");
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--policy: accumulate=") + name + ": expected fp32, fp16, tensor-core, an "
                     "architecture (volta, turing, ampere, ada, hopper, blackwell) or a preset (mpverify eval --op "
                     "dot --list): " + e.what());
  }
  return policy;
}

}  // namespace

emu::GemmPolicy gemm_policy_option(const KeyValues& kv) {
  emu::GemmPolicy policy;
  policy.input = format_option(kv, "input", "--policy", policy.input);
  if (kv.contains("input-b")) policy.input_b = format_option(kv, "input-b", "--policy", policy.input);
  policy.output = format_option(kv, "output", "--policy", policy.output);
  if (auto it = kv.find("accumulate"); it != kv.end()) {
    if (it->second == "fp32") policy.accumulation = emu::Accumulation::fp32;
    else if (it->second == "fp16") policy.accumulation = emu::Accumulation::fp16;
    else if (it->second == "tensor-core") policy.accumulation = emu::Accumulation::tensor_core;
    else policy = with_mma(policy, it->second);
  }
  policy.promotion_interval = whole_number(kv, "promotion", "--policy", 0);
  if (policy.promotion_interval != 0 && policy.accumulation != emu::Accumulation::mma)
    throw UsageError("--policy: promotion=N needs accumulate=ARCHITECTURE or a tensor-core preset");
  if (policy.promotion_interval != 0 && policy.promotion_interval % policy.mma->k != 0)
    throw UsageError("--policy: promotion=" + std::to_string(policy.promotion_interval) + " is not a multiple of k = " +
                     std::to_string(policy.mma->k) + " of " + policy.mma->name);
  policy.tensor_core.block_size = whole_number(kv, "block", "--policy", policy.tensor_core.block_size);
  policy.tensor_core.extra_bits = whole_number(kv, "extra", "--policy", policy.tensor_core.extra_bits);
  if (policy.tensor_core.block_size < 1) throw UsageError("--policy: block must be at least 1");
  if (auto it = kv.find("tc-rounding"); it != kv.end()) {
    if (it->second == "rtz") policy.tensor_core.rounding = formats::Rounding::toward_zero;
    else if (it->second == "rne") policy.tensor_core.rounding = formats::Rounding::nearest_even;
    else throw UsageError("--policy: tc-rounding=" + it->second + ": expected rtz or rne");
  }
  if (auto it = kv.find("step-inexact"); it != kv.end()) {
    if (it->second != "0" && it->second != "1")
      throw UsageError("--policy: step-inexact=" + it->second + ": expected 0 or 1");
    policy.count_step_inexact = it->second == "1";
    if (policy.count_step_inexact && policy.accumulation != emu::Accumulation::fp32)
      throw UsageError("--policy: step-inexact=1 needs accumulate=fp32 (fp16 and the instruction models count every "
                       "step's inexact anyway; the tensor-core model counts no steps)");
  }
  return policy;
}

nlohmann::json to_json(const emu::GemmPolicy& policy) {
  nlohmann::json j = {{"input", policy.input.name},
                      {"input-b", policy.b_format().name},
                      {"accumulate", std::string(emu::to_string(policy.accumulation))},
                      {"output", policy.output.name}};
  if (policy.accumulation == emu::Accumulation::tensor_core) {
    j["block"] = policy.tensor_core.block_size;
    j["extra"] = policy.tensor_core.extra_bits;
    j["tc-rounding"] = policy.tensor_core.rounding == formats::Rounding::toward_zero ? "rtz" : "rne";
  }
  if (policy.count_step_inexact) j["step-inexact"] = 1;  // only when set: the default policy's JSON is unchanged
  if (policy.accumulation == emu::Accumulation::mma) {
    j["mma"] = policy.mma->name;
    j["promotion"] = policy.promotion_interval;
  }
  return j;
}

double accumulation_unit_roundoff(const emu::GemmPolicy& policy) {
  switch (policy.accumulation) {
    case emu::Accumulation::fp16: return 0x1p-11;
    case emu::Accumulation::tensor_core: return 0x1p-21;
    case emu::Accumulation::mma: return emu::mma_unit_roundoff(*policy.mma);
    case emu::Accumulation::fp32: break;
  }
  return 0x1p-24;
}

}  // namespace mpverify::cli::ops
