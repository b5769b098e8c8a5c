// Status checks for CUDA, cuBLAS and cuDNN calls: every call on the GPU side
// goes through one of these, which throws with the file, the line, the call
// and the library's own message.
#pragma once

#include <stdexcept>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

namespace mpverify::gpu::detail {

[[noreturn]] inline void fail(const char* library, const char* message, const char* call, const char* file,
                              int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + library + " error '" + message +
                           "' in " + call);
}

}  // namespace mpverify::gpu::detail

#define MPVERIFY_CUDA_CHECK(call)                                                                     \
  do {                                                                                               \
    const cudaError_t mpverify_status_ = (call);                                                     \
    if (mpverify_status_ != cudaSuccess)                                                             \
      ::mpverify::gpu::detail::fail("CUDA", cudaGetErrorString(mpverify_status_), #call, __FILE__, __LINE__); \
  } while (0)

#define MPVERIFY_CUBLAS_CHECK(call)                                                                      \
  do {                                                                                                  \
    const cublasStatus_t mpverify_status_ = (call);                                                     \
    if (mpverify_status_ != CUBLAS_STATUS_SUCCESS)                                                      \
      ::mpverify::gpu::detail::fail("cuBLAS", cublasGetStatusString(mpverify_status_), #call, __FILE__, __LINE__); \
  } while (0)

#define MPVERIFY_CUDNN_CHECK(call)                                                                       \
  do {                                                                                                  \
    const cudnnStatus_t mpverify_status_ = (call);                                                      \
    if (mpverify_status_ != CUDNN_STATUS_SUCCESS)                                                       \
      ::mpverify::gpu::detail::fail("cuDNN", cudnnGetErrorString(mpverify_status_), #call, __FILE__, __LINE__); \
  } while (0)
