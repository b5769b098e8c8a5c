// Seeded parameter initialisation: the same seed gives bitwise the same
// weights on every platform (Philox words turned into uniforms with exact
// arithmetic, data/random.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "nn/layer.h"

namespace mpverify::nn {

// A parameter of n elements, master zeroed; value, grad sized to match.
Parameter make_parameter(std::string name, std::size_t n, ParameterKind kind);
// Uniform on [-bound, bound), rounded to float, from Philox stream `stream` under `seed`.
void fill_uniform(std::span<float> out, double bound, std::uint64_t seed, std::uint64_t stream);
// Zero-mean noise with standard deviation `stddev` (the bell-shaped
// Irwin-Hall draw of data::Draws::noise: DCGAN's N(0, 0.02) initialisation,
// without a libm transcendental).
void fill_noise(std::span<float> out, double stddev, std::uint64_t seed, std::uint64_t stream);

}  // namespace mpverify::nn
