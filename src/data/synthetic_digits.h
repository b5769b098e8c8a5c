// A seeded, built-in stand-in for a digits data set: ten procedurally drawn
// stroke patterns, the zero-setup data for quick training runs and tests
// (`--data synthetic`). Nothing is read from disk.
//
// Classes (a shape in a unit frame, then varied per image):
//   0 ring      1 vertical bar   2 horizontal bar   3 diagonal "/"   4 plus "+"
//   5 cross "x" 6 "L"            7 "T"              8 triangle       9 square
// Each image draws its class uniformly, jitters every vertex of the shape
// (hand-drawn wobble), rotates it by up to about +-17 degrees, scales it
// (with some aspect change), shifts it by up to 8% of the image, picks a
// stroke thickness and a brightness, renders it with a one-pixel box-filter
// anti-aliasing, adds pixel noise, and clamps to [0, 1]. Rotations are kept
// well under the 45 degrees that separate the bars, "/", "+" and "x", so every
// class stays distinct; a small CNN should learn it nearly perfectly, while a
// nearest-class-mean classifier on raw pixels is far from perfect.
//
// Determinism: the same options give bitwise the same data on every platform.
// Random words come from the project's Philox (data/random.h); the geometry
// uses only +, -, *, / and sqrt on IEEE doubles, all correctly rounded, with
// no contraction (the project builds with -ffp-contract=off) and no libm
// transcendental: rotations use the rational form cos = (1 - t^2)/(1 + t^2),
// sin = 2t/(1 + t^2) of a uniform t, and the ring's vertices come from a
// table of literals. Assumed: double is IEEE binary64 evaluated without excess
// precision (true of every SSE2/AArch64 target; not of x87).
//
// Example i of the training set uses Philox stream (1 << 48) + i and example i
// of the test set stream (2 << 48) + i, so the two sets never share draws and
// a set's first k examples do not depend on its size.
#pragma once

#include <cstddef>
#include <cstdint>

#include "data/dataset.h"

namespace mpverify::data {

struct SyntheticOptions {
  std::uint64_t seed = 0;
  std::size_t train_size = 8000;
  std::size_t test_size = 2000;
  int image_size = 28;  // height = width; the shapes scale with it
  int classes = 10;     // the first `classes` patterns above, 1..10
};

inline constexpr int kSyntheticPatterns = 10;

// Both sets have channels = 1, height = width = image_size. Throws
// std::invalid_argument for classes outside [1, 10], image_size outside
// [8, 1024], or a size >= 2^48.
Split synthetic_digits(const SyntheticOptions& o);

}  // namespace mpverify::data
