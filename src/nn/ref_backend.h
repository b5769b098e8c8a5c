// The ref backend (see nn/backend.h): Eigen FP32, and nothing else.
#pragma once

#include "nn/backend.h"
#include "nn/precision.h"

namespace mpverify::nn {

class RefBackend final : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::ref; }
#include "nn/backend_overrides.inc"
#include "nn/backend_row_ops.inc"
};

}  // namespace mpverify::nn
