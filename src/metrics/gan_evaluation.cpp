#include "metrics/gan_evaluation.h"

#include <cmath>
#include <stdexcept>

#include "io/sha256.h"
#include "metrics/fid_bootstrap.h"
#include "metrics/image_features.h"
#include "metrics/kid.h"
#include "record/json_number.h"

namespace mpverify::metrics {

namespace {

std::string metadata_or_empty(const training::FeatureExtractor& x, const char* key) {
  const auto it = x.metadata().find(key);
  return it == x.metadata().end() ? std::string() : it->second;
}

}  // namespace

nlohmann::json ExtractorRecord::to_json() const {
  return {{"file", file}, {"sha256", sha256}, {"format", format}, {"seed", seed}, {"steps", steps}};
}

LoadedExtractor load_extractor(const std::filesystem::path& file) {
  LoadedExtractor l;
  l.extractor = std::make_shared<training::FeatureExtractor>(training::FeatureExtractor::load(file));
  l.record.file = file.filename().string();
  l.record.sha256 = io::sha256_file_hex(file);
  l.record.format = metadata_or_empty(*l.extractor, "format");
  l.record.seed = metadata_or_empty(*l.extractor, "seed");
  l.record.steps = metadata_or_empty(*l.extractor, "steps");
  return l;
}

void check_gan_evaluation(const training::Trainer& trainer, const GanEvaluationOptions& options) {
  if (trainer.config().model != "dcgan")
    throw std::invalid_argument("--extractor: the FID evaluation is for dcgan runs");
  if (options.bootstrap_replicates == 1)
    throw std::invalid_argument("--fid-bootstrap: at least 2 replicates (or 0 for none)");
  if (!(options.level > 0.0 && options.level < 1.0)) throw std::invalid_argument("the FID interval's level must be in (0, 1)");
  if (options.kid_subsets == 0) throw std::invalid_argument("the KID needs at least 1 subset");
  if (options.samples == 1) throw std::invalid_argument("--fid-samples: at least 2 generated images (FID needs a covariance)");
  const data::Dataset& test = trainer.data().test;
  std::string name = "the run's test split (--data ";
  name += trainer.config().data;
  name += ")";
  check_extractor_size(name, test.height, test.width);
  if (test.size() < 2)
    throw std::invalid_argument("--test-size: the FID evaluation needs at least 2 real test images (it has " +
                                std::to_string(test.size()) + ")");
}

nlohmann::json evaluate_gan(training::Trainer& trainer, training::FeatureExtractor& extractor,
                            const ExtractorRecord& record, const GanEvaluationOptions& options) {
  check_gan_evaluation(trainer, options);
  const training::TrainConfig& config = trainer.config();
  const data::Dataset& real = trainer.data().test;
  const std::size_t n = options.samples == 0 ? real.size() : options.samples;
  const std::uint64_t seed = config.samples_seed.value_or(config.seed);
  nlohmann::json e = {{"fid", nullptr},
                      {"fid_stderr", nullptr},
                      {"fid_interval", nullptr},
                      {"fid_interval_level", options.level},
                      {"fid_bootstrap_replicates", options.bootstrap_replicates},
                      {"kid", nullptr},
                      {"kid_stderr", nullptr},
                      {"kid_subsets", options.kid_subsets},
                      {"kid_subset_size", nullptr},
                      {"n", n},
                      {"n_real", real.size()},
                      {"dims", training::kFeatureDim},
                      {"seed", seed},
                      {"route", to_string(options.route)},
                      {"extractor", record.to_json()},
                      {"diverged", false},
                      {"reason", ""}};
  auto diverged = [&](const std::string& reason) {
    e["diverged"] = true;
    e["reason"] = reason;
    return e;
  };
  if (trainer.aborted()) return diverged("the run aborted at step " + std::to_string(trainer.steps_done()));
  // Weights first: a NaN in an early generator layer need not reach the
  // images (the reference ReLU, x > 0 ? x : 0, maps NaN to 0).
  for (nn::Parameter* p : trainer.parameters())
    for (std::size_t i = 0; i < p->master.size(); ++i)
      if (!std::isfinite(p->master[i]))
        return diverged("weight " + p->name + "[" + std::to_string(i) + "] is not finite (" +
                        std::to_string(p->master[i]) + ")");
  const std::vector<float> images = trainer.generate(n, seed);
  const std::size_t per_image = images.size() / n;
  for (std::size_t i = 0; i < images.size(); ++i)
    if (!std::isfinite(images[i]))
      return diverged("generated image " + std::to_string(i / per_image) + " holds a non-finite value (" +
                      std::to_string(images[i]) + ")");

  const std::vector<double> fg = image_features(extractor, images), fr = image_features(extractor, real.images);
  const FeatureMatrix generated{fg, n, training::kFeatureDim, "generated"};
  const FeatureMatrix held_out{fr, real.size(), training::kFeatureDim, "real test"};
  // The bootstrap computes the FID of the whole sets itself (FidBootstrap::fid, the same call as below):
  // taken from there, not computed twice (each is two 784 x 784 eigen-decompositions).
  if (options.bootstrap_replicates >= 2) {
    const FidBootstrap b = fid_bootstrap(
        generated, held_out,
        {.replicates = options.bootstrap_replicates, .level = options.level, .seed = seed, .route = options.route});
    e["fid"] = record::number_or_null(b.fid);
    e["fid_stderr"] = record::number_or_null(b.standard_error);
    e["fid_interval"] = {record::number_or_null(b.low), record::number_or_null(b.high)};
  } else {
    e["fid"] = record::number_or_null(fid(generated, held_out, options.route).fid);
  }
  const KidResult k = kernel_inception_distance(generated, held_out, {.subsets = options.kid_subsets, .seed = seed});
  e["kid"] = record::number_or_null(k.kid);
  e["kid_stderr"] = record::number_or_null(k.kid_stderr);
  e["kid_subset_size"] = k.subset_size;
  return e;
}

training::FinalEvaluation gan_final_evaluation(const LoadedExtractor& extractor, const GanEvaluationOptions& options) {
  training::FinalEvaluation hook;
  hook.check = [options](const training::Trainer& trainer) { check_gan_evaluation(trainer, options); };
  hook.run = [extractor, options](training::Trainer& trainer) {
    return evaluate_gan(trainer, *extractor.extractor, extractor.record, options);
  };
  return hook;
}

}  // namespace mpverify::metrics
