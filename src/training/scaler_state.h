// A strategy started from a framework's saved scaler state rather than from
// its first step (`mpverify replay-scalers --initial-state`). The fields are
// the frameworks' own, as their checkpoints hold them:
//
// torch     GradScaler.state_dict() (pytorch/pytorch torch/amp/grad_scaler.py):
//           scale, growth_factor, backoff_factor, growth_interval, _growth_tracker
// nemo      NeMo's GradScaler.state_dict() (NVIDIA/NeMo nemo/collections/nlp/
//           parts/nlp_overrides.py): torch's fields and _hysteresis_tracker
// megatron  DynamicGradScaler.state_dict() (NVIDIA/Megatron-LM megatron/core/
//           optimizer/grad_scaler.py): scale (a one-element tensor: a number or
//           [number]), growth_tracker, hysteresis_tracker
// deepspeed the loss scaler's attributes (deepspeedai/DeepSpeed
//           deepspeed/runtime/fp16/loss_scaler.py, DynamicLossScaler; the same
//           names in FP16_Optimizer.state_dict()): cur_scale, cur_iter,
//           last_overflow_iter, cur_hysteresis (zero only)
//
// A field left out keeps the strategy's configured value (its options, else
// its default); a scale replaces `init`. The strategy continues exactly as the
// framework would after load_state_dict(): a replay from the state after k
// steps equals steps k, k + 1, ... of the replay from the start.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "training/loss_scaler.h"

namespace mpverify::training {

// torch, nemo, megatron, deepspeed.
std::vector<std::string> strategies_with_state();

// Throws std::invalid_argument naming the strategy and field: a strategy
// without a known state, an unknown field, a value of the wrong type or range.
std::unique_ptr<Scaler> make_scaler_from_state(std::string_view name, const ScalerOptions& options,
                                               const nlohmann::json& state);

}  // namespace mpverify::training
