#include "emu/exponent_histogram.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>

namespace mpverify::emu {

std::uint64_t& ExponentHistogram::at(int e) {
  if (e < min_exponent || e > max_exponent)
    throw std::out_of_range("ExponentHistogram: exponent " + std::to_string(e) + " outside [" +
                            std::to_string(min_exponent) + ", " + std::to_string(max_exponent) + "]");
  return bins[static_cast<std::size_t>(e - min_exponent)];
}

std::uint64_t ExponentHistogram::at(int e) const { return const_cast<ExponentHistogram&>(*this).at(e); }

int floor_log2(double v) {
  if (v == 0 || !std::isfinite(v)) throw std::invalid_argument("floor_log2: needs a finite non-zero value");
  int e = 0;
  std::frexp(v, &e);  // |v| = m * 2^e with m in [0.5, 1): exact
  return e - 1;
}

void ExponentHistogram::add(double v) {
  if (std::isnan(v)) ++nans;
  else if (std::isinf(v)) ++infinities;
  else if (v == 0) ++zeros;
  else if (const int e = floor_log2(v); e < min_exponent) ++below_range;
  else if (e > max_exponent) ++above_range;
  else ++bins[static_cast<std::size_t>(e - min_exponent)];
}

void ExponentHistogram::add(std::span<const float> values, float scale) {
  if (scale == 1.0f) return add_unscaled(values);
  const double s = scale;
  for (const float x : values) {
    // The recorders histogram every tensor at every step: read the exponent
    // off the float bits when the exact product is a finite float (always,
    // for a power-of-two scale that keeps it in range), else take add(double).
    const double v = static_cast<double>(x) * s;
    const float f = static_cast<float>(v);
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f) & 0x7fffffffu;
    if (u >= 0x7f800000u || static_cast<double>(f) != v) {
      add(v);
    } else if (u == 0) {
      ++zeros;
    } else {
      // normal: the biased exponent; subnormal: the top bit of the fraction (times 2^-149)
      const int e = u >= 0x00800000u ? static_cast<int>(u >> 23) - 127 : std::bit_width(u) - 1 - 149;
      ++bins[static_cast<std::size_t>(e - min_exponent)];
    }
  }
}

// Scale 1: every product is x itself, so the exponent is read off the float bits alone. Counted by
// biased exponent field first (one increment per element, without a data-dependent branch: zeros, the
// ReLU's half of a tensor, are interleaved at random with normal values and would defeat a branch
// predictor), in four tables so that repeats of a field do not wait on each other's stores. Field 0 holds
// zeros and subnormals, field 255 infinities and NaNs; both are split afterwards, the subnormals (rare)
// by a second look at their elements.
void ExponentHistogram::add_unscaled(std::span<const float> values) {
  std::array<std::array<std::uint64_t, 256>, 4> by_field{};
  std::uint64_t zero_count = 0, nan_count = 0;
  const std::size_t n = values.size();
  auto count = [&](std::size_t table, float x) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x) & 0x7fffffffu;
    ++by_field[table][u >> 23];
    zero_count += u == 0;
    nan_count += u > 0x7f800000u;
  };
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    count(0, values[i]);
    count(1, values[i + 1]);
    count(2, values[i + 2]);
    count(3, values[i + 3]);
  }
  for (; i < n; ++i) count(0, values[i]);
  for (std::size_t field = 1; field < 255; ++field)
    bins[static_cast<std::size_t>(static_cast<int>(field) - 127 - min_exponent)] +=
        by_field[0][field] + by_field[1][field] + by_field[2][field] + by_field[3][field];
  zeros += zero_count;
  nans += nan_count;
  infinities += by_field[0][255] + by_field[1][255] + by_field[2][255] + by_field[3][255] - nan_count;
  if (by_field[0][0] + by_field[1][0] + by_field[2][0] + by_field[3][0] == zero_count) return;
  for (const float x : values) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x) & 0x7fffffffu;
    if (u != 0 && u < 0x00800000u) ++bins[static_cast<std::size_t>(std::bit_width(u) - 1 - 149 - min_exponent)];
  }
}

std::uint64_t ExponentHistogram::total() const {
  return std::accumulate(bins.begin(), bins.end(), std::uint64_t{0}) + zeros + nans + infinities + below_range +
         above_range;
}

ExponentHistogram& ExponentHistogram::operator+=(const ExponentHistogram& o) {
  for (std::size_t i = 0; i < bins.size(); ++i) bins[i] += o.bins[i];
  zeros += o.zeros;
  nans += o.nans;
  infinities += o.infinities;
  below_range += o.below_range;
  above_range += o.above_range;
  return *this;
}

FormatThresholds format_thresholds(const formats::Format& f) {
  FormatThresholds t;
  t.min_subnormal = f.min_subnormal();
  t.min_normal = f.min_normal();
  t.max_finite = f.max_finite();
  t.min_subnormal_exponent = floor_log2(t.min_subnormal);
  t.min_normal_exponent = floor_log2(t.min_normal);
  t.max_finite_exponent = floor_log2(t.max_finite);
  return t;
}

}  // namespace mpverify::emu
