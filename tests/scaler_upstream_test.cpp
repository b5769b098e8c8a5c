// Each loss-scale rule held against a transcription of its upstream code,
// written here line by line in the upstream's own shape (Python floats as
// double, fp32 tensors as float), and walked through seeded random traces
// step by step. The transcriptions cite the file, commit and lines they copy;
// none of them calls mpverify's strategies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "training/loss_scaler.h"

namespace {

using namespace mpverify::training;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// A seeded found_inf trace: runs of clean steps broken by bursts of
// overflows, so that growth, hysteresis and floors are all reached.
std::vector<bool> random_flags(std::uint64_t seed, int steps, double p_overflow) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution overflow(p_overflow), burst(0.5);
  std::vector<bool> flags;
  while (static_cast<int>(flags.size()) < steps) {
    const bool f = overflow(rng);
    flags.push_back(f);
    while (f && burst(rng) && static_cast<int>(flags.size()) < steps) flags.push_back(true);
  }
  return flags;
}

// --- DeepSpeed FP16_Optimizer (fp16 without ZeRO) ------------------------------------
// microsoft/DeepSpeed 38327e07, deepspeed/runtime/fp16/fused_optimizer.py:
// __init__ lines 89-102 (cur_iter 0, last_overflow_iter -1, scale_factor 2),
// _update_scale lines 385-407; step() lines 255-272 skip on overflow.
struct Fp16OptimizerReference {
  double cur_scale;
  double scale_window;
  double min_loss_scale;
  std::int64_t cur_iter = 0, last_overflow_iter = -1;
  double scale_factor = 2;

  void _update_scale(bool skip) {
    if (skip) {
      cur_scale = std::max(cur_scale / scale_factor, min_loss_scale);
      last_overflow_iter = cur_iter;
    } else {
      const std::int64_t stable_interval = (cur_iter - last_overflow_iter) - 1;
      if ((stable_interval > 0) && (stable_interval % static_cast<std::int64_t>(scale_window) == 0))
        cur_scale *= scale_factor;
    }
    cur_iter += 1;
  }
};

TEST(UpstreamDeepSpeedFp16Optimizer, WalksRandomTracesStepByStep) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const int window = 1 + static_cast<int>(seed % 5);
    const double init = std::ldexp(1.0, static_cast<int>(seed % 7));
    const double min = seed % 3 == 0 ? 1.0 : 0.25;
    DeepSpeedConfig c;
    c.optimizer = DeepSpeedOptimizer::fp16;
    c.init_scale = init;
    c.scale_window = window;
    c.min_scale = min;
    DeepSpeedScaler s(c);
    Fp16OptimizerReference ref{init, static_cast<double>(window), min};
    const auto flags = random_flags(seed, 300, 0.15);
    for (std::size_t k = 0; k < flags.size(); ++k) {
      const double used = ref.cur_scale;
      ref._update_scale(flags[k]);
      const StepResult r = s.step(flags[k]);
      ASSERT_EQ(r.scale_used, used) << "seed " << seed << " step " << k;
      ASSERT_EQ(r.skipped, flags[k]) << "seed " << seed << " step " << k;
      ASSERT_FALSE(r.aborted) << "FP16_Optimizer never raises: seed " << seed << " step " << k;
      ASSERT_EQ(s.scale(), ref.cur_scale) << "seed " << seed << " step " << k;
    }
  }
}

// The trace of the finding: initial 4, window 2, overflow at iteration 4.
TEST(UpstreamDeepSpeedFp16Optimizer, TheFindingsTrace) {
  const std::vector<bool> flags{false, false, false, false, true, false, false, false};
  DeepSpeedConfig c;
  c.optimizer = DeepSpeedOptimizer::fp16;
  c.init_scale = 4;
  c.scale_window = 2;
  DeepSpeedScaler s(c);
  Fp16OptimizerReference ref{4, 2, 1};
  std::vector<double> used;
  for (bool f : flags) {
    used.push_back(s.step(f).scale_used);
    ref._update_scale(f);
  }
  EXPECT_EQ(used, (std::vector<double>{4, 4, 4, 8, 8, 4, 4, 4}));
  EXPECT_EQ(s.scale(), ref.cur_scale);
}

// --- DeepSpeed DynamicLossScaler (ZeRO) ---------------------------------------------
// Up to DeepSpeed 0.17.0: microsoft/DeepSpeed 38327e07, deepspeed/runtime/fp16/loss_scaler.py:
// __init__ lines 118-139, update_scale lines 170-203 (the raise at line 175).
// From 0.17.1 (deepspeedai/DeepSpeed e440506b, "Improve overflow handling in ZeRO"; the same at
// edaa7221): update_scale lines 264-299, whose growth (lines 294-295) reads
//   stable_interval = (self.cur_iter - self.last_overflow_iter) - 1
//   if (stable_interval > 0) and (stable_interval % self.scale_window == 0):
// `stable_interval_rule` picks the newer growth; the rest of update_scale is unchanged.
struct DynamicLossScalerReference {
  double cur_scale;
  double scale_window;
  double min_scale;
  int delayed_shift;
  bool consecutive_hysteresis;
  bool raise_error_at_min_scale;
  int cur_hysteresis = delayed_shift;
  std::int64_t cur_iter = 0, last_overflow_iter = -1;
  double scale_factor = 2.;
  bool raised = false;
  bool stable_interval_rule = true;

  void update_scale(bool overflow) {
    if (overflow) {
      if (delayed_shift == 1 || cur_hysteresis == 1) {
        if ((cur_scale == min_scale) && raise_error_at_min_scale) {
          raised = true;  // raise Exception("Current loss scale already at minimum ...")
          return;
        } else {
          const double next_scale = std::max(cur_scale / scale_factor, min_scale);
          cur_scale = next_scale;
        }
      } else {
        cur_hysteresis -= 1;
      }
      last_overflow_iter = cur_iter;
    } else {
      if (consecutive_hysteresis) cur_hysteresis = delayed_shift;
      const std::int64_t window = static_cast<std::int64_t>(scale_window);
      const std::int64_t stable_interval = (cur_iter - last_overflow_iter) - 1;
      const bool grow = stable_interval_rule ? (stable_interval > 0) && (stable_interval % window == 0)
                                             : (cur_iter - last_overflow_iter) % window == 0;
      if (grow) {
        if (!consecutive_hysteresis) cur_hysteresis = delayed_shift;
        cur_scale *= scale_factor;
      }
    }
    cur_iter += 1;
  }
};

TEST(UpstreamDeepSpeedDynamicLossScaler, WalksRandomTracesStepByStep) {
  for (const bool before_0_17_1 : {false, true})
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    DeepSpeedConfig c;
    c.growth_before_0_17_1 = before_0_17_1;
    c.init_scale = std::ldexp(1.0, static_cast<int>(seed % 9));
    c.scale_window = 1 + static_cast<int>(seed % 4);
    c.hysteresis = 1 + static_cast<int>(seed % 3);
    c.min_scale = seed % 2 == 0 ? 1.0 : 2.0;
    c.consecutive_hysteresis = seed % 4 < 2;
    c.raise_error_at_min_scale = seed % 5 != 0;
    DeepSpeedScaler s(c);
    DynamicLossScalerReference ref{c.init_scale,       static_cast<double>(c.scale_window), c.min_scale,
                                   c.hysteresis,       c.consecutive_hysteresis,            c.raise_error_at_min_scale};
    ref.stable_interval_rule = !before_0_17_1;
    const auto flags = random_flags(seed + 100, 300, 0.2);
    for (std::size_t k = 0; k < flags.size(); ++k) {
      const double used = ref.cur_scale;
      ref.update_scale(flags[k]);
      const StepResult r = s.step(flags[k]);
      ASSERT_EQ(r.scale_used, used) << "seed " << seed << " step " << k;
      ASSERT_EQ(r.skipped, flags[k]) << "seed " << seed << " step " << k;
      ASSERT_EQ(r.aborted, ref.raised) << "seed " << seed << " step " << k;
      if (ref.raised) break;
      ASSERT_EQ(s.scale(), ref.cur_scale) << "seed " << seed << " step " << k;
      ASSERT_EQ(s.hysteresis(), ref.cur_hysteresis) << "seed " << seed << " step " << k;
    }
  }
}

// deepspeed.version picks the rule by release: the two differ on a clean run from init 4, window 2.
// Worked by hand from the two transcriptions above (cur_iter from 0, last_overflow_iter -1; a growth
// after iteration k changes the scale used from k + 1): older, (k + 1) % 2 == 0 grows after k = 1, 3, 5,
// so the scales used are 4, 4, 8, 8, 16, 16; newer, stable = k > 0 and k % 2 == 0 grows after k = 2, 4,
// so 4, 4, 4, 8, 8, 16.
TEST(UpstreamDeepSpeedDynamicLossScaler, TheVersionOptionPicksTheGrowthRule) {
  const auto scales = [](const std::string& version) {
    ScalerOptions o{{"init", "4"}, {"interval", "2"}};
    if (!version.empty()) o["version"] = version;
    const auto s = make_scaler("deepspeed", o);
    std::vector<double> used;
    auto& loss_scaler = dynamic_cast<LossScaler&>(*s);
    for (int k = 0; k < 6; ++k) used.push_back(loss_scaler.step(false).scale_used);
    return used;
  };
  const std::vector<double> older{4, 4, 8, 8, 16, 16}, newer{4, 4, 4, 8, 8, 16};
  EXPECT_EQ(scales(""), newer);
  EXPECT_EQ(scales("latest"), newer);
  EXPECT_EQ(scales("0.17.1"), newer);
  EXPECT_EQ(scales("0.18"), newer);
  EXPECT_EQ(scales("1.0.0"), newer);
  EXPECT_EQ(scales("0.17.0"), older);
  EXPECT_EQ(scales("0.16.9"), older);
  EXPECT_EQ(scales("0.9"), older);
  for (const char* bad : {"0.17.x", "", "0..1", "0.17.1.2", "v0.17"})
    EXPECT_THROW(make_scaler("deepspeed", ScalerOptions{{"version", bad}}), std::invalid_argument) << bad;
  EXPECT_THROW(make_scaler("deepspeed", ScalerOptions{{"optimizer", "fp16"}, {"version", "0.17.0"}}),
               std::invalid_argument);  // FP16_Optimizer's rule never changed
}

// --- fairseq / metaseq DynamicLossScaler --------------------------------------------
// facebookresearch/fairseq 3d262bb, fairseq/optim/dynamic_loss_scaler.py lines
// 8-70: update() (lines 31-35) runs after an applied step (fp16_optimizer.py
// line 226), check_overflow() (lines 42-70) on a non-finite gradient norm
// (fp16_optimizer.py line 206); FloatingPointError stops the run.
struct FairseqReference {
  double loss_scale;
  double scale_window;
  double tolerance;
  double threshold;  // 0: None
  double min_loss_scale;
  double scale_factor = 2.0;
  std::int64_t _iter = 0, _last_overflow_iter = -1, _last_rescale_iter = -1;
  std::int64_t _overflows_since_rescale = 0;
  bool floating_point_error = false;

  void update() {
    if ((_iter - _last_overflow_iter) % static_cast<std::int64_t>(scale_window) == 0) {
      loss_scale *= scale_factor;
      _last_rescale_iter = _iter;
    }
    _iter += 1;
  }
  void _decrease_loss_scale() {
    loss_scale /= scale_factor;
    if (threshold != 0) loss_scale = std::max(loss_scale, threshold);
  }
  void check_overflow() {  // grad_norm is inf or nan
    const double prev_scale = loss_scale;
    const std::int64_t iter_since_rescale = _iter - _last_rescale_iter;
    _last_overflow_iter = _iter;
    _overflows_since_rescale += 1;
    const double pct_overflow = static_cast<double>(_overflows_since_rescale) / static_cast<double>(iter_since_rescale);
    if (pct_overflow >= tolerance) {
      _decrease_loss_scale();
      _last_rescale_iter = _iter;
      _overflows_since_rescale = 0;
    }
    if (loss_scale <= min_loss_scale) {
      loss_scale = prev_scale;
      floating_point_error = true;
      return;
    }
    _iter += 1;  // raise OverflowError
  }
};

TEST(UpstreamFairseq, WalksRandomTracesStepByStep) {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    FairseqConfig c;
    c.init_scale = std::ldexp(1.0, static_cast<int>(seed % 8));
    c.scale_window = 1 + static_cast<int>(seed % 6);
    c.tolerance = static_cast<double>(seed % 4) * 0.125;
    c.threshold = seed % 3 == 0 ? 0.5 : 0.0;
    c.min_scale = seed % 2 == 0 ? 1e-4 : 0.25;
    FairseqScaler s(c);
    FairseqReference ref{c.init_scale, static_cast<double>(c.scale_window), c.tolerance, c.threshold, c.min_scale};
    const auto flags = random_flags(seed + 200, 300, 0.25);
    for (std::size_t k = 0; k < flags.size(); ++k) {
      const double used = ref.loss_scale;
      if (flags[k]) ref.check_overflow();
      else ref.update();
      const StepResult r = s.step(flags[k]);
      ASSERT_EQ(r.scale_used, used) << "seed " << seed << " step " << k;
      ASSERT_EQ(r.skipped, flags[k]) << "seed " << seed << " step " << k;
      ASSERT_EQ(r.aborted, ref.floating_point_error) << "seed " << seed << " step " << k;
      ASSERT_EQ(s.scale(), ref.loss_scale) << "seed " << seed << " step " << k;
      if (ref.floating_point_error) break;
      ASSERT_EQ(s.overflows_since_rescale(), ref._overflows_since_rescale) << "seed " << seed << " step " << k;
    }
  }
}

// Tolerance 0.25: with one overflow in 8 iterations since the last rescale
// the scale stays; the second within 4 iterations of a rescale halves it.
TEST(UpstreamFairseq, ToleranceLetsRareOverflowsPass) {
  FairseqConfig c;
  c.init_scale = 64;
  c.scale_window = 1000;
  c.tolerance = 0.25;
  FairseqScaler s(c);
  FairseqReference ref{64, 1000, 0.25, 0, 1e-4};
  const std::vector<bool> flags{false, false, false, false, false, false, false, true, true, false, true};
  for (std::size_t k = 0; k < flags.size(); ++k) {
    const double used = ref.loss_scale;
    if (flags[k]) ref.check_overflow();
    else ref.update();
    EXPECT_EQ(s.step(flags[k]).scale_used, used) << k;
  }
  EXPECT_EQ(s.scale(), ref.loss_scale);
  EXPECT_LT(s.scale(), 64.0);  // the tolerance did not keep it forever
}

// --- NeMo GradScaler (hysteresis on torch's rule) ---------------------------------------
// NVIDIA/apex 6424da3, csrc/update_scale_hysteresis.cu lines 5-41 (NeMo calls
// it through amp_C.update_scale_hysteresis; NVIDIA/NeMo 8cfedd7,
// nemo/lightning/_strategy_lib.py lines 344-372 is the same rule in Python).
// The scale is a float tensor, the factors doubles.
struct NemoReference {
  float current_scale;
  int growth_tracker = 0;
  int hysteresis_tracker;
  double growth_factor, backoff_factor;
  int growth_interval, hysteresis;

  void update_scale_hysteresis(float found_inf) {
    if (found_inf > 0) {
      hysteresis_tracker -= 1;
      if (hysteresis_tracker > 0) {
        growth_tracker = 0;
        return;
      }
    }
    if (found_inf) {
      current_scale = static_cast<float>(current_scale * backoff_factor);  // float * double, stored in float
      growth_tracker = 0;
    } else {
      auto successful = growth_tracker + 1;
      if (successful == growth_interval) {
        auto new_scale = static_cast<float>(current_scale * growth_factor);
        if (std::isfinite(new_scale)) current_scale = new_scale;
        growth_tracker = 0;
      } else {
        growth_tracker = successful;
      }
    }
    if (found_inf <= 0) hysteresis_tracker = hysteresis;
  }
};

TEST(UpstreamNemo, WalksRandomTracesStepByStep) {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    NemoConfig c;
    c.init_scale = seed % 7 == 0 ? 0x1p127 : 3.0 * std::ldexp(1.0, static_cast<int>(seed % 20));
    c.growth_interval = 1 + static_cast<int>(seed % 4);
    c.hysteresis = 1 + static_cast<int>(seed % 3);
    c.backoff_factor = seed % 2 == 0 ? 0.5 : 0.3;
    c.growth_factor = seed % 3 == 0 ? 2.0 : 1.7;
    NemoScaler s(c);
    NemoReference ref{static_cast<float>(c.init_scale), 0, c.hysteresis, c.growth_factor, c.backoff_factor,
                      c.growth_interval, c.hysteresis};
    const auto flags = random_flags(seed + 300, 300, 0.2);
    for (std::size_t k = 0; k < flags.size(); ++k) {
      const double used = ref.current_scale;
      ref.update_scale_hysteresis(flags[k] ? 1.0f : 0.0f);
      const StepResult r = s.step(flags[k]);
      ASSERT_EQ(r.scale_used, used) << "seed " << seed << " step " << k;
      ASSERT_EQ(r.skipped, flags[k]) << "NeMo's _maybe_opt_step skips every overflow: seed " << seed;
      ASSERT_EQ(s.scale(), static_cast<double>(ref.current_scale)) << "seed " << seed << " step " << k;
      ASSERT_EQ(s.hysteresis(), ref.hysteresis_tracker) << "seed " << seed << " step " << k;
      ASSERT_EQ(s.growth_tracker(), ref.growth_tracker) << "seed " << seed << " step " << k;
    }
  }
}

// --- Megatron-LM DynamicGradScaler ----------------------------------------------------
// NVIDIA/Megatron-LM d98e8a6, megatron/core/optimizer/grad_scaler.py update()
// lines 131-153 (the scale and factors are float tensors).
struct MegatronReference {
  float _scale, min_scale, growth_factor, backoff_factor;
  int growth_interval, hysteresis;
  int _growth_tracker = 0, _hysteresis_tracker = hysteresis;

  void update(bool found_inf) {
    if (found_inf) {
      _growth_tracker = 0;
      _hysteresis_tracker -= 1;
      if (_hysteresis_tracker <= 0) _scale = std::max(_scale * backoff_factor, min_scale);
    } else {
      _growth_tracker += 1;
      if (_growth_tracker == growth_interval) {
        _growth_tracker = 0;
        _hysteresis_tracker = hysteresis;
        _scale = _scale * growth_factor;
      }
    }
  }
};

TEST(UpstreamMegatron, WalksRandomTracesStepByStep) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    MegatronConfig c;
    c.init_scale = 3.0 * std::ldexp(1.0, static_cast<int>(seed % 12));
    c.min_scale = 1.5;
    c.growth_interval = 1 + static_cast<int>(seed % 5);
    c.hysteresis = 1 + static_cast<int>(seed % 3);
    c.backoff_factor = seed % 2 == 0 ? 0.5 : 0.3;
    MegatronScaler s(c);
    MegatronReference ref{static_cast<float>(c.init_scale), 1.5f, 2.0f, static_cast<float>(c.backoff_factor),
                          c.growth_interval, c.hysteresis};
    const auto flags = random_flags(seed + 400, 300, 0.2);
    for (std::size_t k = 0; k < flags.size(); ++k) {
      const double used = ref._scale;
      ref.update(flags[k]);
      const StepResult r = s.step(flags[k]);
      ASSERT_EQ(r.scale_used, used) << "seed " << seed << " step " << k;
      ASSERT_EQ(s.scale(), static_cast<double>(ref._scale)) << "seed " << seed << " step " << k;
      ASSERT_EQ(s.hysteresis(), ref._hysteresis_tracker) << "seed " << seed << " step " << k;
    }
  }
}

// --- Transformer Engine delayed scaling -----------------------------------------------
// NVIDIA/TransformerEngine d0067d0, transformer_engine/common/recipe/
// delayed_scaling.cu: kernel (lines 84-154, the per-tensor update) and
// kernel_bulk (lines 162-253, what the PyTorch path runs). Slot 0 of the
// history holds this step's amax (written by the forward pass); the kernel
// rolls the history and takes the max with fmaxf from 0. The threads of a
// block are walked in order; fmaxf's reduction does not depend on it.
struct TeDelayedReference {
  std::vector<float> amax_history;  // length x 1
  float scale = 1;
  bool bulk;
  bool most_recent;
  float scaled_max;

  void roll_and_reduce(float last_amax, float& amax) {
    const std::size_t length = amax_history.size();
    std::vector<float> updated(length);
    for (std::size_t i = 0; i < length; ++i) {
      float a = (i < length - 1) ? amax_history[i + 1] : last_amax;
      amax = std::fmax(amax, a);
      updated[i] = (i > 0) ? a : 0;
    }
    amax_history = updated;
  }

  void step(float forward_amax) {
    amax_history[0] = forward_amax;
    float amax = 0;
    const auto last_amax = amax_history[0];
    if (!bulk || last_amax != 0.0f) roll_and_reduce(last_amax, amax);
    if (most_recent) amax = last_amax;
    float s;
    if (std::isfinite(amax) && amax > 0) {
      s = scaled_max / amax;
    } else {
      s = scale;
    }
    if (std::isinf(s)) s = std::numeric_limits<float>::max();
    scale = s;
  }
};

std::vector<float> random_amaxes(std::uint64_t seed, int steps) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> kind(0, 19), exponent(-140, 100);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::vector<float> amaxes;
  for (int k = 0; k < steps; ++k) {
    const int what = kind(rng);
    if (what < 4) amaxes.push_back(0.0f);
    else if (what == 4) amaxes.push_back(kInf);
    else if (what == 5) amaxes.push_back(kNan);
    else amaxes.push_back(std::ldexp(mantissa(rng), exponent(rng) / 4));
  }
  return amaxes;
}

TEST(UpstreamTeDelayed, BothKernelsWalkRandomTracesStepByStep) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    for (const DelayedKernel kernel : {DelayedKernel::bulk, DelayedKernel::per_tensor}) {
      DelayedConfig c;
      c.history = 1 + static_cast<int>(seed % 6);
      c.algo = seed % 3 == 0 ? AmaxAlgo::most_recent : AmaxAlgo::max;
      c.margin = static_cast<float>(seed % 2);
      c.fp8_max = seed % 4 == 0 ? kE5M2Max : kE4M3Max;
      c.kernel = kernel;
      DelayedScaler s(c);
      TeDelayedReference ref{std::vector<float>(static_cast<std::size_t>(c.history), 0.0f), 1.0f,
                             kernel == DelayedKernel::bulk, c.algo == AmaxAlgo::most_recent,
                             c.fp8_max * std::pow(2.f, -c.margin)};
      const auto amaxes = random_amaxes(seed + 500, 200);
      for (std::size_t k = 0; k < amaxes.size(); ++k) {
        const double used = ref.scale;
        ref.step(amaxes[k]);
        ASSERT_EQ(s.step(amaxes[k]).scale_used, used) << "seed " << seed << " step " << k;
        ASSERT_EQ(s.scale(), static_cast<double>(ref.scale)) << "seed " << seed << " step " << k;
      }
    }
  }
}

// The finding: amaxes 100, 0, 0, 50 with a history of 2 (E4M3). The bulk
// kernel ignores the zeros, so 100 is still in the window at the last step:
// 448 / 100 = 4.48 (in fp32); the per-tensor kernel has rolled it out:
// 448 / 50 = 8.96.
TEST(UpstreamTeDelayed, TheFindingsTrace) {
  for (const DelayedKernel kernel : {DelayedKernel::bulk, DelayedKernel::per_tensor}) {
    DelayedConfig c;
    c.history = 2;
    c.kernel = kernel;
    DelayedScaler s(c);
    TeDelayedReference ref{std::vector<float>(2, 0.0f), 1.0f, kernel == DelayedKernel::bulk, false, 448.0f};
    for (float a : {100.0f, 0.0f, 0.0f, 50.0f}) {
      s.step(a);
      ref.step(a);
    }
    EXPECT_EQ(s.scale(), static_cast<double>(ref.scale));
    EXPECT_EQ(s.scale(), static_cast<double>(kernel == DelayedKernel::bulk ? 448.0f / 100.0f : 448.0f / 50.0f));
  }
}

// --- MXFP8 non-finite blocks -----------------------------------------------------------
// NVIDIA/TransformerEngine d0067d0: transformer_engine/common/util/
// ptx_arch_spec.cuh float_to_e8m0 (lines 72-100, the pre-Blackwell path;
// Blackwell's cvt.rp.satfinite agrees on these cases) applied to amax *
// (1 / fp8_max), and transformer_engine/common/cast/mxfp8/quantize_mxfp8.cuh
// lines 209-259: the block amax is fmaxf(amax, fabsf(elt)) from 0.
double e8m0_decode(std::uint8_t code) {
  return code == 0xFF ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, code - 127);
}

std::uint8_t float_to_e8m0(float val) {
  if (std::isnan(val)) return 0xFF;
  if (std::isinf(val)) return 0xFE;
  if (val == 0.0f) return 0x00;
  std::uint32_t val_u32 = 0;
  std::memcpy(&val_u32, &val, sizeof val);
  std::uint8_t exponent = static_cast<std::uint8_t>(val_u32 >> 23);
  const std::uint32_t mantissa = val_u32 & 0x7FFFFF;
  if ((mantissa > 0 && exponent != 0xFE) && !(exponent == 0 && mantissa <= 0x400000)) ++exponent;
  return exponent;
}

float te_block_amax(const std::vector<float>& block) {
  float thread_amax = 0.0f;
  for (float elt : block) thread_amax = std::fmax(thread_amax, std::fabs(elt));
  return thread_amax;
}

TEST(UpstreamTeMxfp8, NonFiniteAmaxesAndElements) {
  const float rcp = 1.0f / kE4M3Max;
  for (float amax : {kInf, 448.0f, 896.0f, 1.0f, 0.0f}) {
    const double te = e8m0_decode(float_to_e8m0(amax * rcp));
    EXPECT_EQ(mxfp8_block_scale(amax), te) << amax;
  }
  EXPECT_TRUE(std::isnan(e8m0_decode(float_to_e8m0(kNan * rcp))));
  EXPECT_TRUE(std::isnan(mxfp8_block_scale(kNan)));
  // Blocks: a NaN element does not count; an infinite one gives 2^127.
  std::vector<float> v(3 * 32, 0.5f);
  v[3] = kNan;         // block 0: amax 0.5
  v[32 + 1] = -kInf;   // block 1: amax inf
  for (int i = 64; i < 96; ++i) v[static_cast<std::size_t>(i)] = kNan;  // block 2: all NaN: amax 0
  const auto scales = mxfp8_block_scales(v);
  ASSERT_EQ(scales.size(), 3u);
  for (std::size_t b = 0; b < 3; ++b) {
    const std::vector<float> block(v.begin() + static_cast<long>(32 * b), v.begin() + static_cast<long>(32 * b + 32));
    const double te = e8m0_decode(float_to_e8m0(te_block_amax(block) * rcp));
    EXPECT_EQ(scales[b], te) << "block " << b;
  }
  EXPECT_EQ(scales[1], 0x1p127);
}

}  // namespace
