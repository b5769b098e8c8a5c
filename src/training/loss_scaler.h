// Loss-scale and FP8-scale strategies as small state machines, reproducing
// the frameworks' rules (../shared/reference/loss-scalers.md) bit for bit:
// each keeps its scale in the number type the framework keeps it in, and
// does the framework's arithmetic in that type.
//
// Two kinds. found_inf-driven (LossScaler::step(found_inf)): the scale
// multiplies the loss; a step whose unscaled gradients hold a non-finite
// value is skipped. amax-driven (AmaxScaler::step(amax)): the scale maps a
// tensor into an FP8 format; nothing is skipped (skipped is always false).
// Every step reports the scale it ran with (the scale before the update).
//
// name       defaults (option keys, `name.key=value`)          number type and arithmetic
// ---------  ------------------------------------------------  -------------------------------------------
// none       s = 1; skip=false                                 double, never changes
// static     scale=S (required, e.g. 2^7; MXNet suggests       double, never changes
//            64..512); skip=false
//   (skip=false: a found_inf step is applied, as plain PyTorch without a
//    GradScaler (bf16, fp8 without a scaler) and Apex's static scaler do: the
//    non-finite update reaches the weights. skip=true: it is detected and
//    skipped, as DeepSpeed's and Megatron's constant scalers do. Either way
//    the step is reported as found_inf.)
// torch      init=2^16 growth=2 backoff=0.5 interval=2000;      fp32 scale (torch.float32 tensor). ATen's
//            no floor (the scale can underflow to 0)            _amp_update_scale_ computes float*double in
//                                                               double and rounds to fp32; the grown value
//                                                               is kept only if finite (the guard). Unscale
//                                                               multiplies by fp32(1/fp64(s)).
// apex       (legacy: apex.amp was removed upstream)           double (Python float): s/2, min(2s, max);
//            init=2^16 interval=2000 max=2^24 min=0 (0: none)   init is clipped to max. Unscale * fp32(1/s).
// keras      variant=keras3 init=2^15 interval=2000              fp32 (a float32 variable): s*2 and s/2 in
//            keras3: no floor, no finiteness guard: 2^127*2     fp32. keras3 can reach +inf and then stays
//              = inf, and inf/2 = inf stays inf forever         there. Unscale divides g / s in fp32.
//            variant=tf-keras: floor 1 (max(s/2, 1)), grows
//              only if the new scale is finite
// deepspeed  optimizer=zero (DynamicLossScaler: ZeRO, bf16    double (Python float): s/2, s*2; no
//            off, fp16 with ZeRO stages 1-3) or fp16            finiteness guard (2s can reach +inf).
//            (FP16_Optimizer / FP16_UnfusedOptimizer: fp16      zero: growth when (iteration -
//            without ZeRO).                                     last_overflow) % interval == 0, iteration
//            zero, preset=config: init=2^16 interval=1000       counted from 0, last_overflow from -1;
//            version=X.Y.Z (default: the newest): up to 0.17.0  (version <= 0.17.0; from 0.17.1 as fp16:
//            the older growth rule                              stable > 0, stable % interval == 0);
//            hysteresis=2 min=1 consecutive_hysteresis=false    hysteresis; at min with raise: the step
//            raise_error_at_min_scale=true; preset=no-keys (a   reports aborted (DeepSpeed raises) and the
//            config whose fp16 section has none of these        scaler stops.
//            keys): init=2^32, hysteresis=1, the rest as        fp16: no hysteresis, no raise: s =
//            above. The preset is applied first, other keys     max(s/2, min); growth when stable =
//            then override it.                                  iteration - last_overflow - 1 is > 0 and
//            fp16: init=2^16 (with or without keys)             stable % interval == 0. Every found_inf
//            interval=1000 min=1; no other key.                 step is skipped, even when only h changed.
// megatron   init=2^32 min=1 interval=1000 hysteresis=2         fp32 (torch.float tensors, factors too):
//            growth=2 backoff=0.5                               s*b, max(., min), s*g in fp32; no guard.
//                                                               h resets only when the scale grows.
// fairseq    init=2^7 interval=2^14 tolerance=0 threshold=0     double (Python float): s/2 (then
//   (fairseq/metaseq DynamicLossScaler, fp16 trainer            max(s, threshold) when threshold > 0),
//    defaults on one GPU, update_freq 1; 0: no threshold)       s*2 when (iteration - last_overflow) %
//            min=1e-4                                           interval == 0. An overflow lowers s only
//                                                               when overflows since the last rescale /
//                                                               iterations since it >= tolerance. When s
//                                                               <= min the scale is restored and the run
//                                                               aborts (FloatingPointError).
// nemo       init=2^32 interval=1000 hysteresis=2 growth=2      fp32 as torch (NeMo's GradScaler on top of
//   (NeMo's   backoff=0.5 (NeMo's Megatron trainer builder;     torch.cuda.amp.GradScaler, apex's
//    GradScaler) the class itself: 2^16, 2000, 1)               update_scale_hysteresis): an overflow
//                                                               takes h -= 1 and backs off only when h <=
//                                                               0, else only resets the growth count; a
//                                                               clean step is torch's update, then h = H.
//                                                               hysteresis=1 is apex.transformer's
//                                                               GradScaler (torch's rule).
// delayed    fp8=e4m3 (448; e5m2: 57344) margin=0              fp32: s = (fp8_max * powf(2,-margin)) / a,
//   (TE DelayedScaling) history=1024 algo=max (or most_recent;    a = fmaxf over the last `history` amaxes
//            Megatron uses history=1, most_recent); initial     (zeros before; fmaxf drops a NaN) or the
//            scale 1; kernel=bulk (PyTorch's path,              newest; a not finite or 0: keep s; s = inf
//            kernel_bulk: an amax of 0 neither enters the       -> FLT_MAX. The step runs with the old s.
//            history nor changes s) or per-tensor (the
//            per-tensor kernel: a 0 enters the history)
// current    fp8=e4m3 pow2=false epsilon=0                     fp32, TE's compute_scale_from_amax: amax <
//   (per-tensor, just in time)                                  epsilon -> epsilon; amax inf or 0 -> 1;
//                                                               s = fp8_max / amax; inf -> FLT_MAX, NaN -> 1;
//                                                               pow2 masks the mantissa (rounds down to 2^k).
// mxfp8      fp8=e4m3 (448; e5m2: 57344), 32-element blocks    exact: the E8M0 block scale X = 2^k, k the
//                                                               least integer with amax <= fp8_max * 2^k
//                                                               (= ceil(log2(amax/fp8_max))), clamped to
//                                                               [-127, 127]. X DECODES (x ~ X * element),
//                                                               while delayed/current scales ENCODE
//                                                               (element = x * s). amax 0 -> 2^-127 (E8M0
//                                                               code 0, as TE encodes a zero block; any X
//                                                               represents zeros exactly); amax inf ->
//                                                               2^127 (TE's float_to_e8m0: 0xFE); amax NaN
//                                                               -> NaN (0xFF). A block's amax ignores NaN
//                                                               elements (TE reduces with fmaxf).
//
// Trace (mpverify replay-scalers): one step per line, step numbers from 0.
// A line holds `0` or `1` (found_inf) or an amax: a decimal number, inf or
// nan (>= 0; rounded to fp32 for the amax-driven strategies, as TE keeps amax
// in fp32). Blank lines and `#` comments (whole line or trailing) are
// ignored. found_inf-driven strategies accept only the values 0 and 1; an
// amax-driven strategy reads 0 and 1 as amaxes. See training/scaler_replay.h;
// CSV, JSON lines, run directories and framework logs: training/trace_reader.h.
//
// A trace with an optimizer column replays one independent instance per
// optimizer name (a GAN with a GradScaler per player, apex's per-loss
// scalers). One torch GradScaler shared by several optimizers (it skips per
// optimizer but updates the scale once from their sum) is not modelled.
// With an amax column the found_inf-driven strategies decide overflow from
// it at their own scale (training/scaler_replay.h, training/scaled_range.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mpverify::training {

struct StepResult {
  double scale_used = 1;  // the scale this step ran with
  bool skipped = false;   // the optimizer update of this step was not applied
  bool aborted = false;   // the framework stops the run at this step (DeepSpeed's raise at min scale)
};

enum class Drive { found_inf, amax };

class Scaler {
 public:
  virtual ~Scaler() = default;
  virtual Drive drive() const = 0;
  // The scale the next step will run with (amax-driven: of the last step).
  virtual double scale() const = 0;
  // The lowest scale the rules can produce: 0 where there is no floor.
  virtual double floor() const = 0;
};

class LossScaler : public Scaler {
 public:
  Drive drive() const final { return Drive::found_inf; }
  // One optimizer step. Throws std::logic_error after a step that aborted.
  virtual StepResult step(bool found_inf) = 0;
};

class AmaxScaler : public Scaler {
 public:
  Drive drive() const final { return Drive::amax; }
  // One step of one tensor whose max |x| is amax (fp32, as the frameworks keep it).
  virtual StepResult step(float amax) = 0;
  // The FP8 format's largest value (kE4M3Max or kE5M2Max): which format the scale maps into.
  virtual float fp8_max() const = 0;
  // true: the scale decodes (x ~ X * element, mxfp8); false: it encodes (element = x * s).
  virtual bool decodes() const { return false; }
};

// --- found_inf-driven --------------------------------------------------------------

// none (scale 1) and static(S).
class StaticScaler final : public LossScaler {
 public:
  explicit StaticScaler(double scale, bool skip_nonfinite = false);
  StepResult step(bool found_inf) override;
  double scale() const override { return scale_; }
  double floor() const override { return scale_; }

 private:
  double scale_;
  bool skip_;
};

struct TorchConfig {
  double init_scale = 65536.0;  // rounded to fp32 as torch.full(..., dtype=float32) does
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 2000;
};

class TorchScaler final : public LossScaler {
 public:
  explicit TorchScaler(const TorchConfig& config = {});
  StepResult step(bool found_inf) override;
  double scale() const override { return scale_; }
  double floor() const override { return 0.0; }
  int growth_tracker() const { return tracker_; }
  int growth_interval() const { return config_.growth_interval; }
  // The counter of a saved state (GradScaler.state_dict()'s _growth_tracker).
  void restore(int growth_tracker) { tracker_ = growth_tracker; }

 private:
  TorchConfig config_;
  float scale_;
  int tracker_ = 0;
};

struct ApexConfig {
  double init_scale = 65536.0;
  int scale_window = 2000;
  double min_scale = 0.0;  // 0: no floor (Apex's min_loss_scale=None)
  double max_scale = 16777216.0;
};

class ApexScaler final : public LossScaler {
 public:
  explicit ApexScaler(const ApexConfig& config = {});
  StepResult step(bool found_inf) override;
  double scale() const override { return scale_; }
  double floor() const override { return config_.min_scale; }

 private:
  ApexConfig config_;
  double scale_;
  int unskipped_ = 0;
};

enum class KerasVariant { keras3, tf_keras };

struct KerasConfig {
  KerasVariant variant = KerasVariant::keras3;
  double init_scale = 32768.0;  // rounded to fp32 (a float32 variable)
  int growth_steps = 2000;
};

class KerasScaler final : public LossScaler {
 public:
  explicit KerasScaler(const KerasConfig& config = {});
  StepResult step(bool found_inf) override;
  double scale() const override { return scale_; }
  double floor() const override { return config_.variant == KerasVariant::tf_keras ? 1.0 : 0.0; }

 private:
  KerasConfig config_;
  float scale_;
  int counter_ = 0;
};

// zero: DynamicLossScaler (deepspeed/runtime/fp16/loss_scaler.py), used by
// ZeRO; fp16: FP16_Optimizer._update_scale (fused_optimizer.py), without ZeRO.
enum class DeepSpeedOptimizer { zero, fp16 };

struct DeepSpeedConfig {
  DeepSpeedOptimizer optimizer = DeepSpeedOptimizer::zero;
  double init_scale = 65536.0;  // 2^initial_scale_power
  int scale_window = 1000;
  int hysteresis = 2;           // DeepSpeed's delayed_shift
  double min_scale = 1.0;
  bool consecutive_hysteresis = false;
  bool raise_error_at_min_scale = true;
  // zero only. DeepSpeed up to 0.17.0 grew when (iteration - last_overflow) % interval == 0; from 0.17.1
  // (deepspeedai/DeepSpeed e440506b, "Improve overflow handling in ZeRO") it waits, like FP16_Optimizer,
  // for stable = iteration - last_overflow - 1 > 0 with stable % interval == 0. deepspeed.version picks.
  bool growth_before_0_17_1 = false;

  // DynamicLossScaler's own defaults, used when the config has none of the keys.
  static DeepSpeedConfig config_without_keys();
};

class DeepSpeedScaler final : public LossScaler {
 public:
  explicit DeepSpeedScaler(const DeepSpeedConfig& config = {});
  StepResult step(bool found_inf) override;
  const DeepSpeedConfig& config() const { return config_; }
  double scale() const override { return scale_; }
  double floor() const override { return config_.min_scale; }
  int hysteresis() const { return hysteresis_; }
  std::int64_t iteration() const { return iteration_; }
  std::int64_t last_overflow_iteration() const { return last_overflow_; }
  bool aborted() const { return aborted_; }
  // A saved state: DynamicLossScaler's cur_iter, last_overflow_iter, cur_hysteresis.
  void restore(std::int64_t iteration, std::int64_t last_overflow, int hysteresis) {
    iteration_ = iteration;
    last_overflow_ = last_overflow;
    hysteresis_ = hysteresis;
  }

 private:
  DeepSpeedConfig config_;
  double scale_;
  int hysteresis_;
  std::int64_t iteration_ = 0;
  std::int64_t last_overflow_ = -1;
  bool aborted_ = false;

  StepResult step_zero(bool found_inf);
  StepResult step_fp16(bool found_inf);
};

struct MegatronConfig {
  double init_scale = 4294967296.0;  // each rounded to fp32 (torch.float tensors)
  double min_scale = 1.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 1000;
  int hysteresis = 2;
};

class MegatronScaler final : public LossScaler {
 public:
  explicit MegatronScaler(const MegatronConfig& config = {});
  StepResult step(bool found_inf) override;
  double scale() const override { return scale_; }
  double floor() const override { return min_; }
  int hysteresis() const { return hysteresis_; }
  int growth_tracker() const { return tracker_; }
  int growth_interval() const { return config_.growth_interval; }
  // A saved state: DynamicGradScaler.state_dict()'s growth_tracker and hysteresis_tracker.
  void restore(int growth_tracker, int hysteresis) {
    tracker_ = growth_tracker;
    hysteresis_ = hysteresis;
  }

 private:
  MegatronConfig config_;
  float scale_, min_, growth_, backoff_;
  int tracker_ = 0;
  int hysteresis_;
};

struct FairseqConfig {
  double init_scale = 128.0;  // --fp16-init-scale
  int scale_window = 16384;   // 2^14 / data-parallel size / update_freq
  double tolerance = 0.0;     // --fp16-scale-tolerance
  double threshold = 0.0;     // --threshold-loss-scale; 0: None
  double min_scale = 1e-4;    // --min-loss-scale
};

class FairseqScaler final : public LossScaler {
 public:
  explicit FairseqScaler(const FairseqConfig& config = {});
  StepResult step(bool found_inf) override;
  double scale() const override { return scale_; }
  double floor() const override { return config_.threshold; }
  std::int64_t iteration() const { return iteration_; }
  std::int64_t last_rescale_iteration() const { return last_rescale_; }
  int overflows_since_rescale() const { return overflows_since_rescale_; }

 private:
  FairseqConfig config_;
  double scale_;
  std::int64_t iteration_ = 0, last_overflow_ = -1, last_rescale_ = -1;
  int overflows_since_rescale_ = 0;
  bool aborted_ = false;
};

struct NemoConfig {
  double init_scale = 4294967296.0;  // rounded to fp32 as torch.full(..., dtype=float32) does
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 1000;
  int hysteresis = 2;
};

class NemoScaler final : public LossScaler {
 public:
  explicit NemoScaler(const NemoConfig& config = {});
  StepResult step(bool found_inf) override;
  double scale() const override { return scale_; }
  double floor() const override { return 0.0; }
  int growth_tracker() const { return tracker_; }
  int hysteresis() const { return hysteresis_; }
  int growth_interval() const { return config_.growth_interval; }
  // A saved state: NeMo GradScaler.state_dict()'s _growth_tracker and _hysteresis_tracker.
  void restore(int growth_tracker, int hysteresis) {
    tracker_ = growth_tracker;
    hysteresis_ = hysteresis;
  }

 private:
  NemoConfig config_;
  float scale_;
  int tracker_ = 0;
  int hysteresis_;
};

// --- amax-driven (FP8) ---------------------------------------------------------------

inline constexpr float kE4M3Max = 448.0f;
inline constexpr float kE5M2Max = 57344.0f;

enum class AmaxAlgo { max, most_recent };

// Transformer Engine's two update kernels (common/recipe/delayed_scaling.cu):
// bulk (kernel_bulk, what PyTorch runs: an amax of 0 is no update at all) and
// per_tensor (kernel: the 0 enters the history like any amax).
enum class DelayedKernel { bulk, per_tensor };

// The longest amax history accepted (Transformer Engine's default is 1024): the history is scanned every step.
inline constexpr int kMaxDelayedHistory = 65536;

struct DelayedConfig {
  float fp8_max = kE4M3Max;
  float margin = 0.0f;
  int history = 1024;
  AmaxAlgo algo = AmaxAlgo::max;
  DelayedKernel kernel = DelayedKernel::bulk;
};

class DelayedScaler final : public AmaxScaler {
 public:
  explicit DelayedScaler(const DelayedConfig& config = {});
  StepResult step(float amax) override;
  double scale() const override { return scale_; }
  double floor() const override { return 0.0; }
  float fp8_max() const override { return config_.fp8_max; }

 private:
  DelayedConfig config_;
  float scaled_max_;
  float scale_ = 1.0f;
  std::vector<float> history_;  // circular; zeros before the first steps
  std::size_t next_ = 0;
};

struct CurrentConfig {
  float fp8_max = kE4M3Max;
  bool pow2 = false;
  float epsilon = 0.0f;
};

// TE's compute_scale_from_amax (current scaling): see the table above.
float current_scale(float amax, const CurrentConfig& config = {});

class CurrentScaler final : public AmaxScaler {
 public:
  explicit CurrentScaler(const CurrentConfig& config = {}) : config_(config) {}
  StepResult step(float amax) override;
  double scale() const override { return scale_; }
  double floor() const override { return 0.0; }
  float fp8_max() const override { return config_.fp8_max; }

 private:
  CurrentConfig config_;
  float scale_ = 1.0f;
};

inline constexpr std::size_t kMxBlock = 32;

// The E8M0 decoding scale of one block whose max |x| is amax (see the table).
double mxfp8_block_scale(float amax, float fp8_max = kE4M3Max);
// One scale per 32-element block of values, in order; a trailing partial
// block gets its own scale (as if padded with zeros).
std::vector<double> mxfp8_block_scales(std::span<const float> values, float fp8_max = kE4M3Max);

// For a replay: each step's amax taken as one block's amax.
class Mxfp8Scaler final : public AmaxScaler {
 public:
  explicit Mxfp8Scaler(float fp8_max = kE4M3Max) : fp8_max_(fp8_max) {}
  StepResult step(float amax) override;
  double scale() const override { return scale_; }
  double floor() const override { return 0x1p-127; }
  float fp8_max() const override { return fp8_max_; }
  bool decodes() const override { return true; }

 private:
  float fp8_max_;
  double scale_ = 1.0;
};

// --- by name ---------------------------------------------------------------------------

using ScalerOptions = std::map<std::string, std::string>;  // key -> value, for one strategy

// none, static, torch, apex, keras, deepspeed, megatron, fairseq, nemo, delayed, current, mxfp8.
std::vector<std::string> scaler_names();
// A strategy with the keys of the table above set. Throws std::invalid_argument
// naming the unknown strategy, key or value and listing the valid ones.
std::unique_ptr<Scaler> make_scaler(std::string_view name, const ScalerOptions& options = {});

struct ScalerOption {
  std::string strategy, key, value;
};
// Parses `strategy.key=value`; throws std::invalid_argument.
ScalerOption parse_scaler_option(std::string_view text);

}  // namespace mpverify::training
