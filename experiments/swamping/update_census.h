// Every optimizer update of one training run, classified: was it lost
// (fl(w + u) == w in the format the run stores its weights in), what do the
// ratio rules of thumb say about it (|w| / |u| >= 2^p, > 2^(p+1)), where does
// |w| sit in its binade, was the step's weight gradient zero (so that u is
// the momentum buffer's decaying tail alone), and did the weight really stay
// put (checked against the weights the next step reads).
//
// Why an observer and not the run's steps.jsonl: the recorders keep one rate
// per step (and the two ratio bounds' rates); the comparison of the exact rate
// with the rules, by binade position and by weight class, needs every update
// next to its weight. The trainer shows an observer (TrainConfig::
// extra_observer) each parameter's master weights before the forward pass
// ("value", role weight), its weight gradient ("dw", "db", "dgamma", "dbeta",
// role weight_grad, as stored) and its update ("update", role update), in that
// order within a step; a skipped step shows no update.
//
// Lost (emu::is_lost_update, the one definition) is computed here on a
// rounding independent of the recorders' (emu::add_arrays): w + u in double,
// then rounded once to the format (emu::round_value). The
// double sum may itself be rounded, but double rounding through a format of
// 53 bits is innocuous for a sum rounded to a format of p <= 25 bits (53 >= 2p
// + 2; Figueroa, "When is double rounding innocuous?", 1995), so this is
// fl(w + u) for fp16, bf16 and fp32. The weights are first rounded to the
// format, as the optimizer does before it adds (emu::sgd_step_emu).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "formats/format.h"
#include "nn/context.h"

namespace mpverify::experiments {

struct CensusCount {
  std::uint64_t updates = 0;  // u != 0, w and u finite
  std::uint64_t lost = 0;     // ... and fl(w + u) == w
};

// The weight's class in the format: zero, subnormal (0 < |w| < min normal), normal.
enum class WeightClass { zero = 0, subnormal = 1, normal = 2 };
// |w| / |u| against the rules: below 2^p, in [2^p, 2^(p+1)], above 2^(p+1).
enum class RatioRegion { below = 0, between = 1, above = 2 };

struct CensusStep {
  std::size_t step = 0;
  CensusCount all;
  std::uint64_t ratio_at_least = 0;   // |w| / |u| >= 2^p (the "2048x smaller" rule for fp16)
  std::uint64_t ratio_above_twice = 0;  // |w| / |u| > 2^(p+1): lost for every w by the theorem
  std::uint64_t ratio_above = 0;      // |w| / |u| > 2^p (the common strict form of the 2048 rule)
  // Lost updates by the step's weight gradient: exactly zero as the op
  // produced it (a dead input, a bias whose gradient cancels), non-zero but
  // zero once stored in the gradient format (underflow), non-zero.
  std::uint64_t lost_grad_zero = 0, lost_grad_underflowed = 0, lost_grad_nonzero = 0;
  // Of `all.updates`, how many left the weight bitwise unchanged, read back
  // from the next step's weights; absent for the last update of the run.
  std::optional<std::uint64_t> unchanged;
  std::optional<std::uint64_t> unchanged_but_counted_kept;  // ... of those, the ones not counted lost
  std::optional<std::uint64_t> changed_but_counted_lost;    // changed although counted lost
};

struct CensusParameter {
  CensusCount count;
  std::uint64_t lost_grad_zero = 0, lost_grad_underflowed = 0;
};

// Normal weights with |w| / |u| in [2^(p-1), 2^(p+2)), in bins of 1/kBinsPerOctave
// of a binade of the ratio, split by where |w| sits in its binade (m = |w| /
// 2^floor(log2 |w|) in [1, 2), in kBinadeParts equal parts).
inline constexpr int kBinsPerOctave = 16;
inline constexpr int kRatioOctaves = 3;
inline constexpr int kRatioBins = kBinsPerOctave * kRatioOctaves;
inline constexpr int kBinadeParts = 4;

struct RatioProfile {
  int first_log2 = 0;  // the bins start at |w| / |u| = 2^first_log2 (p - 1)
  std::array<std::array<CensusCount, kRatioBins>, kBinadeParts> bins{};
};

class UpdateCensus final : public nn::StoreObserver {
 public:
  // `format`: the format the run's optimizer stores the weights in.
  explicit UpdateCensus(formats::Format format);

  void on_store(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass pass,
                std::span<const float> exact, std::span<const float> stored,
                const formats::Format& format) override;

  // Classifies u against w (both floats, w rounded to the format first) with
  // the step's gradient flags (may be empty: unknown, counted as non-zero).
  // The observer calls it; tests call it directly.
  void add_updates(std::size_t step, const std::string& parameter, std::span<const float> w,
                   std::span<const float> u, std::span<const std::uint8_t> grad_kind = {});

  const formats::Format& format() const { return format_; }
  const std::vector<CensusStep>& steps() const { return steps_; }
  CensusCount total() const;
  // [WeightClass][RatioRegion]
  const std::array<std::array<CensusCount, 3>, 3>& regions() const { return regions_; }
  const RatioProfile& profile() const { return profile_; }
  const std::map<std::string, CensusParameter>& parameters() const { return parameters_; }

  // Gradient flags per element (the values of grad_kind).
  static constexpr std::uint8_t kGradNonzero = 0, kGradZero = 1, kGradUnderflowed = 2;

 private:
  CensusStep& step_entry(std::size_t step);
  void check_previous(const std::string& parameter, std::span<const float> master_now);

  formats::Format format_;
  std::size_t step_ = 0;  // the trainer's step whose weights were last shown
  bool started_ = false;
  std::set<std::string> shown_;  // the parameters whose weights this step has shown
  std::map<std::string, std::vector<float>> before_;  // weights shown this step, rounded to the format
  std::map<std::string, std::vector<std::uint8_t>> grad_kind_;
  struct Pending {
    std::size_t step_index;
    std::vector<float> before, u;
    std::vector<std::uint8_t> lost;
  };
  std::map<std::string, Pending> pending_;  // the last update of each parameter, until the next weights
  std::vector<CensusStep> steps_;
  std::array<std::array<CensusCount, 3>, 3> regions_{};
  RatioProfile profile_;
  std::map<std::string, CensusParameter> parameters_;
};

// The parameter a weight-gradient store belongs to: ("fc1", "dw") -> "fc1.w";
// empty when the tensor is not a weight gradient.
std::string parameter_of_gradient(std::string_view layer, std::string_view tensor);

}  // namespace mpverify::experiments
