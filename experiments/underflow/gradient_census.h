// A census of the gradient values an FP32 training run produces, taken while
// it trains (a StoreObserver given to TrainConfig::extra_observer): at a few
// chosen steps, every activation gradient and weight gradient the layers
// store, as the ops produced them, is
//  - binned by binade at scale 1 (the FP32 histogram of Micikevicius et al.'s
//    Multibox SSD figure, zeros counted apart), and
//  - counted exactly at every loss scale of a plan: how many non-zero values
//    fl32(x * S), rounded once to nearest-even into the format, become zero,
//    become subnormal or overflow (analysis/scale_sweep.h: the same
//    definition as `mpverify analyze`).
// In an FP32 run every backward op is linear in the loss gradient and a
// power-of-two scale is exact in fp32, so the gradients of the loss scaled by
// S are exactly S times these (while nothing overflows fp32): the counts say
// what storing THIS run's gradients in fp16 at scale S would lose.
//
// Which values are counted, grouped as a mixed-precision (o2) run stores them:
//  - a classifier (mlp, cnn): group "classifier";
//  - the DCGAN: group "discriminator" for the gradients of the discriminator
//    step (after the store of "loss_d"), group "generator" for those of the
//    generator step (after "loss_g"): the activation gradients of every layer
//    the generator's gradient flows through (the discriminator's included) and
//    the generator's weight gradients. The discriminator's weight gradients
//    computed in the generator step are left out: no optimizer reads them.
//  - batch norm's gamma and beta gradients are left out everywhere: the
//    recipes store them in fp32 (norm_parameters), never in fp16.
// Steps are counted by the store of the loss gradient ("loss", "loss_d"),
// the first gradient every step stores, so the census needs no hook in the
// trainer beyond the observer.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analysis/scale_stats.h"
#include "analysis/scale_sweep.h"
#include "emu/exponent_histogram.h"
#include "formats/format.h"
#include "nn/context.h"

namespace mpverify::experiments {

enum class GradientRole { activation_grad, weight_grad };
const char* to_string(GradientRole role);  // "activation gradients", "weight gradients"

struct CensusKey {
  std::string group;  // "classifier", "discriminator", "generator"
  GradientRole role = GradientRole::activation_grad;
  std::size_t step = 0;
  friend auto operator<=>(const CensusKey&, const CensusKey&) = default;
};

// What one (group, role, step) holds.
struct CensusCell {
  emu::ExponentHistogram fp32;            // the values at scale 1, by binade; zeros apart
  std::vector<analysis::ScaleStats> at;   // one per scale of the plan, in its order
};

class GradientCensus final : public nn::StoreObserver {
 public:
  // `steps`: the steps to take the census at; `scales` and `format`: the plan
  // (std::invalid_argument for a scale analysis::check_scale rejects).
  GradientCensus(std::set<std::size_t> steps, const formats::Format& format, std::vector<double> scales);
  // The sweeps point at the plan: a census stays put.
  GradientCensus(const GradientCensus&) = delete;
  GradientCensus& operator=(const GradientCensus&) = delete;

  void on_store(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass pass,
                std::span<const float> exact, std::span<const float> stored,
                const formats::Format& format) override;

  // The largest |value| of each weight-gradient tensor over the census steps,
  // keyed by group and "layer.tensor" (e.g. "conv1.db"): which tensors hold
  // the smallest values.
  const std::map<std::pair<std::string, std::string>, double>& weight_grad_max() const { return weight_max_; }

  // Every cell filled so far (the sweeps' results taken now).
  std::map<CensusKey, CensusCell> cells() const;
  const std::vector<double>& scales() const { return plan_.scales(); }

 private:
  struct Sweeping {
    emu::ExponentHistogram fp32;
    std::unique_ptr<analysis::ScaleSweep> sweep;
  };
  std::set<std::size_t> steps_;
  analysis::SweepPlan plan_;
  long step_ = -1;           // the step being stored (-1: before the first)
  std::string phase_;        // "classifier", "discriminator" or "generator"
  std::map<CensusKey, Sweeping> cells_;
  std::map<std::pair<std::string, std::string>, double> weight_max_;
};

}  // namespace mpverify::experiments
