// Owns one device allocation (RAII), for the CUDA side's host wrappers.
#pragma once

#include <cstddef>

#include "gpu/check.h"

namespace mpverify::gpu::detail {

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) { MPVERIFY_CUDA_CHECK(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes)); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

// A device array of n floats.
struct DeviceFloats : DeviceBuffer {
  explicit DeviceFloats(std::size_t n) : DeviceBuffer(n * sizeof(float)) {}
  float* get() const { return as<float>(); }
};

}  // namespace mpverify::gpu::detail
