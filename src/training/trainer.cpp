#include "training/trainer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "data/mnist.h"
#include "data/random.h"
#include "data/sklearn_digits.h"
#include "data/synthetic_digits.h"
#include "emu/quantize.h"
#include "emu/rounding_key.h"
#include "io/npy.h"
#include "nn/matrix_layers.h"
#include "nn/models.h"
#include "nn/policies.h"
#include "nn/ref_backend.h"
#include "record/json_number.h"
#include "record/lost_updates.h"
#include "record/run_log.h"
#include "training/text_task.h"
#include "training/unscale.h"

namespace mpverify::training {

namespace {

// A counter set as summary.json keeps it: per site, what its roundings and additions did (emu/counters.h).
nlohmann::json counters_json(const emu::CounterSet& set) {
  nlohmann::json sites = nlohmann::json::object();
  for (const auto& [site, c] : set.sites())
    sites[site] = {{"elements", c.elements},   {"inexact", c.inexact},     {"underflow_to_zero", c.underflow_to_zero},
                   {"subnormal", c.subnormal}, {"overflow", c.overflow},   {"nan_created", c.nan_created},
                   {"swamped", c.swamped},     {"addends_nonzero", c.addends_nonzero}, {"truncated", c.truncated}};
  return sites;
}

[[noreturn]] void bad_config(std::string what) { throw std::invalid_argument(std::move(what)); }

double cosine(std::span<const float> a, std::span<const float> b) {
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : std::nan("");
}

// ||subject - reference|| / ||reference|| in double.
double relative_error(std::span<const float> reference, std::span<const float> subject) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const double d = static_cast<double>(subject[i]) - reference[i];
    diff += d * d;
    ref += static_cast<double>(reference[i]) * reference[i];
  }
  return ref > 0 ? std::sqrt(diff / ref) : std::nan("");
}

// The recipe's formats for evaluation and sampling; fp8 operands scaled from
// their own amax (current scaling), so that the training's delayed-scaling
// histories stay untouched.
nn::Precision evaluation_precision(const Recipe& recipe) {
  nn::Precision precision = recipe.precision;
  if (recipe.operand_scaling != OperandScaling::none) {
    const float fp8_max = static_cast<float>(precision.matmul_forward.max_finite());
    precision.operand_scale = [fp8_max](std::string_view, float amax) -> float {
      return current_scale(amax, CurrentConfig{fp8_max});
    };
  }
  return precision;
}

// The formats and accumulation the recipe gives the matrix ops, as the run directory records them.
nlohmann::json precision_json(const nn::Precision& p) {
  nlohmann::json j = {
      {"matmul_forward", p.matmul_forward.name},
      {"matmul_backward", p.matmul_backward.name},
      {"accumulation", p.mma_architecture.empty() ? std::string(emu::to_string(p.accumulation)) : p.mma_architecture},
      {"promotion", p.promotion_interval}};
  if (p.block_scaling) {
    const nn::BlockScaling& b = *p.block_scaling;
    j["block_scaling"] = {{"accumulation", emu::to_string(b.accumulation)},
                          {"input", b.input.name},
                          {"weight", b.weight.name},
                          {"gradient", b.gradient.name},
                          {"scale_rule", emu::to_string(b.scale_rule)},
                          {"dy_rounding", b.gradient_rounding == formats::Rounding::stochastic ? "stochastic" : "rne"},
                          {"hadamard", b.wgrad_hadamard},
                          {"high_precision_layers", b.high_precision_layers}};
  }
  return j;
}

// Stochastic rounding is the emulator's: the ref backend is the FP32 reference (nothing is rounded into a
// low format there), and the gpu backend's CUDA kernels (its optimizers included) round to nearest even, so
// a gpu run would differ from its recipe silently.
void check_stochastic_rounding(const Recipe& recipe, nn::BackendKind backend, const std::string& text) {
  const nn::Precision& p = recipe.precision;
  const bool stochastic =
      p.grad_rounding == formats::Rounding::stochastic || p.update_rounding == formats::Rounding::stochastic;
  if (!stochastic || backend == nn::BackendKind::emu) return;
  std::string what = "--backend ";
  what += nn::to_string(backend);
  what += ": recipe " + text;
  what += " rounds stochastically (grad_rounding/update_rounding=stochastic), which only the emulator does ";
  what += backend == nn::BackendKind::gpu ? "(the CUDA kernels round to nearest even)"
                                          : "(the ref backend is the FP32 reference)";
  what += "; use --backend emu";
  bad_config(std::move(what));
}

std::size_t argmax_row(std::span<const float> row) {
  return static_cast<std::size_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace

// Shows every stored tensor to the recorders and to the config's extra observer.
class TeeObserver final : public nn::StoreObserver {
 public:
  TeeObserver(nn::StoreObserver* a, nn::StoreObserver* b) : a_(a), b_(b) {}
  void on_store(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass pass,
                std::span<const float> exact, std::span<const float> stored, const formats::Format& format) override {
    if (a_) a_->on_store(layer, tensor, role, pass, exact, stored, format);
    if (b_) b_->on_store(layer, tensor, role, pass, exact, stored, format);
  }
  void on_block_quantized(std::string_view layer, std::string_view operand, nn::Pass pass,
                          const emu::BlockScheme& scheme, const emu::BlockCounters& counters,
                          const emu::BlockStats& stats) override {
    if (a_) a_->on_block_quantized(layer, operand, pass, scheme, counters, stats);
    if (b_) b_->on_block_quantized(layer, operand, pass, scheme, counters, stats);
  }

 private:
  nn::StoreObserver *a_, *b_;
};

struct Trainer::Impl {
  std::unique_ptr<TeeObserver> tee;
  data::Split data;
  std::unique_ptr<data::BatchIterator> batches;
  std::unique_ptr<TextTask> text;  // the transformer's batches and held-out windows
  std::unique_ptr<nn::Backend> backend;
  std::unique_ptr<LossScaler> scaler;
  std::unique_ptr<nn::Context> ctx;
  emu::CounterSet counters;
  nn::TensorCounterSets tensor_counters;  // the matrix ops' counts per training tensor

  // Classifier (mlp, cnn) or the DCGAN pair.
  std::optional<nn::Sequential> model;
  std::optional<nn::Dcgan> gan;

  // The FP32 reference evaluated at the run's weights (--against ref).
  std::optional<nn::Sequential> reference;
  nn::RefBackend ref_backend;
  nn::Precision ref_precision;

  // fp8 delayed scaling: one history per operand site and pass.
  std::map<std::string, std::unique_ptr<AmaxScaler>, std::less<>> operand_scalers;

  // Lost-update totals of the step, over all parameters.
  record::LostUpdateCounts lost_master, lost_without_master;

  // --data-parallel: what the gradients' all-reduces did over the run.
  collective::AllreduceCounters all_reduce_counters;
};

Trainer::Trainer(TrainConfig config)
    : config_(std::move(config)), recipe_(parse_recipe(config_.recipe)), impl_(std::make_unique<Impl>()),
      recorder_(formats::parse_format(config_.study_format)) {
  check_settings();
  make_scaler_and_backend();
  install_operand_scaling();
  make_context();
  load_data();
  make_models();
  check_model_options();
}

// The transformer and its text go together.
void Trainer::check_text_settings() const {
  const bool transformer = config_.model == "transformer", text = config_.data == "kjv";
  if (transformer && !text)
    bad_config("--model transformer is a character-level language model: train it on --data kjv (the King James "
               "verses of Debian's bible-kjv-text)");
  if (text && !transformer) bad_config("--data kjv is text: --model transformer reads it");
  if (transformer && config_.context_length < 1) bad_config("--context-length must be at least 1");
  if (transformer && config_.input_scale != 1.0)
    bad_config("input_scale: only the classifiers (mlp, cnn) scale their input images");
  if (transformer && config_.backend == nn::BackendKind::gpu && !config_.backend_factory)
    bad_config("--backend gpu: the gpu backend has no layer norm, softmax or GELU kernel yet, so it cannot run the "
               "transformer; use --backend emu or ref");
  if (transformer && config_.against_reference)
    bad_config("--against ref compares the image classifiers' gradients; it is not available for the transformer");
}

// The settings that need nothing built (std::invalid_argument names the bad one).
void Trainer::check_settings() const {
  if (config_.data != "synthetic" && config_.data != "mnist" && config_.data != "sklearn-digits" &&
      config_.data != "kjv")
    bad_config("--data " + config_.data + ": the data sets are synthetic, mnist, sklearn-digits and kjv");
  if (config_.model != "mlp" && config_.model != "cnn" && config_.model != "dcgan" && config_.model != "transformer")
    bad_config("--model " + config_.model + ": the models are mlp, cnn, dcgan and transformer");
  check_text_settings();
  if (config_.samples > 0 && config_.model != "dcgan")
    bad_config("--samples: only the dcgan run generates images (the classifiers are evaluated on the test split)");
  if (config_.batch_size < 2) bad_config("--batch-size must be at least 2 (batch norm needs two examples)");
  if (config_.steps == 0) bad_config("--steps must be at least 1");
  if (config_.data != "synthetic" && config_.image_size != 28)
    bad_config("--image-size " + std::to_string(config_.image_size) + ": only the synthetic data can change its size");
  if (!(config_.input_scale > 0 && std::isfinite(static_cast<float>(config_.input_scale))))
    bad_config("input_scale must be a number > 0 that fits in fp32 (1 leaves the images as they are)");
  if (config_.input_scale != 1.0 && config_.model == "dcgan")
    bad_config("input_scale: only the classifiers (mlp, cnn) scale their input images");
  check_data_parallel_settings();
  if (recipe_.precision.block_scaling && config_.model == "dcgan")
    bad_config("--recipe " + config_.recipe + ": the block-scaled recipes run the linear and convolution layers of "
               "mlp and cnn; dcgan's transposed convolutions have no block-scaled form yet");
}

void Trainer::check_data_parallel_settings() const {
  if (!config_.data_parallel.on()) return;
  if (config_.model != "mlp" && config_.model != "cnn")
    bad_config("--data-parallel: the image classifiers (mlp, cnn) train data-parallel; " + config_.model +
               " does not yet");
  if (config_.recorders)
    bad_config("--data-parallel: the recorders keep no per-shard records yet; add --no-recorders");
  if (config_.against_reference) bad_config("--data-parallel: --against ref compares one batch, not shards");
  // The CNN's batch norm needs two examples per shard.
  check_data_parallel(config_.data_parallel, config_.batch_size, config_.model == "cnn" ? 2 : 1);
}

void Trainer::make_scaler_and_backend() {
  Impl& m = *impl_;
  // The loss scaler: found_inf-driven only; the amax-driven ones scale fp8 operands.
  {
    std::unique_ptr<Scaler> s = make_scaler(config_.scaler, config_.scaler_options);
    if (s->drive() != Drive::found_inf)
      bad_config("--scaler " + config_.scaler +
                 " scales FP8 operands from their amax, not the loss; use it through the recipe "
                 "(--recipe fp8:fp8_scaling=delayed) and pick a loss scaler (none, static, torch, ...)");
    m.scaler.reset(static_cast<LossScaler*>(s.release()));
  }
  m.backend = config_.backend_factory ? config_.backend_factory() : nn::make_backend(config_.backend);
  check_stochastic_rounding(recipe_, m.backend->kind(), config_.recipe);
  if (recipe_.precision.block_scaling && m.backend->kind() != nn::BackendKind::emu)
    bad_config("--backend " + std::string(nn::to_string(m.backend->kind())) + ": recipe " + config_.recipe +
               " runs block-scaled GEMMs, which only the emulator has; use --backend emu");
  // (The fp8 operand scaling is installed below, so is_fp32() cannot see it yet.)
  if (config_.backend == nn::BackendKind::ref &&
      (!recipe_.precision.is_fp32() || recipe_.operand_scaling != OperandScaling::none))
    bad_config("--backend ref runs the fp32 recipe only (it is the Eigen FP32 reference); use --backend emu for "
               "recipe " + config_.recipe);
}

void Trainer::install_operand_scaling() {
  // Operand scaling (fp8): E4M3's range forward and for the weights and activations backward, E5M2's
  // for the gradients.
  if (recipe_.operand_scaling != OperandScaling::none) {
    const formats::Format forward = recipe_.precision.matmul_forward, backward = recipe_.precision.matmul_backward;
    recipe_.precision.operand_scale = [this, forward, backward](std::string_view site, float amax) -> float {
      const bool is_forward = impl_->ctx->pass() == nn::Pass::forward;
      // Backward, only the gradient (the ".dy" operands) is in matmul_backward's format (E5M2); a weight
      // or an activation keeps matmul_forward's (E4M3), as in Transformer Engine's HYBRID format.
      const bool is_gradient = !is_forward && site.ends_with(".dy");
      const float fp8_max = static_cast<float>((is_gradient ? backward : forward).max_finite());
      if (recipe_.operand_scaling == OperandScaling::current) return current_scale(amax, CurrentConfig{fp8_max});
      std::string key(site);
      key += is_forward ? "@forward" : "@backward";
      auto it = impl_->operand_scalers.find(key);
      if (it == impl_->operand_scalers.end()) {
        DelayedConfig c;
        c.fp8_max = fp8_max;
        it = impl_->operand_scalers.emplace(key, std::make_unique<DelayedScaler>(c)).first;
      }
      return static_cast<float>(it->second->step(amax).scale_used);
    };
  }
}

// The context the layers run in: the backend, the recipe's precision, the recorders.
void Trainer::make_context() {
  Impl& m = *impl_;
  m.ctx = std::make_unique<nn::Context>(*m.backend, recipe_.precision);
  m.ctx->set_rounding_seed(config_.seed);
  m.tee = std::make_unique<TeeObserver>(config_.recorders ? &recorder_ : nullptr, config_.extra_observer);
  if (config_.recorders || config_.extra_observer) m.ctx->set_observer(m.tee.get());
  if (config_.recorders) m.ctx->set_counters(&m.counters);
  if (config_.recorders) m.ctx->set_tensor_counters(&m.tensor_counters);
}

// The data set (its train and test sets cut to the configured sizes) and the batches.
void Trainer::load_data() {
  Impl& m = *impl_;
  if (config_.data == "kjv") {
    data::CharText text = config_.text_for_tests ? data::char_text_from_string(*config_.text_for_tests, "test text")
                                                 : data::load_kjv_char_text(config_.data_dir);
    m.text = std::make_unique<TextTask>(std::move(text), config_.batch_size, config_.context_length,
                                        config_.test_size, config_.seed);
    return;
  }
  if (config_.data == "synthetic") {
    data::SyntheticOptions so;
    so.seed = config_.seed;
    so.train_size = config_.train_size;
    so.test_size = config_.model == "dcgan" ? 0 : config_.test_size;  // (the classifiers' held-out set)
    so.image_size = config_.image_size;
    m.data = data::synthetic_digits(so);
  } else {
    m.data = config_.data == "mnist" ? data::mnist_split(config_.data_dir)
                                     : data::sklearn_digits_split(config_.data_dir);
    // The split's sets are in a seeded order, so a prefix is a random sample.
    for (auto [set, keep] : {std::pair{&m.data.train, config_.train_size}, std::pair{&m.data.test, config_.test_size}}) {
      if (set->size() <= keep) continue;
      set->labels.resize(keep);
      set->images.resize(keep * set->image_size());
    }
  }
  data::BatchOptions bo;
  bo.batch_size = config_.batch_size;
  bo.seed = config_.seed;
  m.batches = std::make_unique<data::BatchIterator>(m.data.train, bo);
}

namespace {

// BlockScaling::high_precision_last as names: the model's last that-many matrix layers (Linear, Conv2d, nested
// ones included, in model order).
void keep_last_layers_high(const nn::Sequential& model, nn::BlockScaling& b) {
  const std::vector<std::string> matrix_layers = nn::matrix_layer_names(model);
  const std::size_t keep = std::min(matrix_layers.size(), static_cast<std::size_t>(b.high_precision_last));
  b.high_precision_layers.assign(matrix_layers.end() - static_cast<std::ptrdiff_t>(keep), matrix_layers.end());
}

}  // namespace

void Trainer::make_models() {
  Impl& m = *impl_;
  const data::Dataset& d = m.data.train;
  // The reference (--against ref) is a second copy of the same classifier, from the same seed.
  auto classifier = [&] {
    return config_.model == "mlp" ? nn::make_mlp(d.channels, d.height, d.width, d.classes, config_.seed)
                                  : nn::make_cnn(d.channels, d.height, d.width, d.classes, config_.seed);
  };
  if (config_.model == "transformer")
    m.model.emplace(nn::make_transformer(data::kCharVocab, static_cast<int>(config_.context_length), config_.seed));
  else if (config_.model == "mlp" || config_.model == "cnn") m.model.emplace(classifier());
  else m.gan.emplace(nn::make_dcgan(d.height, nn::kDcganLatent, config_.seed));

  if (config_.against_reference) {
    if (m.gan) bad_config("--against ref compares classifier gradients; it is not available for dcgan yet");
    m.reference.emplace(classifier());
  }
  if (m.model && recipe_.precision.block_scaling) keep_last_layers_high(*m.model, *recipe_.precision.block_scaling);
}

// The options that name a part of the model (or need one kind of model).
void Trainer::check_model_options() {
  Impl& m = *impl_;
  if (config_.inject) {
    bool found = false;
    for (nn::Parameter* p : parameters()) found = found || p->name == config_.inject->parameter;
    if (!found) {
      std::string names;
      for (nn::Parameter* p : parameters()) names += (names.empty() ? "" : ", ") + p->name;
      bad_config("--inject-inf: no parameter '" + config_.inject->parameter + "'; the model's are " + names);
    }
  }
  if (config_.final_evaluation) {
    if (!m.gan)
      bad_config("--extractor: the FID evaluation is for dcgan runs (the classifiers are evaluated on the test split)");
    if (config_.final_evaluation->check) config_.final_evaluation->check(*this);
  }
}

Trainer::~Trainer() = default;

void Trainer::scale_inputs(std::span<float> images) const {
  if (config_.input_scale == 1.0) return;
  const auto k = static_cast<float>(config_.input_scale);
  for (float& v : images) v *= k;
}

nn::Sequential& Trainer::classifier() {
  if (!impl_->model) throw std::logic_error("Trainer::classifier: the dcgan run has no classifier");
  return *impl_->model;
}

nn::Dcgan& Trainer::dcgan() {
  if (!impl_->gan) throw std::logic_error("Trainer::dcgan: a classifier run has no DCGAN");
  return *impl_->gan;
}

const data::Split& Trainer::data() const { return impl_->data; }

nlohmann::json Evaluation::to_json() const {
  const bool has_accuracy = !diverged && test_size > 0;
  return {{"test_accuracy", has_accuracy ? nlohmann::json(static_cast<double>(correct) / static_cast<double>(test_size))
                                         : nlohmann::json(nullptr)},
          {"test_loss", record::number_or_null(test_loss)},
          {"test_size", test_size},
          {"correct", correct},
          {"diverged", diverged},
          {"reason", reason}};
}

Evaluation Trainer::evaluate() {
  Impl& m = *impl_;
  nn::Sequential& model = classifier();
  const data::Dataset& test = m.data.test;
  Evaluation e;
  e.test_size = m.text ? m.text->test_window_count() * m.text->context() : test.size();
  if (aborted_) {
    e.diverged = true;
    e.reason = "the run aborted";
  }
  for (nn::Parameter* p : model.parameters()) {
    if (e.diverged) break;
    for (float v : p->master)
      if (!std::isfinite(v)) {
        e.diverged = true;
        e.reason = "parameter " + p->name + " is not finite";
        break;
      }
  }
  if (e.test_size == 0 || e.diverged) {
    e.test_loss = std::nan("");
    return e;
  }
  const nn::Precision precision = evaluation_precision(recipe_);
  nn::Context ctx(*m.backend, precision);  // no observer, no counters
  ctx.set_pass(nn::Pass::forward);
  model.cast_weights(precision);
  model.set_training(false);
  double loss_sum = 0;
  if (m.text) {
    // Whole windows, about kEvaluationChunk tokens at a time.
    data::CharEvalWindows windows = m.text->test_windows(std::max<std::size_t>(1, kEvaluationChunk / m.text->context()));
    while (windows.has_next()) {
      TokenBatch t = token_batch(windows.next());
      evaluate_chunk(model, ctx, t.x, t.labels, e, loss_sum);
    }
  }
  for (std::size_t first = 0; !m.text && first < test.size(); first += kEvaluationChunk) {
    const std::size_t count = std::min(kEvaluationChunk, test.size() - first);
    nn::Tensor x(static_cast<int>(count), test.channels, test.height, test.width);
    const auto images = std::span<const float>(test.images).subspan(first * test.image_size(), count * test.image_size());
    std::copy(images.begin(), images.end(), x.values.begin());
    scale_inputs(x.values);
    evaluate_chunk(model, ctx, x, std::span<const std::int32_t>(test.labels).subspan(first, count), e, loss_sum);
  }
  model.set_training(true);
  e.test_loss = loss_sum / static_cast<double>(e.test_size);
  return e;
}

// One chunk of the held-out set through the model: its loss (summed, weighted by its size) and correct rows.
void Trainer::evaluate_chunk(nn::Sequential& model, nn::Context& ctx, nn::Tensor& x,
                             std::span<const std::int32_t> labels, Evaluation& e, double& loss_sum) {
  const nn::Tensor logits = model.forward(ctx, x);
  for (float v : logits.values)
    if (!std::isfinite(v) && !e.diverged) {
      e.diverged = true;
      e.reason = "a test logit is not finite";
    }
  const ops::SoftmaxCrossEntropyShape shape{logits.n, logits.c};
  const emu::LossPolicy loss_policy = nn::loss_policy(ctx.precision());
  loss_sum += static_cast<double>(impl_->backend->softmax_cross_entropy(shape, logits.span(), labels, loss_policy,
                                                                        nullptr)) *
              static_cast<double>(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i)
    e.correct += static_cast<std::int32_t>(argmax_row(std::span<const float>(logits.values).subspan(
                     i * static_cast<std::size_t>(logits.c), static_cast<std::size_t>(logits.c)))) == labels[i];
}

std::vector<float> Trainer::generate(std::size_t n, std::uint64_t seed) {
  Impl& m = *impl_;
  if (!m.gan) throw std::logic_error("Trainer::generate: only the dcgan run has a generator");
  nn::Sequential& g = m.gan->generator;
  const nn::Precision precision = evaluation_precision(recipe_);
  nn::Context ctx(*m.backend, precision);
  ctx.set_pass(nn::Pass::forward);
  g.cast_weights(precision);
  g.set_training(false);
  const auto latent = static_cast<std::size_t>(m.gan->latent);
  data::Draws draws(seed, kSampleStream);
  std::vector<float> images;
  for (std::size_t first = 0; first < n; first += kEvaluationChunk) {
    const std::size_t count = std::min(kEvaluationChunk, n - first);
    nn::Tensor z(static_cast<int>(count), static_cast<int>(latent));
    for (float& v : z.values) v = static_cast<float>(draws.noise());
    const nn::Tensor out = g.forward(ctx, z);
    for (float v : out.values) images.push_back((v + 1.0f) / 2.0f);
  }
  g.set_training(true);
  return images;
}

std::vector<nn::Parameter*> Trainer::parameters() {
  if (!impl_->gan) return impl_->model->parameters();
  std::vector<nn::Parameter*> all = impl_->gan->generator.parameters();
  for (nn::Parameter* p : impl_->gan->discriminator.parameters()) all.push_back(p);
  return all;
}

// Unscale, found_inf, scaler, optimizer for one set of parameters: the
// scaler's verdict and the found_inf flag.
struct Trainer::UpdateResult {
  StepResult scaler;
  bool found_inf = false;
};

nlohmann::json Trainer::step() {
  if (aborted_) throw std::logic_error("Trainer::step: the run aborted (the scaler stopped it)");
  Impl& m = *impl_;
  const std::size_t step = step_;
  const bool keep = config_.recorders && config_.record_every != 0 && step % config_.record_every == 0;
  recorder_.begin_step(step, keep, config_.histograms);
  m.lost_master = {};
  m.lost_without_master = {};
  m.ctx->reset_step();
  m.ctx->set_step(step);
  nlohmann::json log = {{"step", step}};
  if (!m.gan)
    classifier_step(log);
  else
    dcgan_step(log);
  log_step_rates(log);
  ++step_;
  return log;
}

// Unscale, check, step the scaler, update: shared by the classifier and both GAN players.
Trainer::UpdateResult Trainer::update(const std::vector<nn::Parameter*>& params) {
  Impl& m = *impl_;
  UpdateResult r;
  const double scale = m.scaler->scale();
  inject_fault(params);
  for (nn::Parameter* p : params) r.found_inf = unscale_gradient(config_.scaler, scale, p->grad) != 0 || r.found_inf;
  r.scaler = m.scaler->step(r.found_inf);
  if (r.scaler.skipped || r.scaler.aborted) return r;
  m.ctx->set_pass(nn::Pass::optimizer);
  for (nn::Parameter* p : params) update_parameter(*p);
  return r;
}

// --inject: an infinite gradient element at the configured step and parameter.
void Trainer::inject_fault(const std::vector<nn::Parameter*>& params) {
  if (!config_.inject || config_.inject->step != step_) return;
  nn::Context& ctx = *impl_->ctx;
  for (nn::Parameter* p : params) {
    if (p->name != config_.inject->parameter) continue;
    p->grad[0] = std::numeric_limits<float>::infinity();
    ctx.set_pass(nn::Pass::backward);
    ctx.note_nonfinite(p->name, "grad (injected)", 1);
  }
}

// The optimizer's update of one parameter (its unscaled fp32 gradient), recorded.
void Trainer::update_parameter(nn::Parameter& p) {
  Impl& m = *impl_;
  nn::Context& ctx = *m.ctx;
  const bool norm = p.kind == nn::ParameterKind::norm;
  emu::OptimizerPolicy policy;
  policy.weights = norm ? recipe_.precision.norm_parameters : recipe_.precision.master;
  policy.state = recipe_.optimizer_state;
  policy.grad = nn::Precision::fp32();  // the unscaled fp32 gradient
  // update_rounding=stochastic applies where the update is written into a low format (no master copy):
  // an fp32 write is the master copy's, which exists so that updates need no such help.
  if (recipe_.precision.update_rounding == formats::Rounding::stochastic &&
      !formats::same_encoding(policy.weights, nn::Precision::fp32())) {
    policy.update_rounding = formats::Rounding::stochastic;
    policy.update_key = emu::rounding_key(config_.seed, p.name + ".update", step_);
    policy.decay_key = emu::rounding_key(config_.seed, p.name + ".decay", step_);
  }
  std::vector<float> before;  // the weights before the update, for the lost-update counts
  if (config_.recorders) before = p.master;
  std::vector<float> u(p.size());
  p.steps += 1;
  if (config_.optimizer == OptimizerKind::sgd) {
    if (p.state_m.size() != p.size() && config_.sgd.momentum != 0) p.state_m.assign(p.size(), 0.0f);
    m.backend->sgd_step(config_.sgd, p.steps, p.master, p.state_m, p.grad, policy, ctx.counters(), u);
  } else {
    if (p.state_m.size() != p.size()) p.state_m.assign(p.size(), 0.0f);
    if (p.state_v.size() != p.size()) p.state_v.assign(p.size(), 0.0f);
    m.backend->adam_step(config_.adam, p.steps, p.master, p.state_m, p.state_v, p.grad, policy,
                         ctx.counters(), u);
  }
  if (config_.recorders) record_update(p, before, u, policy.weights);
  if (config_.extra_observer) {
    config_.extra_observer->on_store(p.name, "update", nn::Role::update, nn::Pass::optimizer, u, u, policy.weights);
  }
}

// Lost updates: in the format the optimizer writes, and as if the weights had
// no master copy (stored in the working weight format).
void Trainer::record_update(const nn::Parameter& p, const std::vector<float>& before, const std::vector<float>& u,
                            const formats::Format& written) {
  Impl& m = *impl_;
  const bool norm = p.kind == nn::ParameterKind::norm;
  const formats::Format& working = norm ? recipe_.precision.norm_parameters : recipe_.precision.weights;
  // The optimizer rounds w to its format before it adds (sgd_step_emu),
  // so measure against the rounded w: fp16-pure's initial fp32 weights
  // are not fp16 values at step 0, and no update to them looked lost.
  const record::LostUpdateCounts with =
      record::lost_update_counts(emu::quantized_copy(before, written), u, written);
  const record::LostUpdateCounts without =
      record::lost_update_counts(emu::quantized_copy(before, working), u, working);
  for (auto [total, part] : {std::pair{&m.lost_master, &with}, std::pair{&m.lost_without_master, &without}}) {
    total->elements += part->elements;
    total->updates += part->updates;
    total->lost += part->lost;
    total->ratio_needed += part->ratio_needed;
    total->ratio_sufficient += part->ratio_sufficient;
  }
  recorder_.record(p.name, "update", nn::Role::update, nn::Pass::optimizer, u, written);
}

// The classifier's weights cast to the recipe's formats, shown to the recorders.
void Trainer::cast_and_record_weights() {
  Impl& m = *impl_;
  m.model->cast_weights(recipe_.precision);
  for (nn::Parameter* p : m.model->parameters()) {
    const formats::Format& f =
        p->kind == nn::ParameterKind::norm ? recipe_.precision.norm_parameters : recipe_.precision.weights;
    if (config_.recorders) recorder_.record(p->name, "value", nn::Role::weight, nn::Pass::forward, p->master, f);
    if (config_.extra_observer)
      config_.extra_observer->on_store(p->name, "value", nn::Role::weight, nn::Pass::forward, p->master, p->value, f);
  }
}

void Trainer::classifier_step(nlohmann::json& log) {
  Impl& m = *impl_;
  if (m.text) {
    TokenBatch t = m.text->next();
    classifier_step_on(t.x, t.labels, nullptr, log);
    return;
  }
  const data::Batch batch = m.batches->next();
  const data::Dataset& d = m.data.train;
  nn::Tensor x(static_cast<int>(batch.size()), d.channels, d.height, d.width);
  std::copy(batch.images.begin(), batch.images.end(), x.values.begin());
  scale_inputs(x.values);
  classifier_step_on(x, batch.labels, &batch, log);
}

// One step on a batch: x and its labels (the transformer: one label per token); `batch` is the image batch,
// for the reference (--against ref), or null.
std::pair<float, std::size_t> Trainer::forward_backward(const nn::Tensor& x, std::span<const std::int32_t> labels,
                                                      double scale, ops::SoftmaxCrossEntropyShape& shape) {
  Impl& m = *impl_;
  nn::Context& ctx = *m.ctx;
  ctx.set_pass(nn::Pass::forward);
  nn::Tensor logits = m.model->forward(ctx, x);
  shape = {logits.n, logits.c};
  const float loss =
      m.backend->softmax_cross_entropy(shape, logits.span(), labels, nn::loss_policy(recipe_.precision),
                                       ctx.counters());
  if (!std::isfinite(loss)) ctx.note_nonfinite("loss", "loss", 1);
  std::size_t correct = 0;
  for (int i = 0; i < logits.n; ++i)
    correct += static_cast<std::int32_t>(argmax_row(std::span<const float>(logits.values).subspan(
                   static_cast<std::size_t>(i) * logits.c, static_cast<std::size_t>(logits.c)))) == labels[i];

  ctx.set_pass(nn::Pass::backward);
  nn::Tensor dlogits(logits.n, logits.c);
  m.backend->softmax_cross_entropy_backward(shape, logits.span(), labels, dlogits.span(),
                                            nn::loss_policy(recipe_.precision), ctx.counters());
  const float s32 = static_cast<float>(scale);
  for (float& v : dlogits.values) v = v * s32;
  ctx.store("loss", "dlogits", nn::Role::activation_grad, dlogits.span());
  m.model->backward(ctx, dlogits, false);
  return {loss, correct};
}

// Data-parallel (training/data_parallel.h): shard r is examples r B ... r B + B - 1; each shard's forward and
// backward leave its (scaled) gradients in the parameters, which go into row r; the rows' all-reduce is
// written back as the step's gradients. The loss is the shards' mean loss.
std::pair<float, std::size_t> Trainer::shards_forward_backward(const nn::Tensor& x,
                                                             std::span<const std::int32_t> labels, double scale) {
  Impl& m = *impl_;
  const std::size_t ranks = config_.data_parallel.ranks, shard = labels.size() / ranks;
  const std::vector<nn::Parameter*> params = m.model->parameters();
  std::size_t n = 0;
  for (const nn::Parameter* p : params) n += p->size();
  std::vector<float> rows(ranks * n);
  double loss_sum = 0;
  std::size_t correct = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    nn::Tensor part(static_cast<int>(shard), x.c, x.h, x.w);
    const auto first = x.values.begin() + static_cast<std::ptrdiff_t>(r * shard * x.example_size());
    std::copy(first, first + static_cast<std::ptrdiff_t>(part.size()), part.values.begin());
    ops::SoftmaxCrossEntropyShape shape;
    const auto [loss, right] = forward_backward(part, labels.subspan(r * shard, shard), scale, shape);
    loss_sum += loss;
    correct += right;
    float* row = rows.data() + r * n;
    for (const nn::Parameter* p : params) row = std::copy(p->grad.begin(), p->grad.end(), row);
  }
  const std::vector<float> reduced =
      reduce_gradients({rows, ranks, n}, config_.data_parallel, m.all_reduce_counters);
  const float* from = reduced.data();
  for (nn::Parameter* p : params) {
    std::copy(from, from + p->size(), p->grad.begin());
    from += p->size();
  }
  return {static_cast<float>(loss_sum / static_cast<double>(ranks)), correct};
}

void Trainer::classifier_step_on(nn::Tensor& x, std::span<const std::int32_t> labels, const data::Batch* batch,
                                 nlohmann::json& log) {
  Impl& m = *impl_;
  nn::Context& ctx = *m.ctx;
  const double scale = m.scaler->scale();
  ctx.set_loss_scale(scale);
  cast_and_record_weights();
  ops::SoftmaxCrossEntropyShape shape{};
  const auto [loss, correct] = config_.data_parallel.on() ? shards_forward_backward(x, labels, scale)
                                                          : forward_backward(x, labels, scale, shape);

  nlohmann::json reference;
  if (m.reference) reference = reference_step(x, *batch, shape, loss);
  const UpdateResult r = update(m.model->parameters());
  // (the reference comparison reads the unscaled gradients, so it follows the update's unscale)
  if (m.reference) compare_with_reference(reference);
  log["loss"] = record::number_or_null(loss);
  log["accuracy"] = static_cast<double>(correct) / static_cast<double>(labels.size());
  log["scale"] = r.scaler.scale_used;
  log["skipped"] = r.scaler.skipped;
  log["found_inf"] = r.found_inf;
  log["aborted"] = r.scaler.aborted;
  if (m.reference) log["reference"] = reference;
  skipped_ += r.scaler.skipped;
  aborted_ = r.scaler.aborted;
  last_loss_ = loss;
}

// The FP32 reference at the same weights, on the same batch, unscaled: its
// loss against the run's, and an empty "layers" that compare_with_reference fills.
nlohmann::json Trainer::reference_step(const nn::Tensor& x, const data::Batch& batch,
                                      const ops::SoftmaxCrossEntropyShape& shape, float loss) {
  Impl& m = *impl_;
  nn::Context rctx(m.ref_backend, m.ref_precision);
  const std::vector<nn::Parameter*> run = m.model->parameters(), ref = m.reference->parameters();
  for (std::size_t i = 0; i < run.size(); ++i) ref[i]->master = run[i]->master;
  m.reference->cast_weights(m.ref_precision);
  rctx.set_pass(nn::Pass::forward);
  nn::Tensor rlogits = m.reference->forward(rctx, x);
  const float rloss = m.ref_backend.softmax_cross_entropy(shape, rlogits.span(), batch.labels,
                                                          nn::loss_policy(m.ref_precision), nullptr);
  rctx.set_pass(nn::Pass::backward);
  nn::Tensor rd(rlogits.n, rlogits.c);
  m.ref_backend.softmax_cross_entropy_backward(shape, rlogits.span(), batch.labels, rd.span(),
                                               nn::loss_policy(m.ref_precision), nullptr);
  m.reference->backward(rctx, rd, false);
  nlohmann::json reference = {{"loss", rloss}, {"loss_difference", record::number_or_null(static_cast<double>(loss) - rloss)}};
  reference["layers"] = nlohmann::json::array();
  return reference;
}

// Each parameter's (unscaled) gradient against the reference's: cosine and relative error.
void Trainer::compare_with_reference(nlohmann::json& reference) {
  Impl& m = *impl_;
  std::vector<nn::Parameter*> run = m.model->parameters(), ref = m.reference->parameters();
  for (std::size_t i = 0; i < run.size(); ++i)
    reference["layers"].push_back({{"parameter", run[i]->name},
                                   {"cosine", record::number_or_null(cosine(ref[i]->grad, run[i]->grad))},
                                   {"relative_error", record::number_or_null(relative_error(ref[i]->grad, run[i]->grad))}});
}

// The discriminator's step, then the generator's through the updated discriminator.
void Trainer::dcgan_step(nlohmann::json& log) {
  Impl& m = *impl_;
  nn::Dcgan& gan = *m.gan;
  const data::Batch batch = m.batches->next();
  const data::Dataset& d = m.data.train;
  const int n = static_cast<int>(batch.size());
  // The latent codes of this step: bell-shaped noise from a stream of its own.
  nn::Tensor z(n, gan.latent);
  data::Draws draws(config_.seed, (std::uint64_t{0x6A7} << 48) + step_);
  for (float& v : z.values) v = static_cast<float>(draws.noise());
  // Real images mapped from [0, 1] to the generator's [-1, 1], then the generated ones.
  nn::Tensor both(2 * n, d.channels, d.height, d.width);
  for (std::size_t i = 0; i < batch.images.size(); ++i) both.values[i] = 2.0f * batch.images[i] - 1.0f;

  float loss_d = 0;
  const UpdateResult rd = discriminator_step(z, both, loss_d);
  UpdateResult rg;
  float loss_g = std::nanf("");
  const double scale_g = m.scaler->scale();
  if (!rd.scaler.aborted) rg = generator_step(z, both, scale_g, loss_g);
  log["loss"] = record::number_or_null(loss_d);
  log["loss_d"] = record::number_or_null(loss_d);
  log["loss_g"] = record::number_or_null(loss_g);
  log["scale"] = rd.scaler.scale_used;
  log["scale_g"] = scale_g;
  log["skipped"] = rd.scaler.skipped || rg.scaler.skipped;
  log["skipped_d"] = rd.scaler.skipped;
  log["skipped_g"] = rg.scaler.skipped;
  log["found_inf"] = rd.found_inf || rg.found_inf;
  log["aborted"] = rd.scaler.aborted || rg.scaler.aborted;
  skipped_ += rd.scaler.skipped + rg.scaler.skipped;
  aborted_ = rd.scaler.aborted || rg.scaler.aborted;
  last_loss_ = loss_d;
}

// Discriminator: real (target 1) and generated (target 0) in one batch, `both`
// (its real half filled; the generated half written here). Sets loss_d.
Trainer::UpdateResult Trainer::discriminator_step(const nn::Tensor& z, nn::Tensor& both, float& loss_d) {
  Impl& m = *impl_;
  nn::Context& ctx = *m.ctx;
  nn::Dcgan& gan = *m.gan;
  const auto n = static_cast<std::size_t>(z.n);
  std::vector<float> targets(2 * n, 0.0f);
  std::fill(targets.begin(), targets.begin() + static_cast<std::ptrdiff_t>(n), 1.0f);
  const emu::LossPolicy loss_policy = nn::loss_policy(recipe_.precision);
  const double scale_d = m.scaler->scale();
  ctx.set_loss_scale(scale_d);
  gan.generator.cast_weights(recipe_.precision);
  gan.discriminator.cast_weights(recipe_.precision);
  ctx.set_pass(nn::Pass::forward);
  const nn::Tensor fake = gan.generator.forward(ctx, z);
  std::copy(fake.values.begin(), fake.values.end(), both.values.begin() + static_cast<std::ptrdiff_t>(fake.size()));
  nn::Tensor logits_d = gan.discriminator.forward(ctx, both);
  loss_d = m.backend->bce_with_logits(logits_d.span(), targets, loss_policy, ctx.counters());
  if (!std::isfinite(loss_d)) ctx.note_nonfinite("loss_d", "loss", 1);
  ctx.set_pass(nn::Pass::backward);
  nn::Tensor dlogits_d(logits_d.n, logits_d.c);
  m.backend->bce_with_logits_backward(logits_d.span(), targets, dlogits_d.span(), loss_policy, ctx.counters());
  for (float& v : dlogits_d.values) v = v * static_cast<float>(scale_d);
  ctx.store("loss_d", "dlogits", nn::Role::activation_grad, dlogits_d.span());
  gan.discriminator.backward(ctx, dlogits_d, false);
  return update(gan.discriminator.parameters());
}

// Generator: through the (updated) discriminator, target 1 on the
// generated half. The discriminator sees the batch it is trained on, the
// real batch and a generated one, so that its batch norm normalises the
// generated images with the statistics of its own step. Shown the
// generated images alone (batch norm over them only), it scored them as
// real whatever they were and the generator learned nothing: an fp32 run
// of 300 steps ended at loss_d 0.0004 and loss_g 0.065 with samples of
// uniform noise. The real half gets a zero logit gradient (it still
// shapes the generated half's gradient through batch norm's statistics).
// Sets loss_g.
Trainer::UpdateResult Trainer::generator_step(const nn::Tensor& z, nn::Tensor& both, double scale_g, float& loss_g) {
  Impl& m = *impl_;
  nn::Context& ctx = *m.ctx;
  nn::Dcgan& gan = *m.gan;
  const emu::LossPolicy loss_policy = nn::loss_policy(recipe_.precision);
  ctx.set_loss_scale(scale_g);
  gan.discriminator.cast_weights(recipe_.precision);
  ctx.set_pass(nn::Pass::forward);
  const nn::Tensor fake_g = gan.generator.forward(ctx, z);
  std::copy(fake_g.values.begin(), fake_g.values.end(),
            both.values.begin() + static_cast<std::ptrdiff_t>(fake_g.size()));
  nn::Tensor logits_g = gan.discriminator.forward(ctx, both);
  const auto half = static_cast<std::size_t>(z.n);
  const std::vector<float> ones(half, 1.0f);
  const std::span<const float> fake_logits = std::span<const float>(logits_g.values).subspan(half);
  loss_g = m.backend->bce_with_logits(fake_logits, ones, loss_policy, ctx.counters());
  if (!std::isfinite(loss_g)) ctx.note_nonfinite("loss_g", "loss", 1);
  ctx.set_pass(nn::Pass::backward);
  nn::Tensor dlogits_g(logits_g.n, logits_g.c);
  m.backend->bce_with_logits_backward(fake_logits, ones, dlogits_g.span().subspan(half), loss_policy,
                                      ctx.counters());
  for (float& v : dlogits_g.values) v = v * static_cast<float>(scale_g);
  ctx.store("loss_g", "dlogits", nn::Role::activation_grad, dlogits_g.span());
  const nn::Tensor dboth = gan.discriminator.backward(ctx, dlogits_g, true);
  nn::Tensor dfake(fake_g.n, fake_g.c, fake_g.h, fake_g.w);
  std::copy(dboth.values.begin() + static_cast<std::ptrdiff_t>(fake_g.size()), dboth.values.end(),
            dfake.values.begin());
  gan.generator.backward(ctx, dfake, false);
  return update(gan.generator.parameters());
}

// The recorders' rates of the step and the first non-finite value's origin.
void Trainer::log_step_rates(nlohmann::json& log) {
  Impl& m = *impl_;
  const RateCounts& g = recorder_.gradients();
  const RateCounts& a = recorder_.activations();
  auto rate = [](std::uint64_t n, std::uint64_t d) { return d ? static_cast<double>(n) / static_cast<double>(d) : 0.0; };
  log["underflow_rate"] = g.underflow_rate();
  log["subnormal_rate"] = g.subnormal_rate();
  log["overflow_rate"] = g.overflow_rate();
  log["activation_underflow_rate"] = a.underflow_rate();
  log["activation_overflow_rate"] = a.overflow_rate();
  // The rates above pool every format measured against; split them where the step measured several.
  if (recorder_.by_format().size() > 1) log["by_format"] = recorder_.by_format_json();
  if (const BlockRates& b = recorder_.blocks(); b.any()) {
    // Block-scaled recipes: every GEMM operand's quantization this step (blocks.jsonl has them one by one).
    log["block_saturation_rate"] = rate(b.saturated, b.elements);
    log["block_underflow_rate"] = rate(b.underflow_to_zero, b.nonzero);
    log["block_sqnr_db"] = record::number_or_null(b.stats.sqnr_db());
    log["block_sqnr_db_min"] = record::number_or_null(b.worst_sqnr_db);
  }
  log["lost_update_rate"] = rate(m.lost_master.lost, m.lost_master.updates);
  log["lost_update_rate_without_master"] = rate(m.lost_without_master.lost, m.lost_without_master.updates);
  // The two ratio bounds around lost_update_rate_without_master (emu/lost_update.h): the share of updates
  // with |w|/|u| >= 2^p (a lost update to a normal w needs it) and > 2^(p+1) (lost whatever w).
  log["lost_update_ratio_needed_rate_without_master"] =
      rate(m.lost_without_master.ratio_needed, m.lost_without_master.updates);
  log["lost_update_ratio_sufficient_rate_without_master"] =
      rate(m.lost_without_master.ratio_sufficient, m.lost_without_master.updates);
  if (const auto& origin = m.ctx->first_nonfinite())
    log["nonfinite"] = {{"layer", origin->layer},
                        {"tensor", origin->tensor},
                        {"pass", nn::to_string(origin->pass)},
                        {"count", origin->count}};
  else
    log["nonfinite"] = nullptr;
}

nlohmann::json Trainer::summary() const {
  nlohmann::json config = {{"model", config_.model},
                           {"data", config_.data},
                           {"data_dir", config_.data_dir.string()},
                           {"train_size", impl_->data.train.size()},
                           {"test_size", impl_->data.test.size()},
                           {"eval_every", config_.eval_every},
                           {"recipe", config_.recipe},
                           {"precision", precision_json(recipe_.precision)},
                           {"scaler", config_.scaler},
                           {"scaler_options", config_.scaler_options},
                           {"backend", nn::to_string(config_.backend)},
                           {"steps", config_.steps},
                           {"batch_size", config_.batch_size},
                           {"image_size", impl_->data.train.height},
                           {"seed", config_.seed},
                           {"optimizer", config_.optimizer == OptimizerKind::sgd ? "sgd" : "adam"},
                           {"study_format", config_.study_format},
                           {"recorders", config_.recorders},
                           {"record_every", config_.record_every}};
  if (config_.input_scale != 1.0) config["input_scale"] = config_.input_scale;
  if (config_.data_parallel.on()) config["data_parallel"] = data_parallel_json(config_.data_parallel);
  if (impl_->text) {
    // The transformer: sizes in tokens (the train part's, and the held-out windows' predictions).
    config["train_size"] = impl_->text->train_tokens();
    config["test_size"] = impl_->text->test_window_count() * impl_->text->context();
    config["context_length"] = config_.context_length;
    config.erase("image_size");
  }
  if (config_.optimizer == OptimizerKind::sgd)
    config["sgd"] = {{"lr", config_.sgd.lr}, {"momentum", config_.sgd.momentum},
                     {"weight_decay", config_.sgd.weight_decay}, {"nesterov", config_.sgd.nesterov}};
  else
    config["adam"] = {{"lr", config_.adam.lr}, {"beta1", config_.adam.beta1}, {"beta2", config_.adam.beta2},
                      {"eps", config_.adam.eps}, {"weight_decay", config_.adam.weight_decay},
                      {"adamw", config_.adam.adamw}};
  nlohmann::json tensor_counters = nlohmann::json::object();
  for (const auto& [tensor, set] : impl_->tensor_counters) tensor_counters[tensor] = counters_json(set);
  nlohmann::json summary = {{"config", config},
                             {"steps", step_},
                             {"skipped_steps", skipped_},
                             {"aborted", aborted_},
                             {"final_loss", record::number_or_null(last_loss_)},
                             {"final_scale", impl_->scaler->scale()},
                             {"thresholds", recorder_.thresholds()},
                             {"counters", counters_json(impl_->counters)},
                             {"tensor_counters", tensor_counters}};
  if (config_.data_parallel.on()) summary["all_reduce"] = all_reduce_counters_json(impl_->all_reduce_counters);
  return summary;
}

void run_training(const TrainConfig& config, const std::filesystem::path& out,
                  const std::function<void(const nlohmann::json& step)>& progress) {
  Trainer trainer(config);  // validates everything before a file is written
  record::RunLog steps(out, 1, "steps.jsonl");
  record::RunLog tensors(out, 10, "tensors.jsonl");
  record::RunLog histograms(out, 10, "histograms.jsonl");
  std::optional<record::RunLog> blocks;  // block-scaled recipes only
  if (parse_recipe(config.recipe).precision.block_scaling) blocks.emplace(out, 10, "blocks.jsonl");
  const bool classifier = config.model != "dcgan";
  for (std::size_t i = 0; i < config.steps && !trainer.aborted(); ++i) {
    nlohmann::json line = trainer.step();
    if (classifier && config.eval_every != 0 && (i + 1) % config.eval_every == 0)
      line["evaluation"] = trainer.evaluate().to_json();
    for (const std::string& t : trainer.take_tensor_lines()) tensors.append_text(t);
    for (const std::string& h : trainer.take_histogram_lines()) histograms.append_text(h);
    for (nlohmann::json& b : trainer.take_block_lines())
      if (blocks) blocks->append(b);
    steps.append(line);
    if (progress) progress(line);
  }
  tensors.flush();
  histograms.flush();
  if (blocks) blocks->flush();
  steps.flush();
  nlohmann::json summary = trainer.summary();
  if (classifier) summary["evaluation"] = trainer.evaluate().to_json();
  if (!classifier && config.samples > 0) {
    const std::uint64_t seed = config.samples_seed.value_or(config.seed);
    const std::vector<float> images = trainer.generate(config.samples, seed);
    const auto side = static_cast<std::size_t>(trainer.data().train.height);
    io::write_npy(out / "samples.npy", images, {config.samples, 1, side, side});
    summary["samples"] = {{"file", "samples.npy"}, {"n", config.samples}, {"seed", seed},
                          {"shape", {config.samples, 1, side, side}}, {"range", {0, 1}}};
  }
  if (config.final_evaluation) summary["evaluation"] = config.final_evaluation->run(trainer);
  steps.write_summary(summary);
}

}  // namespace mpverify::training
