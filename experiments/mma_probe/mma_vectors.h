#pragma once
// Seeded dot-product cases that separate the tensor-core models: not only typical data but the places
// where the models' rules differ (alignment on e_a + e_b, the zero exponent, truncation, the split into
// halves, the output rounding, overflow and NaN). Case i belongs to kind i % kMmaCaseKinds.
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "emu/mma_model.h"

namespace mpverify::experiments {

struct MmaCase {
  std::vector<std::uint32_t> a, b;  // K operand bits each
  std::uint32_t c = 0;              // the accumulator's bits
};

inline constexpr int kMmaCaseKinds = 8;

// wide (every finite encoding), typical (exponents -3..3), cancelling (the second half negates the first),
// c dominating, large significands (products >= 2), tiny (near the formats' smallest), near overflow,
// special (a NaN, an infinity or inf * 0).
std::string_view mma_case_kind(int kind);

std::vector<MmaCase> mma_cases(const emu::MmaModel& m, int K, std::size_t n, std::uint64_t seed);

}  // namespace mpverify::experiments
