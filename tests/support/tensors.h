// Seeded test tensors: normal values, rounded to a format, widened to double.
#pragma once

#include <random>
#include <vector>

#include "emu/quantize.h"
#include "formats/format.h"

namespace mpverify::test_support {

inline std::vector<float> normal(std::size_t n, std::mt19937_64& rng, double sd) {
  std::normal_distribution<double> d(0.0, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(rng));
  return v;
}

inline std::vector<float> in_format(std::vector<float> v, const formats::Format& f) {
  emu::quantize(v, v, emu::QuantizeSpec{f});
  return v;
}

inline std::vector<float> to_fp16(std::vector<float> v) { return in_format(std::move(v), formats::parse_format("fp16")); }

inline std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

}  // namespace mpverify::test_support
