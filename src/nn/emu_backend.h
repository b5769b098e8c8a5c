// The emu backend (see nn/backend.h): the emulated ops with the policy given.
#pragma once

#include "nn/backend.h"

namespace mpverify::nn {

class EmuBackend final : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::emu; }
#include "nn/backend_overrides.inc"
};

}  // namespace mpverify::nn
