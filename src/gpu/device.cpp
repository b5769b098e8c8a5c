// The host-only half: what the GPU side says when the library was built
// without CUDA. With CUDA, device_cuda.cu and cublas_probe.cu define these.
#include "gpu/device.h"

#ifndef MPVERIFY_WITH_CUDA
#include <stdexcept>

namespace mpverify::gpu {

bool built_with_cuda() { return false; }

std::string gpu_unavailable_reason() {
  return "built without CUDA (nvcc was not found, or the build used -DMPVERIFY_CUDA=OFF)";
}

DeviceInfo describe_device() { throw std::runtime_error(gpu_unavailable_reason()); }
std::string linked_cublas_version() { return {}; }
std::string linked_cudnn_version() { return {}; }
bool cublas_is_loaded() { return false; }

}  // namespace mpverify::gpu
#endif
