// Portable random draws for the data module: a sequence of 32-bit words from
// the project's Philox (a pure function of seed, stream and position, so no
// standard-library engine or distribution is involved), turned into uniforms
// and integers with integer and IEEE basic arithmetic only. The same seed
// therefore gives the same bits with every compiler and standard library.
#pragma once

#include <array>
#include <cstdint>

#include "formats/philox.h"

namespace mpverify::data {

class Draws {
 public:
  Draws(std::uint64_t seed, std::uint64_t stream) : seed_(seed), stream_(stream) {}

  // Word `position` of the stream, equal to formats::stochastic_draw(seed,
  // stream, position); the Philox block (four words) is computed once.
  std::uint32_t next_u32() {
    const std::uint64_t block = position_ >> 2;
    if (!have_block_ || block != block_) {
      words_ = formats::philox_block(seed_, stream_, block);
      block_ = block;
      have_block_ = true;
    }
    return words_[position_++ & 3];
  }

  // Uniform on [0, 1) on a grid of 2^-32: the word times 2^-32 is exact in
  // double.
  double uniform() { return static_cast<double>(next_u32()) * 0x1p-32; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

  // Uniform integer in [0, n) for 0 < n <= 2^32 (n = 0 is undefined), exactly uniform (Lemire's
  // multiply-shift with rejection of the biased low products).
  std::uint32_t below(std::uint64_t n) {
    const std::uint64_t bound = n;
    std::uint64_t m = static_cast<std::uint64_t>(next_u32()) * bound;
    if ((m & 0xFFFFFFFFu) < bound) {
      const std::uint64_t threshold = (0x100000000u - bound) % bound;
      while ((m & 0xFFFFFFFFu) < threshold) m = static_cast<std::uint64_t>(next_u32()) * bound;
    }
    return static_cast<std::uint32_t>(m >> 32);
  }

  // Zero-mean, unit-variance, bell-shaped noise: the Irwin-Hall sum of four
  // uniforms (variance 4/12), centred and scaled. Not Gaussian in the tails
  // (|value| <= 2 sqrt(3)), which pixel noise does not need; Box-Muller would
  // need log and cos, whose results differ between libms.
  double noise() {
    const double sum = uniform() + uniform() + uniform() + uniform();
    return (sum - 2.0) * kSqrt3;
  }

  std::uint64_t position() const { return position_; }

 private:
  static constexpr double kSqrt3 = 1.7320508075688772;  // correctly rounded literal
  std::uint64_t seed_, stream_;
  std::uint64_t position_ = 0;
  std::uint64_t block_ = 0;
  bool have_block_ = false;
  std::array<std::uint32_t, 4> words_{};
};

}  // namespace mpverify::data
