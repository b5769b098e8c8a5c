// The emu backend (see nn/backend.h): the emulated ops with the policy given.
#pragma once

#include "nn/backend.h"

namespace mpverify::nn {

class EmuBackend final : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::emu; }
#include "nn/backend_overrides.inc"
#include "nn/backend_row_ops.inc"
  void block_scaled_gemm(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                         std::span<float> c, const emu::BlockScaledGemmPolicy& policy,
                         emu::BlockScaledGemmCounters* counters) override;
};

}  // namespace mpverify::nn
