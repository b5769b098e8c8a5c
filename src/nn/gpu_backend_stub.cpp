// Placeholder until the gpu backend lands (a helper is writing gpu_backend.cpp).
#include <stdexcept>

#include "gpu/device.h"
#include "nn/gpu_backend.h"

namespace mpverify::nn {

std::unique_ptr<Backend> make_gpu_backend() {
  throw std::runtime_error("gpu backend: not built yet");
}

}  // namespace mpverify::nn
