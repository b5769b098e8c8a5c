// The DCGAN's FID evaluation (metrics/gan_evaluation.h) as a library call:
// it equals generate() -> the extractor's features -> fid/kid/bootstrap done
// here by hand (bitwise: same code path, same data), it is what run_training
// writes into summary.json through the TrainConfig hook, a non-finite
// generator weight gives "diverged" with null values, and unusable settings are
// refused when the Trainer is built (before any file is written).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

#include "metrics/fid.h"
#include "metrics/fid_bootstrap.h"
#include "metrics/gan_evaluation.h"
#include "metrics/image_features.h"
#include "metrics/kid.h"
#include "training/trainer.h"

namespace mpverify::metrics {
namespace {

namespace fs = std::filesystem;

class GanEvaluation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    file_ = new fs::path(fs::temp_directory_path() /
                         ("mpverify-gan-eval-fx-" + std::to_string(::getpid()) + ".safetensors"));
    training::FeatureExtractorOptions o;
    o.steps = 10;  // quality is irrelevant: the same extractor is used on both sides of each comparison
    training::FeatureExtractor::train(o).save(*file_);
  }
  static void TearDownTestSuite() {
    fs::remove(*file_);
    delete file_;
  }
  static training::TrainConfig tiny() {
    training::TrainConfig c;
    c.model = "dcgan";
    c.data = "mnist";
    c.train_size = 64;
    c.test_size = 48;
    c.steps = 2;
    c.batch_size = 16;
    c.seed = 3;
    c.optimizer = training::OptimizerKind::adam;
    c.recorders = false;
    c.histograms = false;
    c.record_every = 0;
    return c;
  }
  static fs::path* file_;
};
fs::path* GanEvaluation::file_ = nullptr;

TEST_F(GanEvaluation, EqualsGenerateThenFeaturesThenFid) {
  training::Trainer trainer(tiny());
  for (int i = 0; i < 2; ++i) trainer.step();
  const LoadedExtractor x = load_extractor(*file_);
  const GanEvaluationOptions o{.samples = 32, .bootstrap_replicates = 3, .level = 0.9, .kid_subsets = 4};
  const nlohmann::json e = evaluate_gan(trainer, *x.extractor, x.record, o);

  auto extractor = training::FeatureExtractor::load(*file_);
  const std::vector<float> images = trainer.generate(32, 3);  // the run's seed
  const std::vector<float> fg = extractor.features(images), fr = extractor.features(trainer.data().test.images);
  const std::vector<double> dg(fg.begin(), fg.end()), dr(fr.begin(), fr.end());
  const FeatureMatrix g{dg, 32, training::kFeatureDim, "g"}, r{dr, 48, training::kFeatureDim, "r"};
  const FidResult f = fid(g, r);
  const KidResult k = kernel_inception_distance(g, r, {.subsets = 4, .seed = 3});
  const FidBootstrap b = fid_bootstrap(g, r, {.replicates = 3, .level = 0.9, .seed = 3});
  EXPECT_EQ(e["fid"].get<double>(), f.fid);
  EXPECT_EQ(e["kid"].get<double>(), k.kid);
  EXPECT_EQ(e["kid_stderr"].get<double>(), k.kid_stderr);
  EXPECT_EQ(e["fid_stderr"].get<double>(), b.standard_error);
  EXPECT_EQ(e["fid_interval"][0].get<double>(), b.low);
  EXPECT_EQ(e["fid_interval"][1].get<double>(), b.high);
  EXPECT_EQ(e["fid_interval_level"].get<double>(), 0.9);
  EXPECT_EQ(e["n"], 32);
  EXPECT_EQ(e["n_real"], 48);
  EXPECT_EQ(e["seed"], 3);
  EXPECT_EQ(e["diverged"], false);
  EXPECT_EQ(e["extractor"]["file"], file_->filename().string());
  EXPECT_EQ(e["extractor"]["sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(e["extractor"]["steps"], "10");
  EXPECT_GT(f.fid, 0.0);  // two steps of training do not make MNIST digits
}

TEST_F(GanEvaluation, RunTrainingWritesTheHooksEvaluationAndDefaultsToTheTestSize) {
  const fs::path out = fs::temp_directory_path() / ("mpverify-gan-eval-run-" + std::to_string(::getpid()));
  fs::remove_all(out);
  const LoadedExtractor x = load_extractor(*file_);
  const GanEvaluationOptions o{.samples = 0, .bootstrap_replicates = 0, .kid_subsets = 2};
  training::TrainConfig c = tiny();
  c.final_evaluation = gan_final_evaluation(x, o);
  training::run_training(c, out);
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(out / "summary.json"));
  fs::remove_all(out);

  training::Trainer again(tiny());  // the same run, evaluated by hand
  for (int i = 0; i < 2; ++i) again.step();
  const nlohmann::json e = evaluate_gan(again, *x.extractor, x.record, o);
  EXPECT_EQ(summary["evaluation"], e);
  EXPECT_EQ(e["n"], 48);  // samples 0: the test split's size
  EXPECT_TRUE(e["fid_stderr"].is_null());  // no bootstrap asked for
  EXPECT_TRUE(e["fid_interval"].is_null());
  EXPECT_TRUE(e["fid"].is_number());
}

TEST_F(GanEvaluation, NonFiniteGeneratorIsDivergedWithNullValues) {
  training::Trainer trainer(tiny());
  trainer.step();
  // NaN in the generator's last parameter (master and working copy): the
  // output layer's, which only tanh follows.
  nn::Parameter& w = *trainer.dcgan().generator.parameters().back();
  for (std::size_t i = 0; i < w.master.size(); ++i) w.master[i] = w.value[i] = std::numeric_limits<float>::quiet_NaN();
  const LoadedExtractor x = load_extractor(*file_);
  const nlohmann::json e = evaluate_gan(trainer, *x.extractor, x.record, {.samples = 8, .bootstrap_replicates = 2});
  EXPECT_EQ(e["diverged"], true);
  EXPECT_NE(e["reason"].get<std::string>().find("is not finite"), std::string::npos) << e["reason"];
  EXPECT_NE(e["reason"].get<std::string>().find(w.name), std::string::npos) << e["reason"];
  for (const char* key : {"fid", "fid_stderr", "fid_interval", "kid", "kid_stderr"}) EXPECT_TRUE(e[key].is_null()) << key;
  EXPECT_EQ(e["n"], 8);

  // A NaN in the first generator weight is caught too, although the ReLU
  // after it would turn it into 0 in the images.
  training::Trainer early(tiny());
  early.step();
  nn::Parameter& first = *early.dcgan().generator.parameters().front();
  first.master[0] = first.value[0] = std::numeric_limits<float>::quiet_NaN();
  const nlohmann::json e2 = evaluate_gan(early, *x.extractor, x.record, {.samples = 8, .bootstrap_replicates = 2});
  EXPECT_EQ(e2["diverged"], true);
  EXPECT_TRUE(e2["fid"].is_null());
}

TEST_F(GanEvaluation, UnusableSettingsAreRefusedWhenTheTrainerIsBuilt) {
  const LoadedExtractor x = load_extractor(*file_);
  training::TrainConfig classifier = tiny();
  classifier.model = "cnn";
  classifier.final_evaluation = gan_final_evaluation(x, {});
  EXPECT_THROW(training::Trainer{classifier}, std::invalid_argument);
  training::TrainConfig one = tiny();
  one.final_evaluation = gan_final_evaluation(x, {.samples = 1});
  EXPECT_THROW(training::Trainer{one}, std::invalid_argument);
  training::TrainConfig boot = tiny();
  boot.final_evaluation = gan_final_evaluation(x, {.bootstrap_replicates = 1});
  EXPECT_THROW(training::Trainer{boot}, std::invalid_argument);
  EXPECT_THROW(check_extractor_size("set", 8, 8), std::invalid_argument);
  EXPECT_NO_THROW(check_extractor_size("set", 28, 28));
  EXPECT_THROW(load_extractor(*file_ / "missing"), std::exception);
}

}  // namespace
}  // namespace mpverify::metrics
