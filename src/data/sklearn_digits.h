// scikit-learn's 8 x 8 digits (the UCI optical-recognition test set): 1,797
// images, one channel, pixel counts 0..16 scaled to [0, 1] by v / 16 (exact
// in float), labels 0..9. Read from digits.csv.gz as Debian's python3-sklearn
// installs it (/usr/lib/python3/dist-packages/sklearn/datasets/data/), with
// zlib: each line holds 64 pixel counts and the label, comma-separated.
//
// The file is, in this order: the one the caller passes (train --data-dir,
// a file or the directory holding digits.csv.gz), $MPVERIFY_SKLEARN_DIGITS,
// or Debian's path. Validated exactly: 1,797 lines of 65 integers, pixels in
// [0, 16], labels in [0, 9], and the per-class counts of kSklearnDigitsCounts.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "data/dataset.h"

namespace mpverify::data {

inline constexpr int kSklearnDigitsSide = 8;
inline constexpr std::array<std::size_t, 10> kSklearnDigitsCounts = {178, 182, 177, 183, 181,
                                                                     182, 181, 179, 174, 180};
inline constexpr std::size_t kSklearnDigitsImages = 1797;
// The fixed split: 1437 train, 360 test (20%, stratified).
inline constexpr std::size_t kSklearnDigitsTestSize = 360;
inline constexpr std::uint64_t kSklearnDigitsSplitSeed = 0;

std::filesystem::path sklearn_digits_default_path();
std::string sklearn_digits_install_command();  // "apt-get install -y python3-sklearn"

// All 1,797 images in the file's order. An empty `path` means the default; a
// directory means its digits.csv.gz. Throws DataFileError naming the file
// (and the line) and, when it is missing, the install command.
Dataset load_sklearn_digits(const std::filesystem::path& path = {});
Split sklearn_digits_split(const std::filesystem::path& path = {}, std::uint64_t seed = kSklearnDigitsSplitSeed);

}  // namespace mpverify::data
