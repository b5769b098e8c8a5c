// Emulated activations: inputs rounded to the policy's input format, f (or
// f' * dy) evaluated in double, the result rounded once to the output format,
// every rounding counted. This is what an fp16 kernel that computes in fp32
// internally would give if its fp32 math were exact.
#pragma once

#include <span>

#include "emu/counters.h"
#include "formats/format.h"
#include "ops/activation_params.h"

namespace mpverify::emu {

struct ElementwisePolicy {
  formats::Format input = formats::parse_format("fp16");
  formats::Format output = formats::parse_format("fp16");
};

// Sites: "activation.x", "activation.y".
void activation_emu(const ops::ActivationParams& p, std::span<const float> x, std::span<float> y,
                    const ElementwisePolicy& policy, CounterSet* counters = nullptr);
// Sites: "activation_backward.x", "activation_backward.dy", "activation_backward.dx".
void activation_backward_emu(const ops::ActivationParams& p, std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx, const ElementwisePolicy& policy, CounterSet* counters = nullptr);

}  // namespace mpverify::emu
