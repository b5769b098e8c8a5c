// The gpu backend (see nn/backend.h): the CUDA ops of src/gpu.
//
// Each op first maps its policy to what the CUDA functions can compute
// (gpu/gemm_gpu.h's GemmCompute, gpu/conv2d_gpu.h's ConvCompute, the fp16
// element-wise kernels, gpu/optimizer_gpu.h's OptimizerStorage) and throws
// std::invalid_argument, naming what the GPU path cannot do, when there is
// no such mapping; only then does it call the device. Where the mapping is
// not exact (a kernel's fp16 output under an fp32 output policy, the losses
// computed on the host) gpu_backend.cpp says how it differs.
#pragma once

#include <memory>

#include "nn/backend.h"

namespace mpverify::nn {

// Made by make_gpu_backend(), which checks for a device first. Constructing
// one directly skips that check (the tests do, to reach the policy checks on
// a machine without a GPU): an op whose policy is valid then throws the
// gpu:: function's std::runtime_error (gpu::gpu_unavailable_reason()).
class GpuBackend final : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::gpu; }
#include "nn/backend_overrides.inc"
};

// Throws std::runtime_error with gpu::gpu_unavailable_reason() when the
// build has no CUDA or no device is usable.
std::unique_ptr<Backend> make_gpu_backend();

}  // namespace mpverify::nn
