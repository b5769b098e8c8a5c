// Is there a GPU to run the CUDA side on, and if not, why not?
//
// Tests on the GPU side call gpu_unavailable_reason() first and GTEST_SKIP
// with the reason when it is non-empty, so a machine without a GPU (or a
// build without CUDA) skips them visibly instead of failing or passing.
#pragma once

#include <string>

namespace mpverify::gpu {

// Whether this library was compiled with the CUDA side.
bool built_with_cuda();

// Empty when a CUDA device is usable; otherwise a sentence such as
// "built without CUDA", "no CUDA driver" or "no CUDA device".
std::string gpu_unavailable_reason();

struct DeviceInfo {
  std::string name;             // e.g. "NVIDIA H100 80GB HBM3"
  int compute_capability = 0;   // e.g. 90
  int driver_version = 0;       // CUDA driver API version, e.g. 13000
  int runtime_version = 0;      // CUDA runtime version linked
  std::string cublas_version;   // e.g. "13.0.0"
  std::string cudnn_version;    // e.g. "9.12.0"
};

// Describes device 0 and the linked libraries; throws std::runtime_error
// (with gpu_unavailable_reason()) when no device is usable. Library versions
// are filled in even without a device when built with CUDA.
DeviceInfo describe_device();

// Versions of the linked cuBLAS and cuDNN (no device needed); empty strings
// without CUDA.
std::string linked_cublas_version();
std::string linked_cudnn_version();

// Whether cuBLAS is in this process yet: the GPU side opens it on its first call
// (gpu/cublas_on_demand.cpp), not when the program starts. False without CUDA.
bool cublas_is_loaded();

}  // namespace mpverify::gpu
