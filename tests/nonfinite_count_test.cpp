// record::count_nonfinite (the bit-pattern count of inf and NaN) against the C library's isfinite on the
// decoded values: every 16-bit pattern of fp16 and bf16, and seeded random and special fp32/fp64 values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "formats/encoding.h"
#include "formats/format.h"
#include "record/nonfinite_count.h"

namespace {

using namespace mpverify;

// Every pattern of a 16-bit format, decoded by the format's own decoder (the truth), counted on the bits.
void check_every_16_bit_pattern(const char* format_name, record::FloatPattern pattern, std::uint64_t want_total) {
  const formats::Format f = formats::parse_format(format_name);
  std::vector<std::uint16_t> all(1u << 16);
  std::uint64_t truth = 0;
  for (std::uint32_t b = 0; b < all.size(); ++b) {
    all[b] = static_cast<std::uint16_t>(b);
    truth += !std::isfinite(formats::to_double(f, b));
  }
  // An IEEE half-width format: 2 signs x 2^fraction_bits patterns with every exponent bit set.
  EXPECT_EQ(truth, want_total) << format_name;
  EXPECT_EQ(record::count_nonfinite(all.data(), all.size(), pattern), truth) << format_name;
  // Every prefix length: the vectorized body and the scalar tail agree with the truth on each.
  for (std::size_t n = 0; n < 70; ++n) {
    std::vector<std::uint16_t> part(all.end() - static_cast<std::ptrdiff_t>(n), all.end());  // the top: NaNs
    std::uint64_t want = 0;
    for (const auto b : part) want += !std::isfinite(formats::to_double(f, b));
    EXPECT_EQ(record::count_nonfinite(part.data(), part.size(), pattern), want) << format_name << " n=" << n;
  }
}

TEST(NonfiniteCount, EveryFp16Pattern) { check_every_16_bit_pattern("fp16", record::FloatPattern::fp16, 2 * 1024); }
TEST(NonfiniteCount, EveryBf16Pattern) { check_every_16_bit_pattern("bf16", record::FloatPattern::bf16, 2 * 128); }

template <class T>
std::vector<T> seeded_values(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 rng(seed);
  using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  std::vector<T> v(n);
  const T specials[] = {std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(),
                        std::numeric_limits<T>::quiet_NaN(), -std::numeric_limits<T>::quiet_NaN(),
                        std::numeric_limits<T>::max(), std::numeric_limits<T>::denorm_min(), T(0), -T(0)};
  for (auto& x : v) {
    const auto r = rng();
    x = r % 5 == 0 ? specials[(r >> 8) % 8] : std::bit_cast<T>(static_cast<Bits>(rng()));  // random patterns: NaNs too
  }
  return v;
}

template <class T>
std::uint64_t isfinite_count(const std::vector<T>& v, std::size_t offset = 0) {
  std::uint64_t n = 0;
  for (std::size_t i = offset; i < v.size(); ++i) n += !std::isfinite(v[i]);
  return n;
}

TEST(NonfiniteCount, Fp32AndFp64SeededValues) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const auto f = seeded_values<float>(seed, 1000 + seed);
    const auto d = seeded_values<double>(seed, 1000 + seed);
    ASSERT_GT(isfinite_count(f), 0u);  // the check can fail: each seed has non-finite values
    EXPECT_EQ(record::count_nonfinite(f.data(), f.size(), record::FloatPattern::fp32), isfinite_count(f)) << seed;
    EXPECT_EQ(record::count_nonfinite(d.data(), d.size(), record::FloatPattern::fp64), isfinite_count(d)) << seed;
    // A tensor that starts inside its buffer (a view with an offset).
    EXPECT_EQ(record::count_nonfinite(f.data() + 3, f.size() - 3, record::FloatPattern::fp32), isfinite_count(f, 3));
  }
}

TEST(NonfiniteCount, UnalignedStorageIsReadByteWise) {
  const auto f = seeded_values<float>(7, 257);
  std::vector<unsigned char> bytes(f.size() * sizeof(float) + 1);
  std::memcpy(bytes.data() + 1, f.data(), f.size() * sizeof(float));
  EXPECT_EQ(record::count_nonfinite(bytes.data() + 1, f.size(), record::FloatPattern::fp32), isfinite_count(f));
}

TEST(NonfiniteCount, PatternNames) {
  EXPECT_EQ(record::float_pattern("float32"), record::FloatPattern::fp32);
  EXPECT_EQ(record::float_pattern("fp32"), record::FloatPattern::fp32);
  EXPECT_EQ(record::float_pattern("float64"), record::FloatPattern::fp64);
  EXPECT_EQ(record::float_pattern("float16"), record::FloatPattern::fp16);
  EXPECT_EQ(record::float_pattern("bfloat16"), record::FloatPattern::bf16);
  EXPECT_FALSE(record::float_pattern("float8_e4m3fn").has_value());
  EXPECT_FALSE(record::float_pattern("int32").has_value());
}

}  // namespace
