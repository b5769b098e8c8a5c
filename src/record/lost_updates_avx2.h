// The spacing rule of lost_updates.cpp (swamped_by_spacing), 8 elements at a time with AVX2: the same
// counts, held to the portable loop by record_test (LostUpdatesAvx2.*). Internal to lost_updates.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpverify::record::detail {

struct SpacingCounts {
  std::uint64_t updates = 0, lost = 0;
  std::uint64_t not_a_value = 0;  // counted updates whose w is not a value of the format
  std::size_t done = 0;           // the elements taken (whole vectors of 8 from the start); the caller does the rest
};

// The counts of lost_updates.cpp's count_by_spacing over the first done = n - n % 8 elements, for a format of
// precision p and exponents emin..emax. Call only where fused_avx2_available() (tensor_stats_fused.h: AVX2 and popcnt).
SpacingCounts spacing_avx2(const float* w, const float* u, std::size_t n, int precision, int emin, int emax);

struct RatioCounts {
  std::uint64_t needed = 0, sufficient = 0;  // updates with |w| >= 2^p |u|, and with |w| > 2^(p+1) |u|
  std::size_t done = 0;
};

// lost_update_counts' two ratio counts over the first n - n % 8 elements, in float: 2^p |u| is exact there
// (a power of two times a float) unless it overflows to infinity, and then |w| is below it either way.
RatioCounts ratios_avx2(const float* w, const float* u, std::size_t n, int precision);

}  // namespace mpverify::record::detail
