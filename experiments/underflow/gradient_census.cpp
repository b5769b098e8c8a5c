#include "underflow/gradient_census.h"

#include <algorithm>
#include <cmath>

namespace mpverify::experiments {

const char* to_string(GradientRole role) {
  return role == GradientRole::activation_grad ? "activation gradients" : "weight gradients";
}

GradientCensus::GradientCensus(std::set<std::size_t> steps, const formats::Format& format, std::vector<double> scales)
    : steps_(std::move(steps)), plan_(format, std::move(scales)) {}

void GradientCensus::on_store(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass,
                              std::span<const float> exact, std::span<const float>, const formats::Format&) {
  if (role != nn::Role::activation_grad && role != nn::Role::weight_grad) return;
  // The loss gradient is the first gradient of every step (and of each GAN player's step).
  if (role == nn::Role::activation_grad && (layer == "loss" || layer == "loss_d")) {
    ++step_;
    phase_ = layer == "loss" ? "classifier" : "discriminator";
  } else if (role == nn::Role::activation_grad && layer == "loss_g") {
    phase_ = "generator";
  }
  if (step_ < 0 || !steps_.contains(static_cast<std::size_t>(step_))) return;
  if (tensor == "dgamma" || tensor == "dbeta") return;  // fp32 in every recipe (norm_parameters)
  if (phase_ == "generator" && role == nn::Role::weight_grad && !layer.starts_with("g.")) return;  // unused
  const GradientRole r = role == nn::Role::activation_grad ? GradientRole::activation_grad : GradientRole::weight_grad;
  Sweeping& cell = cells_[CensusKey{phase_, r, static_cast<std::size_t>(step_)}];
  if (!cell.sweep) cell.sweep = std::make_unique<analysis::ScaleSweep>(plan_);
  if (r == GradientRole::weight_grad) {
    double& m = weight_max_[{phase_, std::string(layer) + "." + std::string(tensor)}];
    for (float x : exact)
      if (std::isfinite(x)) m = std::max(m, static_cast<double>(std::fabs(x)));
  }
  cell.fp32.add(exact);
  cell.sweep->add(exact);
}

std::map<CensusKey, CensusCell> GradientCensus::cells() const {
  std::map<CensusKey, CensusCell> out;
  for (const auto& [key, cell] : cells_) out[key] = CensusCell{cell.fp32, cell.sweep->results()};
  return out;
}

}  // namespace mpverify::experiments
