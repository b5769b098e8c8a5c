// Recursive summation in a format (emu::Accumulator): hand-worked sums.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "emu/accumulate.h"

namespace {

using namespace mpverify;

TEST(Accumulator, Fp16RunningSumSwampsSmallAddends) {
  // fp16 has 11 significant bits: at 2048 its spacing is 2, so 2048 + 1 is a
  // tie that rounds to even, 2048: each of the three 1s is lost.
  emu::Counters c;
  const std::vector<double> terms = {2048, 1, 1, 1};
  EXPECT_EQ(emu::sum_in_format(terms, formats::parse_format("fp16"), &c), 2048.0);
  EXPECT_EQ(c.elements, 4u);
  EXPECT_EQ(c.addends_nonzero, 4u);
  EXPECT_EQ(c.swamped, 3u);
  EXPECT_EQ(c.inexact, 3u);
  // In fp32 the same sum is exact.
  emu::Counters c32;
  EXPECT_EQ(emu::sum_in_format(terms, formats::parse_format("fp32"), &c32), 2051.0);
  EXPECT_EQ(c32.swamped, 0u);
  EXPECT_EQ(c32.inexact, 0u);
}

TEST(Accumulator, EachStepIsOneRoundingOfTheExactSum) {
  // 1 + 2^-11 + 2^-11 in fp16: 1 + 2^-11 is a tie, rounds to 1 (even); twice.
  // A wider intermediate would give 1 + 2^-10 exactly.
  const std::vector<double> terms = {1.0, 0x1p-11, 0x1p-11};
  EXPECT_EQ(emu::sum_in_format(terms, formats::parse_format("fp16")), 1.0);
  // The addend is taken exactly: 1 + (2^-11 + 2^-30) rounds up, to 1 + 2^-10.
  emu::Accumulator acc(formats::parse_format("fp16"), nullptr, 1.0);
  acc.add(0x1p-11 + 0x1p-30);
  EXPECT_EQ(acc.value(), 1.0 + 0x1p-10);
}

TEST(Accumulator, OverflowAndNonFiniteAreCounted) {
  emu::Counters c;
  emu::Accumulator acc(formats::parse_format("fp16"), &c);
  acc.add(60000);
  acc.add(10000);  // 70000 > 65504 + half an ulp: overflows to infinity
  EXPECT_TRUE(std::isinf(acc.value()));
  EXPECT_EQ(c.overflow, 1u);
  acc.add(-INFINITY);  // inf - inf: NaN created
  EXPECT_TRUE(std::isnan(acc.value()));
  EXPECT_EQ(c.nan_created, 1u);
}

}  // namespace
