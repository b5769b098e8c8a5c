// The DCGAN's held-out evaluation (summary.json's "evaluation" for dcgan
// runs, contract 2): after the last step, n generated images and the run's
// held-out real test images (for --data mnist the fixed MNIST test split,
// 2000 images) both pass through the FID feature extractor
// (training/feature_extractor.h), and FID, its bootstrap and KID are
// computed on the two feature matrices (fid.h, fid_bootstrap.h, kid.h):
//   {"fid": FID on the nuclear-norm route (null when diverged),
//    "fid_stderr": the bootstrap standard error (standard deviation of
//       `bootstrap_replicates` replicates, N - 1 denominator; null with 0
//       replicates or when diverged),
//    "fid_interval": [lo, hi], the bootstrap percentile interval at `level`
//       (90% by default; null likewise), "fid_interval_level",
//    "fid_bootstrap_replicates",
//    "kid", "kid_stderr" (kid.h's definitions), "kid_subsets", "kid_subset_size",
//    "n": generated images, "n_real": real test images, "dims": 784,
//    "seed": the latent codes', the KID subsets' and the bootstrap's seed
//       (`train --samples-seed`, default the run's seed; the first k images
//       are those of samples.npy for the same seed),
//    "route": "nuclear-norm",
//    "extractor": {"file": its file name, "sha256": of its bytes, "format",
//       "seed", "steps" (its metadata)},
//    "diverged", "reason"}.
// The run diverged when it aborted, a weight (generator or discriminator) is
// not finite, or a generated image holds a non-finite value; FID, KID and their errors are then null (the gate never passes it).
//
// Cost (one core, N = n_real = 2000, D = 784): KID about 30 s; each
// bootstrap replicate about 1.7 s (two 784 x 784 covariances and their
// eigen-decompositions), so the default 200 replicates take about 6 minutes.
// `train --fid-bootstrap B` lowers it; the standard error's own relative
// error is about 1 / sqrt(2 (B - 1)) (5% at B = 200, 10% at B = 50).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "metrics/fid.h"
#include "training/feature_extractor.h"
#include "training/trainer.h"

namespace mpverify::metrics {

struct GanEvaluationOptions {
  std::size_t samples = 0;  // generated images; 0: as many as the run's test split holds
  std::size_t bootstrap_replicates = 50;  // 0: no bootstrap (fid_stderr null), else >= 2
  double level = 0.90;                     // of the percentile interval, in (0, 1)
  std::size_t kid_subsets = 100;
  TraceRoute route = TraceRoute::nuclear_norm;
};

// Which extractor produced the features: FIDs from different extractors are
// not comparable, so the record travels with every evaluation.
struct ExtractorRecord {
  std::string file;    // file name (no directory)
  std::string sha256;  // of the file's bytes, as sha256sum prints it
  std::string format, seed, steps;  // from its metadata ("" when absent)
  nlohmann::json to_json() const;
};

// Reads the extractor file: throws io::FileError for an unreadable or
// malformed file, std::invalid_argument for one that is not our extractor.
struct LoadedExtractor {
  std::shared_ptr<training::FeatureExtractor> extractor;
  ExtractorRecord record;
};
LoadedExtractor load_extractor(const std::filesystem::path& file);

// Throws std::invalid_argument for options out of range (naming the
// train option), or when the trainer's model, image size or test split
// cannot be evaluated (not dcgan, not 28 x 28, fewer than 2 test images).
void check_gan_evaluation(const training::Trainer& trainer, const GanEvaluationOptions& options);

// The evaluation (see above) at the trainer's current weights.
nlohmann::json evaluate_gan(training::Trainer& trainer, training::FeatureExtractor& extractor,
                            const ExtractorRecord& record, const GanEvaluationOptions& options);

// The hook `train --extractor` installs (TrainConfig::final_evaluation):
// check_gan_evaluation at construction, evaluate_gan after the last step.
// The extractor is shared by every run of an ensemble.
training::FinalEvaluation gan_final_evaluation(const LoadedExtractor& extractor, const GanEvaluationOptions& options);

}  // namespace mpverify::metrics
