// Held-out evaluation: batch norm's evaluation mode against a
// direct computation, and Trainer::evaluate against an independent recount
// from the classifier's logits; evaluation leaves the run unchanged; a
// trained CNN reaches a stated accuracy; a diverged run has no accuracy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "data/random.h"
#include "io/npy.h"
#include "nn/batch_norm_layer.h"
#include "nn/emu_backend.h"
#include "nn/models.h"
#include "nn/ref_backend.h"
#include "training/trainer.h"

namespace mpverify {
namespace {

using nn::Tensor;

// Deterministic inputs without a random engine: a spread of values per channel.
Tensor batch(int n, int c, int hw, int salt) {
  Tensor x(n, c, hw, hw);
  for (std::size_t i = 0; i < x.size(); ++i)
    x.values[i] = static_cast<float>(((i * 37 + static_cast<std::size_t>(salt) * 11) % 23)) / 8.0f - 1.0f +
                  0.5f * static_cast<float>((i / static_cast<std::size_t>(hw * hw)) % static_cast<std::size_t>(c));
  return x;
}

// PyTorch's eval formula, in double: (x - mean) / sqrt(var + eps) * gamma + beta.
double eval_formula(double x, double mean, double var, double eps, double gamma, double beta) {
  return (x - mean) / std::sqrt(var + eps) * gamma + beta;
}

TEST(BatchNormEval, NormalisesWithTheRunningStatisticsAndUpdatesNothing) {
  nn::RefBackend backend;
  nn::Precision precision;
  nn::Context ctx(backend, precision);
  const int C = 3, hw = 2;
  nn::BatchNorm2d layer("bn", C);
  auto params = layer.parameters();
  params[0]->master = {1.5f, 0.5f, 2.0f};
  params[1]->master = {0.25f, -1.0f, 0.0f};
  for (auto* p : params) nn::cast_weights(*p, precision);
  // Three training-mode forwards; the running statistics by the recurrence in double.
  std::vector<double> rm(C, 0.0), rv(C, 1.0);
  for (int step = 0; step < 3; ++step) {
    const Tensor x = batch(4, C, hw, step);
    layer.forward(ctx, x);
    for (int c = 0; c < C; ++c) {
      std::vector<double> v;
      for (int i = 0; i < 4; ++i)
        for (int k = 0; k < hw * hw; ++k) v.push_back(x.values[static_cast<std::size_t>((i * C + c) * hw * hw + k)]);
      double mean = 0;
      for (double a : v) mean += a;
      mean /= static_cast<double>(v.size());
      double ss = 0;
      for (double a : v) ss += (a - mean) * (a - mean);
      rm[static_cast<std::size_t>(c)] = 0.9 * rm[static_cast<std::size_t>(c)] + 0.1 * mean;
      rv[static_cast<std::size_t>(c)] = 0.9 * rv[static_cast<std::size_t>(c)] + 0.1 * ss / static_cast<double>(v.size() - 1);
    }
  }
  // The layer rounds each step's new statistic to float once (relative 2^-24)
  // and carries the earlier errors with weight 0.9: over 3 steps at most
  // 3 * 2^-24 * max|value| (max taken as the final value bound, 4 here).
  for (std::size_t c = 0; c < C; ++c) {
    EXPECT_NEAR(layer.running_mean()[c], rm[c], 3 * 0x1p-24 * 4) << c;
    EXPECT_NEAR(layer.running_var()[c], rv[c], 3 * 0x1p-24 * 4) << c;
  }
  const std::vector<float> mean_before = layer.running_mean(), var_before = layer.running_var();

  layer.set_training(false);
  EXPECT_FALSE(layer.training());
  const Tensor x = batch(1, C, hw, 7);  // one example: training mode would refuse it (no variance)
  const Tensor y = layer.forward(ctx, x);
  EXPECT_EQ(layer.running_mean(), mean_before);
  EXPECT_EQ(layer.running_var(), var_before);
  for (std::size_t k = 0; k < y.size(); ++k) {
    const std::size_t c = k / static_cast<std::size_t>(hw * hw);
    const double gamma = params[0]->value[c], beta = params[1]->value[c];
    const double expected = eval_formula(x.values[k], mean_before[c], var_before[c], 1e-5, gamma, beta);
    // y is the FP64 value rounded once to float (2^-24 relative), and the two
    // FP64 evaluations (ours and the layer's, associated differently) each
    // err by at most 4 roundings of 2^-53 on terms of size |x - mean| |gamma|
    // / sqrt(var + eps) + |beta|.
    const double terms = std::fabs(x.values[k] - mean_before[c]) * std::fabs(gamma) /
                             std::sqrt(var_before[c] + 1e-5) + std::fabs(beta);
    EXPECT_NEAR(y.values[k], expected, 0x1p-24 * std::fabs(expected) + 8 * 0x1p-53 * terms) << k;
  }
  // Training mode on a batch normalises with the batch's statistics instead.
  const Tensor x4 = batch(4, C, hw, 9);
  const Tensor y_eval = layer.forward(ctx, x4);
  EXPECT_THROW(layer.backward(ctx, y_eval, true), std::logic_error);
  layer.set_training(true);
  const Tensor y_train = layer.forward(ctx, x4);
  EXPECT_NE(y_eval.values, y_train.values);
}

TEST(BatchNormEval, OnTheEmulatorTheOutputIsStoredInTheActivationFormat) {
  nn::EmuBackend backend;
  nn::Precision precision;
  precision.activations = formats::parse_format("fp16");
  nn::Context ctx(backend, precision);
  nn::BatchNorm2d layer("bn", 2);
  for (auto* p : layer.parameters()) nn::cast_weights(*p, precision);
  layer.forward(ctx, batch(4, 2, 3, 1));
  layer.set_training(false);
  const Tensor x = batch(2, 2, 3, 5);
  const Tensor y = layer.forward(ctx, x);
  for (std::size_t k = 0; k < y.size(); ++k) {
    const std::size_t c = (k / 9) % 2;
    const double expected = eval_formula(x.values[k], layer.running_mean()[c], layer.running_var()[c], 1e-5, 1, 0);
    // An fp16 value (the compiler's _Float16 as the oracle) within half an
    // fp16 ulp of the exact value (2^-11 relative for normals, 2^-25 absolute
    // below 2^-14), plus 2^-24 relative for the float in between and the
    // FP64 evaluation's error (below 2^-50 relative here).
    EXPECT_EQ(y.values[k], static_cast<float>(static_cast<_Float16>(y.values[k]))) << k;
    EXPECT_NEAR(y.values[k], expected, (0x1p-11 + 0x1p-24 + 0x1p-50) * std::fabs(expected) + 0x1p-25) << k;
  }
}

TEST(BatchNormEval, SequentialPassesTheModeToEveryLayer) {
  nn::Sequential cnn = nn::make_cnn(1, 8, 8, 10, 1);
  cnn.set_training(false);
  for (const auto& layer : cnn.layers()) EXPECT_FALSE(layer->training()) << layer->name();
  cnn.set_training(true);
  for (const auto& layer : cnn.layers()) EXPECT_TRUE(layer->training()) << layer->name();
}

// --- Trainer::evaluate ---------------------------------------------------------------------

training::TrainConfig small_cnn() {
  training::TrainConfig c;
  c.model = "cnn";
  c.data = "synthetic";
  c.train_size = 1024;
  c.test_size = 300;
  c.batch_size = 32;
  c.seed = 3;
  c.recorders = false;
  c.histograms = false;
  return c;
}

// The recount: the classifier in evaluation mode on the whole test set in one
// batch on a fresh FP32 reference context; argmax by hand; the mean
// cross-entropy in double from the logits (log-sum-exp shifted by the max).
struct Recount {
  std::size_t correct = 0;
  double loss = 0;
};
Recount recount(training::Trainer& t) {
  nn::RefBackend backend;
  nn::Precision precision;
  nn::Context ctx(backend, precision);
  nn::Sequential& model = t.classifier();
  model.cast_weights(precision);
  model.set_training(false);
  const data::Dataset& test = t.data().test;
  Tensor x(static_cast<int>(test.size()), test.channels, test.height, test.width);
  x.values = test.images;
  const Tensor logits = model.forward(ctx, x);
  model.set_training(true);
  Recount r;
  for (std::size_t i = 0; i < test.size(); ++i) {
    const float* row = logits.values.data() + i * static_cast<std::size_t>(logits.c);
    int best = 0;
    for (int j = 1; j < logits.c; ++j)
      if (row[j] > row[best]) best = j;
    r.correct += best == test.labels[i];
    double m = row[0];
    for (int j = 1; j < logits.c; ++j) m = std::max(m, static_cast<double>(row[j]));
    double s = 0;
    for (int j = 0; j < logits.c; ++j) s += std::exp(row[j] - m);
    r.loss += (m + std::log(s) - row[test.labels[i]]) / static_cast<double>(test.size());
  }
  return r;
}

TEST(Evaluate, AccuracyAndLossEqualARecountFromTheLogitsAndATrainedCnnLearns) {
  training::Trainer t(small_cnn());
  const training::Evaluation before = t.evaluate();
  for (int step = 0; step < 120; ++step) t.step();
  const training::Evaluation e = t.evaluate();
  const Recount r = recount(t);
  ASSERT_EQ(e.test_size, 300u);
  EXPECT_FALSE(e.diverged);
  EXPECT_EQ(e.correct, r.correct);
  // The backend's loss is an fp32 reduction over at most 256 rows of 10
  // (gamma_266(2^-24) < 1.6e-5 relative to the sum of |terms|, all terms of
  // one sign) plus fp32 exp/log (a few ulps each), against the recount in
  // double: 1e-4 relative covers both with margin.
  EXPECT_NEAR(e.test_loss, r.loss, 1e-4 * r.loss);
  const nlohmann::json j = e.to_json();
  EXPECT_DOUBLE_EQ(j["test_accuracy"].get<double>(), static_cast<double>(r.correct) / 300.0);
  EXPECT_EQ(j["test_size"].get<std::size_t>(), 300u);
  // Learned: chance is 10%; 120 steps of 32 synthetic digits reach well over 90%
  // (0.977 measured when written; 0.9 leaves room for platform-level drift, not for a broken model).
  EXPECT_LT(static_cast<double>(before.correct) / 300.0, 0.3);
  EXPECT_GT(static_cast<double>(e.correct) / 300.0, 0.9);
  EXPECT_LT(e.test_loss, before.test_loss / 2);
}

TEST(Evaluate, EvaluatingDoesNotChangeTheRun) {
  training::TrainConfig c = small_cnn();
  c.backend = nn::BackendKind::emu;
  c.recipe = "o2";
  c.scaler = "torch";
  c.recorders = true;
  training::Trainer a(c), b(c);
  for (int step = 0; step < 6; ++step) {
    if (step == 3) {
      const auto e = a.evaluate();
      EXPECT_FALSE(e.diverged);
      EXPECT_GT(e.test_size, 0u);
    }
    ASSERT_EQ(a.step().dump(), b.step().dump()) << step;
  }
  EXPECT_EQ(a.summary().dump(), b.summary().dump());  // the counters too
}

TEST(Evaluate, ADivergedRunHasNoAccuracy) {
  training::TrainConfig c = small_cnn();
  training::Trainer t(c);
  t.step();
  t.parameters()[0]->master[0] = std::numeric_limits<float>::quiet_NaN();
  const training::Evaluation e = t.evaluate();
  EXPECT_TRUE(e.diverged);
  EXPECT_NE(e.reason.find("conv1.w"), std::string::npos) << e.reason;
  EXPECT_TRUE(e.to_json()["test_accuracy"].is_null());
  c.model = "dcgan";
  training::Trainer gan(c);
  EXPECT_THROW(gan.evaluate(), std::logic_error);
}

// --- Trainer::generate (the DCGAN's samples for FID) ----------------------------------------

training::TrainConfig small_dcgan() {
  training::TrainConfig c;
  c.model = "dcgan";
  c.train_size = 64;
  c.batch_size = 16;
  c.seed = 4;
  c.optimizer = training::OptimizerKind::adam;
  c.adam.lr = 2e-4;
  c.recorders = false;
  c.histograms = false;
  return c;
}

TEST(Generate, SamplesAreSeededFromTheEvaluationModeGeneratorInTheDataRange) {
  training::Trainer t(small_dcgan());
  for (int step = 0; step < 3; ++step) t.step();
  const std::vector<float> a = t.generate(10, 5), b = t.generate(10, 5), c = t.generate(10, 6);
  ASSERT_EQ(a.size(), 10u * 28 * 28);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (float v : a) ASSERT_TRUE(v >= 0.0f && v <= 1.0f) << v;
  // The same images by hand: latent codes from the documented stream, the
  // generator in evaluation mode on the FP32 reference, (g + 1) / 2.
  // In training mode (batch statistics of these 10 codes) they differ.
  nn::RefBackend backend;
  nn::Precision precision;
  nn::Context ctx(backend, precision);
  data::Draws draws(5, training::Trainer::kSampleStream);
  Tensor z(10, nn::kDcganLatent);
  for (float& v : z.values) v = static_cast<float>(draws.noise());
  nn::Sequential& g = t.dcgan().generator;
  g.cast_weights(precision);
  auto mapped = [](const Tensor& out) {
    std::vector<float> m;
    for (float v : out.values) m.push_back((v + 1.0f) / 2.0f);
    return m;
  };
  g.set_training(false);
  EXPECT_EQ(mapped(g.forward(ctx, z)), a);
  g.set_training(true);  // (this forward updates the running statistics: the trainer is not used again)
  EXPECT_NE(mapped(g.forward(ctx, z)), a) << "evaluation mode must differ from batch statistics";
}

TEST(Generate, SamplesNpyHoldsTheGeneratedImagesAndGeneratingDoesNotChangeTheRun) {
  training::TrainConfig c = small_dcgan();
  c.steps = 3;
  c.samples = 7;
  c.samples_seed = 9;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "mpverify-generate-samples";
  std::filesystem::remove_all(dir);
  training::run_training(c, dir);
  const io::DoubleArray file = io::read_npy_f64(dir / "samples.npy");
  EXPECT_EQ(file.shape, (std::vector<std::size_t>{7, 1, 28, 28}));
  training::Trainer a(c), b(c);
  for (int step = 0; step < 3; ++step) {
    if (step == 1) a.generate(5, 1);  // must not alter the run
    ASSERT_EQ(a.step().dump(), b.step().dump()) << step;
  }
  const std::vector<float> images = a.generate(7, 9);
  ASSERT_EQ(file.values.size(), images.size());
  for (std::size_t i = 0; i < images.size(); ++i) ASSERT_EQ(file.values[i], static_cast<double>(images[i])) << i;
  const auto summary = nlohmann::json::parse(std::ifstream(dir / "summary.json"));
  EXPECT_EQ(summary["samples"]["n"].get<int>(), 7);
  EXPECT_EQ(summary["samples"]["seed"].get<int>(), 9);
}

}  // namespace
}  // namespace mpverify
