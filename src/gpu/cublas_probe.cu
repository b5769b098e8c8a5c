// Versions of the linked cuBLAS and cuDNN: asked of the libraries themselves,
// without a device, so a build can show what it linked.
#include <string>

#include "gpu/check.h"
#include "gpu/device.h"

namespace mpverify::gpu {

std::string linked_cublas_version() {
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS)
    return "unknown";
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string linked_cudnn_version() {
  // cudnnGetVersion encodes major*10000 + minor*100 + patch since cuDNN 9.
  const std::size_t v = cudnnGetVersion();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

}  // namespace mpverify::gpu
