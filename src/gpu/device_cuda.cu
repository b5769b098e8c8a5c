#include <stdexcept>
#include <string>

#include "gpu/check.h"
#include "gpu/device.h"

namespace mpverify::gpu {

bool built_with_cuda() { return true; }

std::string gpu_unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorInsufficientDriver || status == cudaErrorNoDevice) {
    cudaGetLastError();  // clear the sticky error
    return status == cudaErrorNoDevice ? "no CUDA device" : "no CUDA driver";
  }
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string("CUDA unusable: ") + cudaGetErrorString(status);
  }
  if (count == 0) return "no CUDA device";
  return {};
}

DeviceInfo describe_device() {
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) throw std::runtime_error(reason);
  DeviceInfo info;
  cudaDeviceProp props{};
  MPVERIFY_CUDA_CHECK(cudaGetDeviceProperties(&props, 0));
  info.name = props.name;
  info.compute_capability = props.major * 10 + props.minor;
  MPVERIFY_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  MPVERIFY_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  info.cublas_version = linked_cublas_version();
  info.cudnn_version = linked_cudnn_version();
  return info;
}

}  // namespace mpverify::gpu
