// An in-memory image classification data set, the form every data source
// (synthetic digits, MNIST, scikit-learn's 8x8 digits) hands to
// training: N images stored NCHW as floats in [0, 1], one int32 label each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mpverify::data {

struct Dataset {
  int height = 0, width = 0, channels = 0;
  int classes = 0;
  std::vector<float> images;         // N x C x H x W, values in [0, 1]
  std::vector<std::int32_t> labels;  // N, each in [0, classes)

  std::size_t size() const { return labels.size(); }
  // Floats per image: C * H * W.
  std::size_t image_size() const {
    return static_cast<std::size_t>(channels) * static_cast<std::size_t>(height) * static_cast<std::size_t>(width);
  }
  // Image i (C x H x W). Throws std::out_of_range for i >= size().
  std::span<const float> image(std::size_t i) const;
};

struct Split {
  Dataset train, test;
};

// Throws std::invalid_argument when the dimensions, the images' length or a
// label is inconsistent, or a pixel is outside [0, 1] (NaN included).
void validate(const Dataset& d);

// A text picture for debugging and test failures: one line per row, one
// character per pixel from " .:-=+*#%@" (value v in [0, 1] -> level
// min(9, floor(10 v)); values outside [0, 1] are clamped, NaN shows as '?').
// Channels are drawn one below the other. Throws std::invalid_argument when
// the span is not channels * height * width long.
std::string to_ascii(std::span<const float> image, int height, int width, int channels = 1);
std::string to_ascii(const Dataset& d, std::size_t i);

}  // namespace mpverify::data
