// Without CUDA the probe only says why it cannot run.
#ifndef MPVERIFY_WITH_CUDA
#include <stdexcept>

#include "gpu/device.h"
#include "gpu/mma_probe.h"

namespace mpverify::gpu {

std::string mma_probe_device_reason(const emu::MmaModel&) { return gpu_unavailable_reason(); }

std::vector<std::uint32_t> mma_probe(const emu::MmaModel&, std::span<const std::uint32_t>,
                                     std::span<const std::uint32_t>, std::span<const std::uint32_t>, int) {
  throw std::runtime_error(gpu_unavailable_reason());
}

}  // namespace mpverify::gpu
#endif
