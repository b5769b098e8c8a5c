// Batch normalisation over NCHW. In training mode (the default), per channel
// over its M = n h w elements (refs/batch_norm_ref.h has the formulas). After
// a Linear layer the tensor is n x c x 1 x 1 and M = n, BatchNorm1d's case.
//
// In evaluation mode (set_training(false)) it normalises with the running
// statistics instead, as PyTorch's eval(), and updates nothing:
//   y = gamma (x - running_mean) / sqrt(running_var + eps) + beta,
// evaluated in FP64 from the stored x, gamma, beta and running statistics
// and stored (rounded once, through float, to the activation format: the
// double rounding double -> float -> fp16/bf16/fp8 is innocuous, 24 >= 2p + 2
// for p <= 11). Every backend computes it this way on the host: it is an
// element-wise affine map, and no backend has a kernel for it yet. Backward
// is not available in evaluation mode (std::logic_error).
//
// gamma (1) and beta (0) are Parameters of kind norm: they live in
// Precision::norm_parameters (fp32 in every framework's mixed precision),
// and so do their gradients, which are stored in that format rather than
// in weight_grads. The running mean (0) and variance (1) are fp32 state of
// the layer, updated by every forward (momentum 0.1, eps 1e-5, as PyTorch).
// Forward saves the batch mean and 1/sqrt(var + eps) (in the statistics
// format) and keeps x for backward.
#pragma once

#include <vector>

#include "nn/layer.h"
#include "refs/batch_norm_ref.h"

namespace mpverify::nn {

class BatchNorm2d final : public Layer {
 public:
  BatchNorm2d(std::string name, int channels, ops::BatchNormParams params = {});
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  std::vector<Parameter*> parameters() override { return {&gamma_, &beta_}; }
  const ops::BatchNormParams& params() const { return params_; }

  int channels() const { return channels_; }
  const std::vector<float>& running_mean() const { return running_mean_; }
  const std::vector<float>& running_var() const { return running_var_; }
  // Replaces the running statistics (a saved model being loaded); throws
  // std::invalid_argument unless both hold channels() values.
  void set_running_statistics(std::vector<float> mean, std::vector<float> var);
  // The batch statistics the last forward saved for backward (statistics format).
  const std::vector<float>& saved_mean() const { return mean_; }
  const std::vector<float>& saved_invstd() const { return invstd_; }

 private:
  int channels_;
  ops::BatchNormParams params_;
  Parameter gamma_, beta_;
  std::vector<float> running_mean_, running_var_;
  std::vector<float> mean_, invstd_;  // saved by the last forward
  Tensor x_;                          // the last forward's input, for backward
};

}  // namespace mpverify::nn
