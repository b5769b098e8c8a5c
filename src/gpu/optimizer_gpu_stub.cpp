// Without CUDA the GPU optimizers check their arguments, then say why they
// cannot run.
#ifndef MPVERIFY_WITH_CUDA
#include <stdexcept>

#include "gpu/device.h"
#include "gpu/optimizer_gpu.h"

namespace mpverify::gpu {

void sgd_step_gpu(const ops::SgdParams& p, std::int64_t step, std::span<float> w, std::span<float> v,
                  std::span<const float> g, const OptimizerStorage&, std::span<float> update) {
  ops::check_sgd_sizes(p, step, w.size(), v.size(), g.size());
  check_update_size(update, w.size());
  throw std::runtime_error(gpu_unavailable_reason());
}

void adam_step_gpu(const ops::AdamParams& p, std::int64_t step, std::span<float> w, std::span<float> m,
                   std::span<float> v, std::span<const float> g, const OptimizerStorage&,
                   std::span<float> update) {
  ops::check_adam_sizes(p, step, w.size(), m.size(), v.size(), g.size());
  check_update_size(update, w.size());
  throw std::runtime_error(gpu_unavailable_reason());
}

}  // namespace mpverify::gpu
#endif
