// The gpu backend (see nn/backend.h): the CUDA ops of src/gpu.
#pragma once

#include <memory>

#include "nn/backend.h"

namespace mpverify::nn {

// Throws std::runtime_error with gpu::gpu_unavailable_reason() when the
// build has no CUDA or no device is usable.
std::unique_ptr<Backend> make_gpu_backend();

}  // namespace mpverify::nn
