// The instrumented array routines on small arrays whose counts are worked
// out by hand.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <limits>
#include <vector>

#include "emu/quantize.h"
#include "formats/format.h"

namespace {

using namespace mpverify;

const formats::Format fp16 = formats::parse_format("fp16");

TEST(Quantize, CountsAHandMadeArray) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // 0: zero in; 1: exact; 1e-8: below 2^-25, becomes 0 (underflow, to zero);
  // 1e-6: a subnormal result (underflow); 1e5: overflow to inf; nan, -inf:
  // non-finite in; 1 + 2^-12: inexact only; 2^-24: exact subnormal.
  const std::vector<float> in = {0.0f, 1.0f, 1e-8f, 1e-6f, 1e5f, nan, -inf, 1.0f + 0x1p-12f, 0x1p-24f};
  for (auto path : {emu::SimdPath::portable, emu::SimdPath::avx2_f16c, emu::SimdPath::avx512}) {
    if (!emu::path_available(path)) continue;
    SCOPED_TRACE(std::string(emu::to_string(path)));
    // Repeat the array past the SIMD width so the vector and tail code both run.
    std::vector<float> big;
    for (int r = 0; r < 5; ++r) big.insert(big.end(), in.begin(), in.end());
    std::vector<float> out(big.size());
    emu::Counters c;
    emu::quantize(big, out, emu::QuantizeSpec{fp16}, &c, path);
    EXPECT_EQ(c.elements, 45u);
    EXPECT_EQ(c.zeros_in, 5u);
    EXPECT_EQ(c.nonfinite_in, 10u);
    EXPECT_EQ(c.inexact, 20u);            // 1e-8, 1e-6, 1e5, 1+2^-12
    EXPECT_EQ(c.underflow, 10u);          // 1e-8, 1e-6
    EXPECT_EQ(c.underflow_to_zero, 5u);   // 1e-8
    EXPECT_EQ(c.subnormal, 10u);          // 1e-6 and 2^-24
    EXPECT_EQ(c.overflow, 5u);            // 1e5
    EXPECT_EQ(c.nan_created, 0u);
    EXPECT_EQ(out[4], inf);
    EXPECT_EQ(out[2], 0.0f);
    EXPECT_EQ(out[7], 1.0f);
    // In place (allowed by the header): the counts must read the inputs, not
    // the results already stored over them.
    emu::Counters in_place;
    emu::quantize(big, big, emu::QuantizeSpec{fp16}, &in_place, path);
    EXPECT_EQ(in_place, c);
    for (std::size_t i = 0; i < big.size(); ++i)
      EXPECT_TRUE(big[i] == out[i] || (std::isnan(big[i]) && std::isnan(out[i]))) << i;
  }
}

TEST(Quantize, InPlaceEqualsOutOfPlaceAndOffMeansNoCounting) {
  std::vector<float> a = {1.1f, -2.2f, 3e-7f, 70000.0f, 0.333f}, b(a.size());
  emu::quantize(a, b, emu::QuantizeSpec{fp16});
  emu::quantize(a, a, emu::QuantizeSpec{fp16});
  EXPECT_EQ(a, b);
}

// fp32 output takes a shortcut on the automatic path (float -> binary32 is
// exact); it must give the scalar emulator's bits and counts, NaNs included.
TEST(Quantize, Fp32ShortcutEqualsThePortablePath) {
  std::vector<float> in;
  std::mt19937 rng(11);
  for (int i = 0; i < 100000; ++i) in.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  // the special values, by construction rather than by chance
  for (std::uint32_t bits : {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u, 0x7f7fffffu,
                             0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffbfffffu})
    in.push_back(std::bit_cast<float>(bits));
  const auto fp32 = formats::parse_format("fp32");
  for (auto rounding : {formats::Rounding::nearest_even, formats::Rounding::toward_zero, formats::Rounding::stochastic}) {
    emu::QuantizeSpec spec{fp32, rounding};
    spec.seed = 3;
    std::vector<float> fast(in.size()), slow(in.size());
    emu::Counters c_fast, c_slow;
    emu::quantize(in, fast, spec, &c_fast, emu::SimdPath::automatic);
    emu::quantize(in, slow, spec, &c_slow, emu::SimdPath::portable);
    EXPECT_EQ(c_fast, c_slow);
    EXPECT_GT(c_fast.subnormal, 0u);
    EXPECT_GT(c_fast.nonfinite_in, 0u);
    int differing = 0;
    for (std::size_t i = 0; i < in.size(); ++i)
      differing += std::bit_cast<std::uint32_t>(fast[i]) != std::bit_cast<std::uint32_t>(slow[i]);
    EXPECT_EQ(differing, 0);
    std::vector<float> uncounted(in.size());
    emu::quantize(in, uncounted, spec, nullptr, emu::SimdPath::automatic);
    EXPECT_EQ(0, std::memcmp(uncounted.data(), fast.data(), in.size() * sizeof(float)));
  }
}

TEST(Quantize, BadArgumentsAreRejected) {
  std::vector<float> in(4), out(3);
  std::vector<std::uint16_t> bits(4);
  EXPECT_THROW(emu::quantize(in, out, emu::QuantizeSpec{fp16}), std::invalid_argument);
  EXPECT_THROW(emu::encode(in, bits, emu::QuantizeSpec{formats::parse_format("tf32")}), std::invalid_argument);
  // The SIMD paths only do fp16 round-to-nearest-even; asking for one with
  // another format is an error, not a silent fallback.
  if (emu::path_available(emu::SimdPath::avx2_f16c)) {
    EXPECT_THROW(emu::encode(in, bits, emu::QuantizeSpec{formats::parse_format("bf16")}, nullptr,
                             emu::SimdPath::avx2_f16c),
                 std::invalid_argument);
  }
}

TEST(Quantize, StochasticChunksDrawLikeOneCall) {
  std::vector<float> in(1000);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = 1.0f + static_cast<float>(i) * 0x1p-20f;
  emu::QuantizeSpec spec{fp16, formats::Rounding::stochastic};
  spec.seed = 7;
  std::vector<float> whole(in.size()), parts(in.size());
  emu::quantize(in, whole, spec);
  emu::quantize(std::span(in).first(333), std::span(parts).first(333), spec);
  spec.first_index = 333;
  emu::quantize(std::span(in).subspan(333), std::span(parts).subspan(333), spec);
  EXPECT_EQ(whole, parts);
}

TEST(Swamping, Fp16UpdatesBelowHalfAnUlpAreLost) {
  // w = 1: ulp 2^-10, half ulp 2^-11. u = 2^-12 is lost; u = 2^-11 ties to
  // the even 1.0 and is lost too; u = 3*2^-12 survives; u = 0 is not an update.
  const std::vector<float> w = {1.0f, 1.0f, 1.0f, 1.0f, 1024.0f};
  const std::vector<float> u = {0x1p-12f, 0x1p-11f, 3 * 0x1p-12f, 0.0f, 0.25f};  // 1024: half ulp 0.5
  std::vector<float> out(w.size());
  emu::Counters c;
  emu::add_arrays(w, u, out, emu::QuantizeSpec{fp16}, &c);
  EXPECT_EQ(c.addends_nonzero, 4u);
  EXPECT_EQ(c.swamped, 3u);
  EXPECT_EQ(out[2], 1.0f + 0x1p-10f);
  EXPECT_EQ(c.elements, 5u);
}

TEST(CounterSet, MergesBySite) {
  emu::CounterSet a, b;
  a.at("conv1.grad").underflow_to_zero = 3;
  a.at("fc.weight").swamped = 1;
  b.at("conv1.grad").underflow_to_zero = 4;
  b.at("fc.bias").overflow = 2;
  a.merge(b);
  ASSERT_EQ(a.sites().size(), 3u);
  EXPECT_EQ(a.find("conv1.grad")->underflow_to_zero, 7u);
  EXPECT_EQ(a.total().overflow, 2u);
  EXPECT_EQ(a.total().swamped, 1u);
  EXPECT_EQ(a.find("missing"), nullptr);
}

}  // namespace
