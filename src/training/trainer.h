// Training a model side by side: the same model from the same
// initial weights on the same batches, on any backend, under any recipe and
// loss-scale strategy, with the recorders on.
//
// One classifier step (mlp, cnn), in PyTorch's AMP order:
//  1. the master weights are cast to the working weights (Precision::weights);
//  2. forward; the loss (fp32) from the logits;
//  3. backward from the loss gradient multiplied by the loss scale s in fp32
//     (d = fl32(dloss * fl32(s)): the gradient of the scaled loss, computed in
//     fp32 BEFORE it is stored in the low format, so that the scale does what
//     it is for);
//  4. every weight gradient is unscaled (training/unscale.h) and checked for
//     non-finite values (found_inf);
//  5. the scaler steps on found_inf; a skipped step leaves weights and
//     optimizer state untouched (the step counter of Adam included);
//  6. otherwise the optimizer updates the master weights; the recorders
//     measure the updates (lost updates with and without master weights).
// The first non-finite value of the step is reported with its layer, tensor
// and pass: a forward overflow (which no loss scale can fix) shows as
// pass "forward".
//
// One dcgan step: a discriminator step on the real batch and a generated one
// concatenated (targets 1 and 0; BCE with logits over both), then a
// generator step through the discriminator (target 1). Each step is scaled,
// unscaled and checked separately; one scaler serves both (stepped twice per
// iteration, as a single torch GradScaler with scaler.update() after each
// optimizer is).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/batches.h"
#include "data/dataset.h"
#include "nn/backend.h"
#include "nn/models.h"
#include "nn/sequential.h"
#include "refs/optimizer_ref.h"
#include "training/loss_scaler.h"
#include "training/data_parallel.h"
#include "training/recipe.h"
#include "training/step_recorder.h"

namespace mpverify::training {

enum class OptimizerKind { sgd, adam };

// An injected fault: at step `step`, element 0 of parameter `parameter`'s
// gradient is set to +inf after the backward (a crafted bad gradient).
struct FaultInjection {
  std::size_t step = 0;
  std::string parameter;  // e.g. "fc1.w"
};

class Trainer;

// A final evaluation supplied by a higher layer, so that training/ needs no
// metrics code (dcgan's FID and KID: metrics/gan_evaluation.h). `check` runs
// at the end of the Trainer's constructor (it throws std::invalid_argument
// to refuse the configuration before any file is written; may be empty);
// `run` runs after the last step (after samples.npy) and its object becomes
// summary.json's "evaluation". dcgan runs only (the classifiers have
// Trainer::evaluate).
struct FinalEvaluation {
  std::function<void(const Trainer&)> check;
  std::function<nlohmann::json(Trainer&)> run;
};

struct TrainConfig {
  std::string model = "mlp";     // mlp, cnn, dcgan, transformer (training/text_task.h)
  // synthetic (data/synthetic_digits.h, 28 x 28, drawn from the run's seed),
  // mnist (data/mnist.h, 28 x 28) or sklearn-digits (data/sklearn_digits.h,
  // 8 x 8). The real sets use their fixed split (the same for every seed).
  // kjv (data/char_text.h: the King James verses of Debian's bible-kjv-text) is the transformer's text, and
  // the transformer's only data.
  std::string data = "synthetic";
  std::filesystem::path data_dir;  // the real set's files; empty: the loader's default
  // Synthetic: the sizes drawn. Real: at most this many examples of the
  // split's (shuffled) train and test sets are used (MNIST 8000 / 2000,
  // sklearn-digits 1437 / 360).
  // The transformer uses the text's whole train part, and at most test_size held-out windows.
  std::size_t train_size = 8000;
  std::size_t test_size = 2000;
  // The transformer: tokens per window (its context length; a batch is batch_size windows).
  std::size_t context_length = 64;
  // Tests only: this text in place of the bible-kjv-text file (data::char_text_from_string).
  std::optional<std::string> text_for_tests;
  // The classifiers' input images (training batches and test chunks; the
  // data sets themselves stay in [0, 1]) multiplied by this factor in fp32
  // as they enter the model: a model made to overflow on purpose (the
  // scalers experiment; the MLP has no normalization, so its activations and
  // gradients grow with it). Must be > 0 and fit in fp32; summary.json shows
  // it only when != 1.
  double input_scale = 1.0;
  // Classifiers: also evaluate on the test split every N steps (0: only
  // after the last step), into that step's line of steps.jsonl.
  std::size_t eval_every = 0;
  // dcgan: after the last step, write this many generated images to
  // samples.npy (Trainer::generate with samples_seed, default the run's seed).
  std::size_t samples = 0;
  std::optional<std::uint64_t> samples_seed;
  // dcgan: evaluated after the last step into summary.json's "evaluation"
  // (see FinalEvaluation; `train --extractor` sets it).
  std::optional<FinalEvaluation> final_evaluation;
  std::string recipe = "fp32";
  std::string scaler = "none";   // a found_inf-driven strategy (training/loss_scaler.h)
  ScalerOptions scaler_options;
  nn::BackendKind backend = nn::BackendKind::ref;
  // Tests only: builds the backend in place of nn::make_backend(backend), e.g.
  // a gpu backend that stands in for a missing device (tests/gpu_training_path_test).
  std::function<std::unique_ptr<nn::Backend>()> backend_factory;
  std::size_t steps = 200;
  std::size_t batch_size = 64;
  // mlp and cnn: each step's batch cut into this many shards whose gradients are all-reduced in a format
  // (training/data_parallel.h); off by default. Per-tensor records and --against ref are not kept per shard.
  DataParallel data_parallel;
  // Synthetic data only: the images' height = width (the models' shapes
  // follow), for speed tables over resolutions; the real sets are 28 (8).
  int image_size = 28;
  std::uint64_t seed = 0;
  OptimizerKind optimizer = OptimizerKind::sgd;
  ops::SgdParams sgd{0.05, 0.9};
  ops::AdamParams adam{};
  bool recorders = true;         // false: no StoreObserver at all (the speed baseline)
  std::size_t record_every = 1;  // per-tensor records every N steps (0: none)
  bool histograms = true;
  std::string study_format = "fp16";
  bool against_reference = false;  // an FP32 ref model evaluated at the run's weights, every step
  std::optional<FaultInjection> inject;
  // Also shown every stored tensor, weight and update (tests recount the
  // recorders' figures from it; a dump tool can save them). Not owned.
  nn::StoreObserver* extra_observer = nullptr;
};

// A classifier's held-out evaluation (summary.json's "evaluation", contract 2).
struct Evaluation {
  std::size_t test_size = 0, correct = 0;
  double test_loss = 0;     // mean softmax cross-entropy over the test set (the backend's loss op)
  bool diverged = false;    // the run aborted, or a weight or a test logit is not finite
  std::string reason;       // why it diverged
  // {"test_accuracy": correct / test_size (null when diverged), "test_loss" (null when not finite),
  //  "test_size", "correct", "diverged", "reason"}.
  nlohmann::json to_json() const;
};

class Trainer {
 public:
  // Builds data, model, recipe, scaler and backend; throws
  // std::invalid_argument naming the bad setting.
  explicit Trainer(TrainConfig config);
  ~Trainer();
  // The context holds the recipe's precision by reference: a Trainer stays put.
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Runs the next step and returns its step-log object (steps.jsonl).
  nlohmann::json step();
  std::size_t steps_done() const { return step_; }
  bool aborted() const { return aborted_; }
  std::size_t skipped_steps() const { return skipped_; }

  // The step's per-tensor records and histograms (empty unless recorded).
  std::vector<std::string> take_tensor_lines() { return recorder_.take_tensor_lines(); }
  std::vector<std::string> take_histogram_lines() { return recorder_.take_histogram_lines(); }
  std::vector<nlohmann::json> take_block_lines() { return recorder_.take_block_lines(); }

  // summary.json: the configuration, totals, thresholds, counters.
  nlohmann::json summary() const;

  // Evaluates the classifier (mlp, cnn) at its current master weights on
  // the test split: batch norm in evaluation mode, the run's backend and
  // recipe (weights cast to the working format, activations stored in
  // theirs), in chunks of kEvaluationChunk examples. Nothing the training
  // reads is changed (no counters, recorders, scaler or operand-scaling
  // history: an fp8 run is evaluated with current, per-tensor scaling), so
  // evaluating does not alter the run. Throws std::logic_error for dcgan.
  Evaluation evaluate();
  static constexpr std::size_t kEvaluationChunk = 256;

  // dcgan: n images from the generator at its current master weights, in
  // evaluation mode (batch norm with its running statistics), with the run's
  // backend and recipe as evaluate() uses them, in chunks of kEvaluationChunk.
  // The latent codes are the bell-shaped noise of data::Draws (seed, stream
  // kSampleStream), n x latent values in order, so the same (weights, n,
  // seed) give bitwise the same images, and the first k images' latent codes
  // do not depend on n. Images are mapped from the generator's [-1, 1] to the data's [0, 1]
  // ((g + 1) / 2, in float), n x 1 x S x S, C order. Changes nothing the
  // training reads. Throws std::logic_error for a classifier.
  std::vector<float> generate(std::size_t n, std::uint64_t seed);
  static constexpr std::uint64_t kSampleStream = std::uint64_t{0x5A3} << 48;

  // The trained model(s) and the data, for tests.
  std::vector<nn::Parameter*> parameters();
  nn::Sequential& classifier();  // std::logic_error for dcgan
  nn::Dcgan& dcgan();            // std::logic_error for a classifier
  const data::Split& data() const;
  const TrainConfig& config() const { return config_; }
  const Recipe& recipe() const { return recipe_; }

 private:
  struct Impl;
  void scale_inputs(std::span<float> images) const;  // config_.input_scale
  // The pieces of the constructor, in its order.
  void check_settings() const;
  void check_text_settings() const;
  void check_data_parallel_settings() const;
  void make_scaler_and_backend();
  void install_operand_scaling();
  void make_context();
  void load_data();
  void make_models();
  void check_model_options();
  // The pieces of step(), in its order.
  struct UpdateResult;
  void classifier_step(nlohmann::json& log);
  // Forward, loss and backward (dlogits times `scale`) of one batch, or of its data-parallel shards with
  // their gradients all-reduced; returns the loss and the number of examples predicted right.
  std::pair<float, std::size_t> forward_backward(const nn::Tensor& x, std::span<const std::int32_t> labels,
                                                 double scale, ops::SoftmaxCrossEntropyShape& shape);
  std::pair<float, std::size_t> shards_forward_backward(const nn::Tensor& x, std::span<const std::int32_t> labels,
                                                        double scale);
  void classifier_step_on(nn::Tensor& x, std::span<const std::int32_t> labels, const data::Batch* batch,
                          nlohmann::json& log);
  void evaluate_chunk(nn::Sequential& model, nn::Context& ctx, nn::Tensor& x, std::span<const std::int32_t> labels,
                      Evaluation& e, double& loss_sum);
  void cast_and_record_weights();
  nlohmann::json reference_step(const nn::Tensor& x, const data::Batch& batch,
                                const ops::SoftmaxCrossEntropyShape& shape, float loss);
  void compare_with_reference(nlohmann::json& reference);
  void dcgan_step(nlohmann::json& log);
  UpdateResult discriminator_step(const nn::Tensor& z, nn::Tensor& both, float& loss_d);
  UpdateResult generator_step(const nn::Tensor& z, nn::Tensor& both, double scale_g, float& loss_g);
  UpdateResult update(const std::vector<nn::Parameter*>& params);
  void inject_fault(const std::vector<nn::Parameter*>& params);
  void update_parameter(nn::Parameter& p);
  void record_update(const nn::Parameter& p, const std::vector<float>& before, const std::vector<float>& u,
                     const formats::Format& written);
  void log_step_rates(nlohmann::json& log);
  TrainConfig config_;
  Recipe recipe_;
  std::unique_ptr<Impl> impl_;
  StepRecorder recorder_;
  std::size_t step_ = 0, skipped_ = 0;
  bool aborted_ = false;
  double last_loss_ = 0;
};

// Trains config.steps steps into `out` (steps.jsonl, tensors.jsonl,
// histograms.jsonl, summary.json; see record/run_log.h for the atomic
// writes). `progress` (may be empty) is called after every step.
void run_training(const TrainConfig& config, const std::filesystem::path& out,
                  const std::function<void(const nlohmann::json& step)>& progress = {});

}  // namespace mpverify::training
