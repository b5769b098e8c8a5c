// Without CUDA the device-resident GEMM only says why it cannot run.
#ifndef MPVERIFY_WITH_CUDA
#include <stdexcept>

#include "gpu/device.h"
#include "gpu/gemm_gpu_device.h"

namespace mpverify::gpu {

DeviceGemm::DeviceGemm() { throw std::runtime_error(gpu_unavailable_reason()); }
DeviceGemm::~DeviceGemm() = default;
void DeviceGemm::run(const ops::GemmShape&, const void*, const void*, void*, GemmCompute) {
  throw std::runtime_error(gpu_unavailable_reason());
}

std::size_t input_bytes(GemmCompute c) {
  return c == GemmCompute::fp32_pedantic || c == GemmCompute::tf32 ? 4 : 2;
}
std::size_t output_bytes(GemmCompute c) { return c == GemmCompute::fp16_fp16_accumulate ? 2 : 4; }

}  // namespace mpverify::gpu
#endif
