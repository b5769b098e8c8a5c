// Without CUDA the device counters check the format, then say why they cannot run.
#ifndef MPVERIFY_WITH_CUDA
#include <stdexcept>
#include <string>

#include "gpu/device.h"
#include "gpu/tensor_counters_gpu.h"

namespace mpverify::gpu {

TensorCounts tensor_counters_gpu(const float*, std::size_t, const formats::Format& format, float) {
  device_format(format);
  throw std::runtime_error(gpu_unavailable_reason());
}

TensorCounts tensor_counters_gpu(std::span<const float>, const formats::Format& format, float) {
  device_format(format);
  throw std::runtime_error(gpu_unavailable_reason());
}

emu::Counters swamping_counters_gpu(const float*, const float*, std::size_t, const formats::Format& weight_format) {
  device_format(weight_format);
  throw std::runtime_error(gpu_unavailable_reason());
}

namespace {

void check_sizes(std::size_t w, std::size_t u) {
  if (w != u)
    throw std::invalid_argument("swamping_counters_gpu: sizes differ (w " + std::to_string(w) + ", u " +
                                std::to_string(u) + ")");
}

}  // namespace

emu::Counters swamping_counters_gpu(std::span<const float> w, std::span<const float> u,
                                    const formats::Format& weight_format) {
  check_sizes(w.size(), u.size());
  device_format(weight_format);
  throw std::runtime_error(gpu_unavailable_reason());
}

namespace detail {

TensorCounts tensor_counters_host_emulation(std::span<const float>, const formats::Format& format, float) {
  device_format(format);
  throw std::runtime_error(gpu_unavailable_reason() + "; the host emulation needs CUDA's conversion headers");
}

emu::Counters swamping_counters_host_emulation(std::span<const float> w, std::span<const float> u,
                                               const formats::Format& weight_format) {
  check_sizes(w.size(), u.size());
  device_format(weight_format);
  throw std::runtime_error(gpu_unavailable_reason() + "; the host emulation needs CUDA's conversion headers");
}

}  // namespace detail

}  // namespace mpverify::gpu
#endif
