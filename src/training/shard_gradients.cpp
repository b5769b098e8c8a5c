#include "training/shard_gradients.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "data/batches.h"
#include "data/char_text.h"
#include "nn/context.h"
#include "nn/policies.h"
#include "nn/precision.h"
#include "nn/ref_backend.h"
#include "training/text_task.h"
#include "training/trainer.h"

namespace mpverify::training {

namespace {

constexpr std::size_t kMaxRanks = std::size_t{1} << 20;
constexpr std::size_t kDefaultTrainSize = 8000;  // TrainConfig's

// One training step's inputs: x (all N B examples, or N B windows of tokens) and one label per row of logits.
struct StepInputs {
  nn::Tensor x;
  std::vector<std::int32_t> labels;
  std::size_t rows_per_example = 1;  // logits rows per example: 1, or the context length (transformer)
};

void check_options(const ShardGradientOptions& o) {
  auto bad = [](const std::string& why) { throw std::invalid_argument(why); };
  if (o.model != "cnn" && o.model != "mlp" && o.model != "transformer")
    bad("model '" + o.model + "': expected cnn, mlp or transformer");
  const bool text = o.model == "transformer";
  if (text && o.data != "kjv") bad("data '" + o.data + "': the transformer trains on kjv");
  if (!text && o.data != "synthetic" && o.data != "mnist")
    bad("data '" + o.data + "': the " + o.model + " trains on synthetic or mnist");
  if (o.ranks < 1 || o.ranks > kMaxRanks)
    bad(std::to_string(o.ranks) + " ranks: give 1 to " + std::to_string(kMaxRanks));
  if (o.shard_batch < 1) bad("shard batch 0: give at least 1 example per rank");
  if (o.ranks > kMaxRanks / o.shard_batch)
    bad("ranks x shard batch is too large (" + std::to_string(o.ranks) + " x " + std::to_string(o.shard_batch) + ")");
}

TrainConfig train_config(const ShardGradientOptions& o) {
  TrainConfig c;
  c.model = o.model;
  c.data = o.data;
  c.data_dir = o.data_dir;
  c.text_for_tests = o.text_for_tests;
  c.seed = o.seed;
  c.batch_size = o.ranks * o.shard_batch;
  c.train_size = shard_train_size(o.ranks, o.shard_batch);
  c.steps = std::max<std::size_t>(1, o.step);  // (the Trainer takes at least one; only `step` are run)
  c.recipe = "fp32";
  c.backend = nn::BackendKind::ref;
  c.recorders = false;
  c.record_every = 0;
  c.histograms = false;
  return c;
}

// The batch the run's step K trains on (K = steps already taken), rebuilt from the run's seed as the Trainer
// draws it: the images' epoch order (data::BatchIterator), or the text's windows (TextTask).
StepInputs step_inputs(const Trainer& t, const ShardGradientOptions& o) {
  const TrainConfig& c = t.config();
  StepInputs in;
  if (o.model == "transformer") {
    data::CharText text = c.text_for_tests ? data::char_text_from_string(*c.text_for_tests, "test text")
                                           : data::load_kjv_char_text(c.data_dir);
    TextTask task(std::move(text), c.batch_size, c.context_length, c.test_size, c.seed);
    for (std::size_t k = 0; k < o.step; ++k) task.next();
    TokenBatch b = task.next();
    in.x = std::move(b.x);
    in.labels = std::move(b.labels);
    in.rows_per_example = c.context_length;
    return in;
  }
  const data::Dataset& d = t.data().train;
  data::BatchOptions bo;
  bo.batch_size = c.batch_size;
  bo.seed = c.seed;
  data::BatchIterator batches(d, bo);
  batches.seek(o.step / batches.batches_per_epoch(), o.step % batches.batches_per_epoch());
  const data::Batch b = batches.next();
  in.x = nn::Tensor(static_cast<int>(b.size()), d.channels, d.height, d.width);
  std::copy(b.images.begin(), b.images.end(), in.x.values.begin());
  in.labels.assign(b.labels.begin(), b.labels.end());
  return in;
}

// Rows [first, first + count) of a tensor whose first dimension is n.
nn::Tensor rows_of(const nn::Tensor& x, std::size_t first, std::size_t count) {
  nn::Tensor s(static_cast<int>(count), x.c, x.h, x.w);
  const std::size_t per_row = x.values.size() / static_cast<std::size_t>(x.n);
  std::copy_n(x.values.begin() + static_cast<std::ptrdiff_t>(first * per_row), count * per_row, s.values.begin());
  return s;
}

// The gradient of the mean loss over x's rows, every parameter in order, appended to `row`.
void shard_gradient(nn::Sequential& model, const nn::Tensor& x, std::span<const std::int32_t> labels,
                    std::vector<float>& row) {
  nn::RefBackend backend;
  const nn::Precision precision;  // fp32 throughout
  nn::Context ctx(backend, precision);
  model.cast_weights(precision);
  ctx.set_pass(nn::Pass::forward);
  nn::Tensor logits = model.forward(ctx, x);
  const ops::SoftmaxCrossEntropyShape shape{logits.n, logits.c};
  ctx.set_pass(nn::Pass::backward);
  nn::Tensor dlogits(logits.n, logits.c);
  backend.softmax_cross_entropy_backward(shape, logits.span(), labels, dlogits.span(), nn::loss_policy(precision),
                                         nullptr);
  model.backward(ctx, dlogits, false);
  for (const nn::Parameter* p : model.parameters()) row.insert(row.end(), p->grad.begin(), p->grad.end());
}

}  // namespace

std::size_t shard_train_size(std::size_t ranks, std::size_t shard_batch) {
  return std::max(kDefaultTrainSize, ranks * shard_batch);
}

ShardGradients shard_gradients(const ShardGradientOptions& options) {
  check_options(options);
  Trainer trainer(train_config(options));
  for (std::size_t k = 0; k < options.step; ++k) trainer.step();
  const StepInputs in = step_inputs(trainer, options);

  ShardGradients g;
  g.ranks = options.ranks;
  g.train_size = options.model == "transformer" ? 0 : trainer.data().train.size();
  nn::Sequential& model = trainer.classifier();
  model.set_training(true);
  for (const nn::Parameter* p : model.parameters()) {
    g.parameter_names.push_back(p->name);
    g.parameter_sizes.push_back(p->size());
    g.n += p->size();
  }
  g.rows.reserve(g.ranks * g.n);
  const std::size_t examples = options.shard_batch * in.rows_per_example;  // rows of x per shard
  for (std::size_t r = 0; r < g.ranks; ++r) {
    const nn::Tensor x = rows_of(in.x, r * examples, examples);
    shard_gradient(model, x, std::span<const std::int32_t>(in.labels).subspan(r * examples, examples), g.rows);
  }
  return g;
}

}  // namespace mpverify::training
