// Image sets as FID/KID inputs: a set of images is turned into a feature
// matrix by the FID feature extractor (training/feature_extractor.h, our
// MNIST CNN's penultimate layer, 784 features per 28 x 28 image).
//
// An image set is named either
//  - "mnist-test" / "mnist-train": the held-out 2000 / training 8000 images
//    of the fixed MNIST split (data/mnist.h, as the trainer uses it), or
//  - an .npy file of N x 1 x H x W or N x H x W images with values in
//    [0, 1] (e.g. the samples.npy that `train --samples` writes). float32
//    files are used exactly; other dtypes are rounded to the nearest float
//    (what the extractor reads).
// A 2-D .npy is a feature matrix, not an image set (is_feature_matrix_shape).
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "io/npy.h"
#include "training/feature_extractor.h"

namespace mpverify::metrics {

struct ImageSet {
  std::string name;           // as given (a path or mnist-test / mnist-train)
  std::size_t count = 0;      // N
  int height = 0, width = 0;  // one channel
  std::vector<float> images;  // N x H x W, C order, values in [0, 1]
};

bool is_mnist_image_set_name(const std::string& spec);

// Loads the images named by `spec` (see above); `mnist_dir` is where MNIST's
// files are (empty: the loader's default). Throws std::invalid_argument for
// a shape that is not N x 1 x H x W / N x H x W, fewer than 1 image, or a
// pixel that is not a finite value in [0, 1] (naming the image and pixel);
// io::FileError for an unreadable .npy; data::DataFileError when MNIST is
// missing.
ImageSet load_image_set(const std::string& spec, const std::filesystem::path& mnist_dir = {});
// The same checks on an .npy already read (3-D or 4-D; `name` for messages).
ImageSet image_set_from_array(const std::string& name, const io::DoubleArray& array);

// Throws std::invalid_argument unless the images are the extractor's size
// (28 x 28, one channel), naming the set and both sizes.
void check_extractor_size(const std::string& name, int height, int width);

// The extractor's features of the images as an N x kFeatureDim matrix of
// doubles (each float feature converted exactly), row i = image i.
std::vector<double> image_features(training::FeatureExtractor& extractor, std::span<const float> images);
std::vector<double> image_features(training::FeatureExtractor& extractor, const ImageSet& set);

}  // namespace mpverify::metrics
