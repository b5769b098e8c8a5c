#include <cuda_fp16.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/algorithm_fallback.h"
#include "gpu/check.h"
#include "gpu/conv2d_gpu.h"
#include "gpu/device.h"
#include "gpu/device_buffer.h"

namespace mpverify::gpu {

namespace {

using detail::DeviceBuffer;

// One cuDNN object, created and destroyed with the library's pair of calls.
template <typename T, cudnnStatus_t (*create)(T*), cudnnStatus_t (*destroy)(T)>
class Owned {
 public:
  Owned() { MPVERIFY_CUDNN_CHECK(create(&object_)); }
  ~Owned() { destroy(object_); }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  T get() const { return object_; }

 private:
  T object_{};
};

using Handle = Owned<cudnnHandle_t, cudnnCreate, cudnnDestroy>;
using TensorDescriptor = Owned<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDescriptor = Owned<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor =
    Owned<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;

// One cuDNN handle per thread, for the thread's life: cudnnCreate costs far
// more than a small convolution, and one handle must not serve two threads
// at once. No call sets state on it (stream, math type: the descriptors
// carry their own).
const Handle& thread_cudnn() {
  thread_local const Handle handle;
  return handle;
}

__global__ void to_half(const float* in, __half* out, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(in[i]);
}
__global__ void half_to_float(const __half* in, float* out, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __half2float(in[i]);
}

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + 255) / 256); }

// The descriptors of one convolution: x (n,c,h,w), w (k,c,r,s), y (n,k,p,q)
// in the compute's data type, cross-correlation (as refs::conv2d_forward_ref)
// computed in fp32.
struct Convolution {
  const Handle& handle = thread_cudnn();
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  cudnnDataType_t type;
  cudnnMathType_t math;

  Convolution(const ops::Conv2dShape& s, ConvCompute compute)
      : type(compute == ConvCompute::fp32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_HALF),
        math(compute == ConvCompute::fp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH) {
    MPVERIFY_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x.get(), CUDNN_TENSOR_NCHW, type, s.n, s.c, s.h, s.w));
    MPVERIFY_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w.get(), type, CUDNN_TENSOR_NCHW, s.k, s.c, s.r, s.s));
    MPVERIFY_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y.get(), CUDNN_TENSOR_NCHW, type, s.n, s.k, s.p(), s.q()));
    MPVERIFY_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv.get(), s.pad, s.pad, s.stride, s.stride, 1, 1,
                                                         CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    // FMA math keeps fp32 convolutions off TF32; tensor-op math lets the fp16 ones use the tensor cores.
    MPVERIFY_CUDNN_CHECK(cudnnSetConvolutionMathType(conv.get(), math));
    int n = 0, k = 0, p = 0, q = 0;
    MPVERIFY_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv.get(), x.get(), w.get(), &n, &k, &p, &q));
    if (n != s.n || k != s.k || p != s.p() || q != s.q())
      throw std::logic_error("conv2d_gpu: cuDNN's output shape (" + std::to_string(n) + "," + std::to_string(k) + "," +
                             std::to_string(p) + "," + std::to_string(q) + ") differs from ops::Conv2dShape's");
  }
  std::size_t element_bytes() const { return type == CUDNN_DATA_FLOAT ? 4 : 2; }
};

// Host floats to a device tensor of the convolution's type (fp16 by
// __float2half_rn on the device, through the float staging buffer).
void upload(std::span<const float> host, const Convolution& cv, void* device, DeviceBuffer& staging) {
  if (cv.type == CUDNN_DATA_FLOAT) {
    MPVERIFY_CUDA_CHECK(cudaMemcpy(device, host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
    return;
  }
  MPVERIFY_CUDA_CHECK(cudaMemcpy(staging.get(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
  to_half<<<blocks_for(host.size()), 256>>>(staging.as<float>(), static_cast<__half*>(device), host.size());
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
}

void download(const void* device, const Convolution& cv, std::span<float> host, DeviceBuffer& staging) {
  if (cv.type == CUDNN_DATA_FLOAT) {
    MPVERIFY_CUDA_CHECK(cudaMemcpy(host.data(), device, host.size_bytes(), cudaMemcpyDeviceToHost));
  } else {
    half_to_float<<<blocks_for(host.size()), 256>>>(static_cast<const __half*>(device), staging.as<float>(),
                                                     host.size());
    MPVERIFY_CUDA_CHECK(cudaGetLastError());
    MPVERIFY_CUDA_CHECK(cudaMemcpy(host.data(), staging.get(), host.size_bytes(), cudaMemcpyDeviceToHost));
  }
  MPVERIFY_CUDA_CHECK(cudaDeviceSynchronize());
}

void require_device() {
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) throw std::runtime_error(reason);
}

// Device copies of the three tensors of a convolution, and a float staging
// buffer large enough for any of them.
struct Tensors {
  DeviceBuffer staging, x, w, y;
  Tensors(const ops::Conv2dShape& s, const Convolution& cv)
      : staging(std::max({s.x_size(), s.weight_size(), s.y_size()}) * sizeof(float)),
        x(s.x_size() * cv.element_bytes()),
        w(s.weight_size() * cv.element_bytes()),
        y(s.y_size() * cv.element_bytes()) {}
};

const float kOne = 1.0f, kZero = 0.0f;  // alpha and beta: float for fp32 and fp16 tensors alike

// cuDNN 9 reports an algorithm it does not support for this problem with a status of the NOT_SUPPORTED
// family (3000-3999: shape, data type, layout, architecture, ...).
bool refused(cudnnStatus_t status) { return status / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000; }

// Runs the convolution with `preferred` (deterministic, fixed so that runs repeat) where cuDNN supports it
// for this convolution; cuDNN may refuse a fixed algorithm for some shapes and types (small channel counts
// in fp16 with tensor-op math, say), at the workspace query or, although the query succeeded, at the call
// itself. Then the algorithms cuDNN's heuristics list as supported and of the descriptor's math type (FMA
// keeps fp32 off TF32), deterministic ones first, each until one runs (gpu/algorithm_fallback.h).
// `workspace(algo, &bytes)` is the query, `heuristics(count, &returned, perf)` the list, `run(algo,
// workspace, bytes)` the call; each returns cuDNN's status.
template <typename Algo, typename Perf, typename Workspace, typename Heuristics, typename Run>
void convolve(const char* what, Algo preferred, cudnnMathType_t math, Workspace workspace, Heuristics heuristics,
              Run run) {
  const std::function<std::vector<Algo>()> listed = [&] {
    constexpr int kRequested = 16;
    Perf perf[kRequested];
    int returned = 0;
    MPVERIFY_CUDNN_CHECK(heuristics(kRequested, &returned, perf));
    std::vector<Algo> order;
    for (const bool deterministic : {true, false})
      for (int i = 0; i < returned; ++i)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == math &&
            (perf[i].determinism == CUDNN_DETERMINISTIC) == deterministic)
          order.push_back(perf[i].algo);
    return order;
  };
  const std::function<detail::Attempt(Algo)> attempt = [&](Algo algo) {
    std::size_t bytes = 0;
    if (workspace(algo, &bytes) != CUDNN_STATUS_SUCCESS) return detail::Attempt::refused;
    DeviceBuffer space(bytes);
    const cudnnStatus_t status = run(algo, space.get(), bytes);
    if (refused(status)) return detail::Attempt::refused;
    MPVERIFY_CUDNN_CHECK(status);
    return detail::Attempt::ran;
  };
  const std::function<std::string(Algo)> name = [](Algo algo) { return std::to_string(static_cast<int>(algo)); };
  detail::run_first_accepted<Algo>(preferred, listed, attempt, name,
                                   std::string("conv2d_gpu: cuDNN's ") + what + " convolution");
}

}  // namespace

void conv2d_forward_gpu(const ops::Conv2dShape& s, std::span<const float> x, std::span<const float> wgt,
                        std::span<float> y, ConvCompute compute) {
  s.check(x.size(), wgt.size(), y.size());
  require_device();
  const Convolution cv(s, compute);
  Tensors t(s, cv);
  upload(x, cv, t.x.get(), t.staging);
  upload(wgt, cv, t.w.get(), t.staging);
  convolve<cudnnConvolutionFwdAlgo_t, cudnnConvolutionFwdAlgoPerf_t>(
      "forward", CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, cv.math,
      [&](cudnnConvolutionFwdAlgo_t a, std::size_t* b) {
        return cudnnGetConvolutionForwardWorkspaceSize(cv.handle.get(), cv.x.get(), cv.w.get(), cv.conv.get(),
                                                       cv.y.get(), a, b);
      },
      [&](int requested, int* returned, cudnnConvolutionFwdAlgoPerf_t* perf) {
        return cudnnGetConvolutionForwardAlgorithm_v7(cv.handle.get(), cv.x.get(), cv.w.get(), cv.conv.get(),
                                                      cv.y.get(), requested, returned, perf);
      },
      [&](cudnnConvolutionFwdAlgo_t a, void* space, std::size_t b) {
        return cudnnConvolutionForward(cv.handle.get(), &kOne, cv.x.get(), t.x.get(), cv.w.get(), t.w.get(),
                                       cv.conv.get(), a, space, b, &kZero, cv.y.get(), t.y.get());
      });
  download(t.y.get(), cv, y, t.staging);
}

void conv2d_backward_data_gpu(const ops::Conv2dShape& s, std::span<const float> dy, std::span<const float> wgt,
                              std::span<float> dx, ConvCompute compute) {
  s.check(dx.size(), wgt.size(), dy.size(), "dx", "weight", "dy");
  require_device();
  const Convolution cv(s, compute);
  Tensors t(s, cv);
  upload(dy, cv, t.y.get(), t.staging);
  upload(wgt, cv, t.w.get(), t.staging);
  convolve<cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdDataAlgoPerf_t>(
      "backward-data", CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, cv.math,  // deterministic
      [&](cudnnConvolutionBwdDataAlgo_t a, std::size_t* b) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(cv.handle.get(), cv.w.get(), cv.y.get(), cv.conv.get(),
                                                            cv.x.get(), a, b);
      },
      [&](int requested, int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
        return cudnnGetConvolutionBackwardDataAlgorithm_v7(cv.handle.get(), cv.w.get(), cv.y.get(), cv.conv.get(),
                                                           cv.x.get(), requested, returned, perf);
      },
      [&](cudnnConvolutionBwdDataAlgo_t a, void* space, std::size_t b) {
        return cudnnConvolutionBackwardData(cv.handle.get(), &kOne, cv.w.get(), t.w.get(), cv.y.get(), t.y.get(),
                                            cv.conv.get(), a, space, b, &kZero, cv.x.get(), t.x.get());
      });
  download(t.x.get(), cv, dx, t.staging);
}

void conv2d_backward_filter_gpu(const ops::Conv2dShape& s, std::span<const float> x, std::span<const float> dy,
                                std::span<float> dw, ConvCompute compute) {
  s.check(x.size(), dw.size(), dy.size(), "x", "dw", "dy");
  require_device();
  const Convolution cv(s, compute);
  Tensors t(s, cv);
  upload(x, cv, t.x.get(), t.staging);
  upload(dy, cv, t.y.get(), t.staging);
  convolve<cudnnConvolutionBwdFilterAlgo_t, cudnnConvolutionBwdFilterAlgoPerf_t>(
      "backward-filter", CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, cv.math,  // deterministic
      [&](cudnnConvolutionBwdFilterAlgo_t a, std::size_t* b) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(cv.handle.get(), cv.x.get(), cv.y.get(),
                                                              cv.conv.get(), cv.w.get(), a, b);
      },
      [&](int requested, int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(cv.handle.get(), cv.x.get(), cv.y.get(),
                                                             cv.conv.get(), cv.w.get(), requested, returned, perf);
      },
      [&](cudnnConvolutionBwdFilterAlgo_t a, void* space, std::size_t b) {
        return cudnnConvolutionBackwardFilter(cv.handle.get(), &kOne, cv.x.get(), t.x.get(), cv.y.get(), t.y.get(),
                                              cv.conv.get(), a, space, b, &kZero, cv.w.get(), t.w.get());
      });
  download(t.w.get(), cv, dw, t.staging);
}

}  // namespace mpverify::gpu
