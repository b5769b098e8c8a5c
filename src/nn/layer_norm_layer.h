// Layer normalisation over the last dimension as a layer (torch.nn.LayerNorm(
// features), eps 1e-5): x is read as rows of `features` values (n x features:
// c h w = features), each row normalised on its own (refs/layer_norm_ref.h has
// the formulas, emu/layer_norm_emu.h how the emulator computes them), through
// the backend with nn::layer_norm_policy (x and dy in the element-wise format,
// statistics and parameters in norm_statistics and norm_parameters).
//
// gamma (1) and beta (0) are Parameters of kind norm: they live in
// Precision::norm_parameters (fp32 in the mixed recipes), and so do their
// gradients, stored in that format ("dgamma", "dbeta") rather than in
// weight_grads, as batch norm's. Forward keeps x and saves the mean and rstd
// of each row (statistics format) for backward; y and dx are stored in their
// roles' formats ("y", "dx"). There is no running state: training and
// evaluation mode compute the same.
#pragma once

#include <vector>

#include "nn/layer.h"
#include "ops/layer_norm_params.h"

namespace mpverify::nn {

class LayerNorm final : public Layer {
 public:
  LayerNorm(std::string name, int features, ops::LayerNormParams params = {});
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  std::vector<Parameter*> parameters() override { return {&gamma_, &beta_}; }
  int features() const { return features_; }
  // What the last forward saved for backward, one value per row (statistics format).
  const std::vector<float>& saved_mean() const { return mean_; }
  const std::vector<float>& saved_rstd() const { return rstd_; }

 private:
  int features_;
  ops::LayerNormParams params_;
  Parameter gamma_, beta_;
  std::vector<float> mean_, rstd_;
  Tensor x_;  // the last forward's input, for backward
};

}  // namespace mpverify::nn
