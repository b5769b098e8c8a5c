#include "nn/backend.h"

#include <stdexcept>
#include <string>

#include "nn/emu_backend.h"
#include "nn/gpu_backend.h"
#include "nn/ref_backend.h"

namespace mpverify::nn {

std::string_view to_string(BackendKind k) {
  switch (k) {
    case BackendKind::ref: return "ref";
    case BackendKind::emu: return "emu";
    case BackendKind::gpu: return "gpu";
  }
  return "?";
}

BackendKind parse_backend(std::string_view name) {
  for (BackendKind k : {BackendKind::ref, BackendKind::emu, BackendKind::gpu})
    if (name == to_string(k)) return k;
  std::string message = "unknown backend '";
  message += name;
  message += "': use ref (Eigen FP32), emu (emulated formats) or gpu (CUDA)";
  throw std::invalid_argument(message);
}

void Backend::block_scaled_gemm(const ops::GemmShape&, std::span<const float>, std::span<const float>,
                                std::span<float>, const emu::BlockScaledGemmPolicy& policy,
                                emu::BlockScaledGemmCounters*) {
  std::string message = "the ";
  message += to_string(kind());
  message += " backend has no block-scaled GEMM (";
  message += emu::to_string(policy.accumulation);
  message += "): block-scaled recipes run on the emulator, --backend emu";
  throw std::invalid_argument(message);
}

std::unique_ptr<Backend> make_backend(BackendKind kind) {
  switch (kind) {
    case BackendKind::ref: return std::make_unique<RefBackend>();
    case BackendKind::emu: return std::make_unique<EmuBackend>();
    case BackendKind::gpu: return make_gpu_backend();
  }
  throw std::invalid_argument("make_backend: unknown kind");
}

}  // namespace mpverify::nn
