// The feature extractor for FID and KID on MNIST-sized images. No Inception
// weights can be loaded here, so the features come from our own CNN
// (nn::make_cnn: conv1 8 3x3, bn1, relu, pool, conv2 16 3x3, bn2, relu, pool,
// fc 784 -> 10) trained on the MNIST training split (8000 images) by our own
// trainer: fp32 recipe, ref backend, SGD (lr 0.05, momentum 0.9), batches
// of 64, deterministic for a seed (the same seed and steps give bitwise the
// same weights). The features of an image are the penultimate layer's
// activations in evaluation mode: pool2's output, 16 x 7 x 7 = 784 values,
// flattened in C order (what fc reads), computed on the ref backend in fp32.
//
// Saved as safetensors (io::write_safetensors), float32, C order:
//   conv1.w [8, 1, 3, 3]   conv1.b [8]
//   bn1.gamma [8]  bn1.beta [8]  bn1.running_mean [8]  bn1.running_var [8]
//   conv2.w [16, 8, 3, 3]  conv2.b [16]
//   bn2.gamma [16] bn2.beta [16] bn2.running_mean [16] bn2.running_var [16]
//   fc.w [10, 784]  fc.b [10]
// with metadata {"format": "mpverify-mnist-cnn-features/1", "seed", "steps",
// "batch_size", "test_accuracy" (on the 2000 MNIST test images)}. Rebuilt by
// one command: `mpverify feature-extractor --out FILE` (see --help).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nn/sequential.h"

namespace mpverify::training {

struct FeatureExtractorOptions {
  std::uint64_t seed = 1;
  std::size_t steps = 2000;  // 16 epochs of the 8000 training images at batch 64
  std::size_t batch_size = 64;
  std::filesystem::path data_dir;  // MNIST's files (empty: the loader's default)
};

inline constexpr int kFeatureSide = 28;
inline constexpr std::size_t kFeatureDim = 16 * 7 * 7;
inline constexpr const char* kFeatureFormat = "mpverify-mnist-cnn-features/1";

class FeatureExtractor {
 public:
  // Trains the CNN (see above); `progress(step)` after every step (may be
  // empty). Throws data::DataFileError when MNIST is missing.
  static FeatureExtractor train(const FeatureExtractorOptions& options,
                                const std::function<void(std::size_t step)>& progress = {});
  // Throws io::FileError for a bad file and std::invalid_argument when a
  // tensor is missing or has another shape, or the format is not ours.
  static FeatureExtractor load(const std::filesystem::path& file);
  // Atomically (temporary file renamed into place).
  void save(const std::filesystem::path& file) const;

  // images: n x 28 x 28 floats in [0, 1] (n = images.size() / 784; throws
  // std::invalid_argument unless a whole number). Returns n x kFeatureDim, in
  // chunks of 256 images (bitwise the same for the same images and weights).
  std::vector<float> features(std::span<const float> images);
  // The classifier's logits (n x 10), the same pass run to the end.
  std::vector<float> logits(std::span<const float> images);

  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  FeatureExtractor(FeatureExtractor&&) noexcept;
  FeatureExtractor& operator=(FeatureExtractor&&) noexcept;
  ~FeatureExtractor();

 private:
  FeatureExtractor();
  std::vector<float> run(std::span<const float> images, std::size_t layers, std::size_t width);
  std::unique_ptr<nn::Sequential> model_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace mpverify::training
