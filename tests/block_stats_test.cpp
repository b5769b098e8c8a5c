// emu/block_stats.h: the statistics the recorders keep of a block quantization, on hand-worked cases.
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "emu/block_stats.h"

namespace {

using namespace mpverify;

// One mxfp8-e4m3 block of 32: amax 3 gives the rceil scale 2^ceil(log2(3 / 448)) = 2^-7; 3 / 2^-7 = 384 is an
// E4M3 value and 1 / 2^-7 = 128 too, so the block is exact except 0.1, whose quotient 12.8 rounds to 13
// (E4M3 spacing 1 in [8, 16)): v = 13 / 128, error 0.1 - 0.1015625 (computed in double as the stats do).
TEST(BlockStats, HandWorkedBlock) {
  std::array<float, 64> x{};
  x[0] = 3.0f;
  x[1] = -1.0f;
  x[2] = 0.1f;
  x[40] = std::nanf("");  // second block: a NaN and zeros, amax 0 (NaN ignored): scale 2^-127
  const std::array<std::size_t, 1> shape{64};
  const emu::BlockQuantized q = emu::block_quantize(x, shape, 0, *emu::find_block_scheme("mxfp8-e4m3"));
  const emu::BlockStats s = emu::block_stats(x, q);
  EXPECT_EQ(s.nonzero_in, 3u);
  EXPECT_EQ(s.counted, 63u);  // every finite input; the NaN does not count
  const double e = static_cast<double>(0.1f) - 13.0 / 128.0;
  EXPECT_EQ(s.signal, 9.0 + 1.0 + static_cast<double>(0.1f) * static_cast<double>(0.1f));
  EXPECT_EQ(s.noise, e * e);
  EXPECT_EQ(s.scale_exponents, (std::map<int, std::uint64_t>{{-127, 1}, {-7, 1}}));
  EXPECT_EQ(s.zero_scales, 0u);
  EXPECT_DOUBLE_EQ(s.sqnr_db(), 10 * std::log10(s.signal / s.noise));
}

TEST(BlockStats, SumsMergeAndTheEdgesOfTheRatio) {
  emu::BlockStats a, b;
  EXPECT_TRUE(std::isnan(a.sqnr_db())) << "nothing counted";
  a.counted = 2;
  a.signal = 4;
  EXPECT_EQ(a.sqnr_db(), std::numeric_limits<double>::infinity()) << "no noise";
  a.scale_exponents = {{3, 2}};
  b.counted = 1;
  b.signal = 1;
  b.noise = 0.5;
  b.nonzero_in = 1;
  b.zero_scales = 4;
  b.scale_exponents = {{3, 1}, {-2, 5}};
  a += b;
  EXPECT_EQ(a.counted, 3u);
  EXPECT_EQ(a.signal, 5.0);
  EXPECT_EQ(a.noise, 0.5);
  EXPECT_EQ(a.nonzero_in, 1u);
  EXPECT_EQ(a.zero_scales, 4u);
  EXPECT_EQ(a.scale_exponents, (std::map<int, std::uint64_t>{{-2, 5}, {3, 3}}));
  EXPECT_DOUBLE_EQ(a.sqnr_db(), 10.0);
}

}  // namespace
