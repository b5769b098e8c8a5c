#include "metrics/image_features.h"

#include <cmath>
#include <stdexcept>

#include "data/mnist.h"

namespace mpverify::metrics {

namespace {

std::string tuple_shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  s += shape.size() == 1 ? ",)" : ")";
  return s;
}

}  // namespace

bool is_mnist_image_set_name(const std::string& spec) { return spec == "mnist-test" || spec == "mnist-train"; }

ImageSet load_image_set(const std::string& spec, const std::filesystem::path& mnist_dir) {
  ImageSet set;
  set.name = spec;
  if (is_mnist_image_set_name(spec)) {
    const data::Split split = data::mnist_split(mnist_dir);
    const data::Dataset& d = spec == "mnist-test" ? split.test : split.train;
    set.count = d.size();
    set.height = d.height;
    set.width = d.width;
    set.images = d.images;
    return set;
  }
  return image_set_from_array(spec, io::read_npy_f64(spec));
}

ImageSet image_set_from_array(const std::string& spec, const io::DoubleArray& a) {
  ImageSet set;
  set.name = spec;
  const auto& s = a.shape;
  const bool nhw = s.size() == 3, nchw = s.size() == 4 && s[1] == 1;
  if (!nhw && !nchw) {
    std::string m = "image set '" + spec + "': shape " + tuple_shape_text(s) +
                    " is not N x 1 x H x W or N x H x W (one grey image per row)";
    if (s.size() == 4) m += "; images must have one channel";
    throw std::invalid_argument(m);
  }
  set.count = s[0];
  set.height = static_cast<int>(s[s.size() - 2]);
  set.width = static_cast<int>(s[s.size() - 1]);
  if (set.count == 0) throw std::invalid_argument("image set '" + spec + "' holds no image (shape " + tuple_shape_text(s) + ")");
  const std::size_t per_image = static_cast<std::size_t>(set.height) * static_cast<std::size_t>(set.width);
  set.images.resize(a.values.size());
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    const double v = a.values[i];
    if (!(v >= 0.0 && v <= 1.0)) {
      const std::size_t image = i / per_image, pixel = i % per_image;
      throw std::invalid_argument("image set '" + spec + "': image " + std::to_string(image) + ", pixel (" +
                                  std::to_string(pixel / static_cast<std::size_t>(set.width)) + ", " +
                                  std::to_string(pixel % static_cast<std::size_t>(set.width)) + ") is " +
                                  std::to_string(v) + "; images must hold values in [0, 1] (scale them first)");
    }
    set.images[i] = static_cast<float>(v);
  }
  return set;
}

void check_extractor_size(const std::string& name, int height, int width) {
  if (height != training::kFeatureSide || width != training::kFeatureSide)
    throw std::invalid_argument("image set '" + name + "' has " + std::to_string(height) + " x " +
                                std::to_string(width) + " images but the feature extractor reads " +
                                std::to_string(training::kFeatureSide) + " x " +
                                std::to_string(training::kFeatureSide) +
                                " (MNIST-sized) images; give images of that size");
}

std::vector<double> image_features(training::FeatureExtractor& extractor, std::span<const float> images) {
  const std::vector<float> f = extractor.features(images);
  return {f.begin(), f.end()};
}

std::vector<double> image_features(training::FeatureExtractor& extractor, const ImageSet& set) {
  check_extractor_size(set.name, set.height, set.width);
  return image_features(extractor, set.images);
}

}  // namespace mpverify::metrics
