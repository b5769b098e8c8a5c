// The GPU side's probe. Without a device (or without CUDA) the tests skip
// with the reason; they never pass silently.
#include <gtest/gtest.h>

#include "gpu/device.h"

namespace {

using namespace mpverify;

// First in the file: run alone (ctest runs each case in its own process) or first of the suite, its
// process has not called cuBLAS yet. The program, every suite and the Python module link the GPU side;
// cuBLAS's static initializers took about 0.4 s of each process start before it was opened on demand.
TEST(DeviceGpu, CublasOpensOnFirstUseNotAtStart) {
  if (!gpu::built_with_cuda()) GTEST_SKIP() << gpu::gpu_unavailable_reason();
  EXPECT_FALSE(gpu::cublas_is_loaded()) << "cuBLAS was loaded before anything called it";
  EXPECT_NE(gpu::linked_cublas_version(), "unknown");  // the first call opens it
  EXPECT_TRUE(gpu::cublas_is_loaded());
}

TEST(DeviceGpu, ReasonIsEmptyExactlyWhenADeviceIsUsable) {
  const std::string reason = gpu::gpu_unavailable_reason();
  if (!gpu::built_with_cuda()) {
    EXPECT_NE(reason.find("built without CUDA"), std::string::npos) << reason;
    GTEST_SKIP() << reason;
  }
  if (!reason.empty()) {
    EXPECT_THROW(gpu::describe_device(), std::runtime_error);
    GTEST_SKIP() << reason;
  }
  const gpu::DeviceInfo info = gpu::describe_device();
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.compute_capability, 70);
  EXPECT_GT(info.driver_version, 0);
}

TEST(DeviceGpu, LinkedLibrariesReportVersions) {
  if (!gpu::built_with_cuda()) GTEST_SKIP() << gpu::gpu_unavailable_reason();
  // cuBLAS and cuDNN answer without a device: this proves they are found (cuBLAS is opened on this call).
  EXPECT_NE(gpu::linked_cublas_version(), "unknown");
  EXPECT_EQ(gpu::linked_cudnn_version().substr(0, 2), "9.");
}

}  // namespace
