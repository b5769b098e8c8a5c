#include "data/dataset.h"

#include <stdexcept>

namespace mpverify::data {

std::span<const float> Dataset::image(std::size_t i) const {
  if (i >= size()) {
    throw std::out_of_range("Dataset::image: index " + std::to_string(i) + " >= size " + std::to_string(size()));
  }
  const std::size_t n = image_size();
  return std::span<const float>(images).subspan(i * n, n);
}

void validate(const Dataset& d) {
  if (d.height <= 0 || d.width <= 0 || d.channels <= 0 || d.classes <= 0) {
    throw std::invalid_argument("Dataset: height, width, channels and classes must be positive");
  }
  if (d.images.size() != d.size() * d.image_size()) {
    throw std::invalid_argument("Dataset: images holds " + std::to_string(d.images.size()) + " floats, expected " +
                                std::to_string(d.size() * d.image_size()) + " for " + std::to_string(d.size()) +
                                " labels");
  }
  for (std::size_t i = 0; i < d.labels.size(); ++i) {
    if (d.labels[i] < 0 || d.labels[i] >= d.classes) {
      throw std::invalid_argument("Dataset: label " + std::to_string(d.labels[i]) + " of example " +
                                  std::to_string(i) + " is outside [0, " + std::to_string(d.classes) + ")");
    }
  }
  for (std::size_t k = 0; k < d.images.size(); ++k) {
    if (!(d.images[k] >= 0.0f && d.images[k] <= 1.0f)) {  // also rejects NaN
      throw std::invalid_argument("Dataset: pixel " + std::to_string(k) + " is outside [0, 1]");
    }
  }
}

std::string to_ascii(std::span<const float> image, int height, int width, int channels) {
  if (height <= 0 || width <= 0 || channels <= 0 ||
      image.size() != static_cast<std::size_t>(height) * static_cast<std::size_t>(width) *
                          static_cast<std::size_t>(channels)) {
    throw std::invalid_argument("to_ascii: image holds " + std::to_string(image.size()) +
                                " floats, not channels * height * width");
  }
  static constexpr char kRamp[] = " .:-=+*#%@";
  std::string out;
  out.reserve(image.size() + static_cast<std::size_t>(height * channels));
  std::size_t k = 0;
  for (int row = 0; row < height * channels; ++row) {
    for (int col = 0; col < width; ++col, ++k) {
      const float v = image[k];
      if (v != v) {
        out.push_back('?');
        continue;
      }
      const float level = v <= 0.0f ? 0.0f : (v >= 1.0f ? 9.0f : v * 10.0f);
      const int index = static_cast<int>(level) > 9 ? 9 : static_cast<int>(level);
      out.push_back(kRamp[index]);
    }
    out.push_back('\n');
  }
  return out;
}

std::string to_ascii(const Dataset& d, std::size_t i) { return to_ascii(d.image(i), d.height, d.width, d.channels); }

}  // namespace mpverify::data
