// The GPU side's probe. Without a device (or without CUDA) the tests skip
// with the reason; they never pass silently.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/algorithm_fallback.h"
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

// The algorithm fallback of the GPU side's library calls (gpu/algorithm_fallback.h), against a fake library
// whose refusals are scripted: no device is needed to hold the order of attempts.
namespace algorithm_fallback {

using mpverify::gpu::detail::Attempt;

struct FakeLibrary {
  std::vector<int> refuses;  // algorithms it refuses (at the query or at the call: one outcome for the caller)
  std::vector<int> heuristics;
  std::vector<int> attempts;
  int listings = 0;
  int run(const std::string& what = "conv") {
    return mpverify::gpu::detail::run_first_accepted<int>(
        7,
        [this] {
          ++listings;
          return heuristics;
        },
        [this](int algo) {
          attempts.push_back(algo);
          return std::find(refuses.begin(), refuses.end(), algo) != refuses.end() ? Attempt::refused : Attempt::ran;
        },
        [](int algo) { return "algo" + std::to_string(algo); }, what);
  }
};

TEST(AlgorithmFallback, ThePreferredAlgorithmRunsWithoutAskingTheHeuristics) {
  FakeLibrary lib{{}, {1, 2}, {}, 0};
  EXPECT_EQ(lib.run(), 7);
  EXPECT_EQ(lib.attempts, std::vector<int>({7}));
  EXPECT_EQ(lib.listings, 0);
}

TEST(AlgorithmFallback, ARefusedAlgorithmFallsBackInTheListedOrderSkippingOnesTried) {
  // 7 is refused (as cuDNN's fixed algorithm 1 was, at the call, after its workspace query succeeded); the
  // list repeats 7 and its first other entry is refused too, so 2 is the one that runs.
  FakeLibrary lib{{7, 1}, {7, 1, 2, 3}, {}, 0};
  EXPECT_EQ(lib.run(), 2);
  EXPECT_EQ(lib.attempts, std::vector<int>({7, 1, 2}));
  EXPECT_EQ(lib.listings, 1);
}

TEST(AlgorithmFallback, EveryAlgorithmRefusedThrowsNamingEachOnce) {
  FakeLibrary lib{{7, 1, 2}, {1, 7, 2, 1}, {}, 0};
  try {
    lib.run("conv2d_gpu: cuDNN's forward convolution");
    ADD_FAILURE() << "no algorithm ran, yet nothing was thrown";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "conv2d_gpu: cuDNN's forward convolution: no algorithm ran; refused: algo7, algo1, algo2");
  }
  EXPECT_EQ(lib.attempts, std::vector<int>({7, 1, 2}));
}

}  // namespace algorithm_fallback
