// The hyperparameters of torch.optim.SGD and torch.optim.Adam, their checks,
// and the scalars of an Adam step: shared by the three sides
// (refs::*_step_ref, emu::*_step_emu, gpu::*_step_gpu), so that they reject
// the same inputs and use the same constants.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpverify::ops {

struct SgdParams {
  double lr = 1e-3;
  double momentum = 0;  // 0: no momentum buffer (v is neither read nor written)
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0, as PyTorch
  // Throws std::invalid_argument for what torch.optim.SGD rejects.
  void check() const;
};

struct AdamParams {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool adamw = false;  // decoupled weight decay (torch.optim.AdamW): w *= 1 - lr*wd
  void check() const;
};

// The scalars of an Adam step at step t (1 for the first), computed in double
// as Python computes them. The float sides use them rounded to float; having
// one definition keeps the emulator and the GPU on the same constants.
struct AdamScalars {
  double lerp_weight;            // 1 - beta1
  double one_minus_beta2;        // 1 - beta2
  double bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  double neg_step_size;          // -(lr / (1 - beta1^t))
  double decay_factor;           // 1 - lr * weight_decay (adamw)
};
AdamScalars adam_scalars(const AdamParams& p, std::int64_t t);

// The checks shared by the three sides: hyperparameters (check()), step >= 1
// and sizes; std::invalid_argument names the span.
void check_sgd_sizes(const SgdParams& p, std::int64_t step, std::size_t w, std::size_t v, std::size_t g);
void check_adam_sizes(const AdamParams& p, std::int64_t step, std::size_t w, std::size_t m, std::size_t v, std::size_t g);

}  // namespace mpverify::ops
