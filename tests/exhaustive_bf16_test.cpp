// Exhaustive checks of bf16: every bf16 -> float, and every float -> bf16 in
// round-to-nearest-even against the classic integer formulation (bits and
// flags derived from the definitions, independently of the emulator).
// Label: exhaustive.
#include <gtest/gtest.h>

#include <bit>
#include <cinttypes>
#include <cstdio>
#include <vector>

#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "support/parallel.h"

namespace {

using namespace mpverify;
using formats::Flags;

const formats::Format& bf16() {
  static const formats::Format f = formats::parse_format("bf16");
  return f;
}

struct Truth {
  std::uint32_t bits;
  Flags flags;
};

// bf16 is the top half of a float. Round to nearest even by adding 0x7fff
// plus the lowest kept bit (carries into the exponent, and into infinity,
// exactly when they should). Flags from their definitions:
//  inexact: a discarded bit is set; overflow: a finite input became infinite;
//  underflow (tininess after rounding): inexact and |x| < 2^-126 - 2^-135,
//  i.e. |x| rounded to 8 significant bits with an unbounded exponent stays
//  below 2^-126 (the midpoint 2^-126 - 2^-135 itself ties to 2^-126, whose
//  last bit is even); in float bits that bound is 0x007fc000.
Truth bf16_truth(std::uint32_t x) {
  Truth t{0, {}};
  const std::uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // NaN: quiet it, keep the top payload bits
    if ((x & 0x00400000u) == 0) t.flags.raise(Flags::invalid);
    t.bits = (x >> 16) | 0x0040u;
    return t;
  }
  if (magnitude == 0x7f800000u) return {x >> 16, {}};
  t.bits = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  if ((x & 0xffffu) != 0) t.flags.raise(Flags::inexact);
  if ((t.bits & 0x7fffu) == 0x7f80u) t.flags.raise(Flags::overflow | Flags::inexact);
  if (t.flags.has(Flags::inexact) && magnitude < 0x007fc000u) t.flags.raise(Flags::underflow);
  return t;
}

TEST(ExhaustiveBf16, Bf16ToFloatEveryInput) {
  std::uint64_t compared = 0;
  test::Mismatches mismatches;
  for (std::uint32_t h = 0; h < 0x10000; ++h, ++compared) {
    Flags flags;
    const float got = formats::to_float(bf16(), h, flags);
    const bool nan = (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0;
    // Widening is exact; NaNs come back quiet, as x86 widens them.
    const std::uint32_t want = (h << 16) | (nan ? 0x00400000u : 0u);
    if (std::bit_cast<std::uint32_t>(got) != want) {
      char buf[80];
      std::snprintf(buf, sizeof buf, "to_float %04x: true %08x, emulator %08x", h, want,
                    std::bit_cast<std::uint32_t>(got));
      mismatches.add(buf);
    }
  }
  EXPECT_EQ(compared, 0x10000u);
  EXPECT_EQ(mismatches.count(), 0u) << mismatches.report();
}

TEST(ExhaustiveBf16, FloatToBf16EveryInputRne) {
  test::Mismatches mismatches;
  std::atomic<std::uint64_t> compared{0};
  const emu::QuantizeSpec spec{bf16()};
  test::parallel_chunks(std::uint64_t{1} << 32, 1 << 16, [&](std::uint64_t begin, std::uint64_t end) {
    const std::size_t n = end - begin;
    thread_local std::vector<float> in;  // per thread, not per chunk: see exhaustive_fp16_test.cpp
    thread_local std::vector<std::uint16_t> encoded;
    in.resize(n);
    encoded.resize(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = std::bit_cast<float>(static_cast<std::uint32_t>(begin + i));
    emu::encode(in, encoded, spec);  // the array routine (portable path for bf16)
    for (std::size_t i = 0; i < n; ++i) {
      const auto x = static_cast<std::uint32_t>(begin + i);
      const Truth t = bf16_truth(x);
      Flags flags;
      const std::uint32_t bits = formats::from_float(bf16(), in[i], {}, flags);
      if (bits != t.bits || flags != t.flags || encoded[i] != t.bits) {
        char buf[120];
        std::snprintf(buf, sizeof buf, "from_float %08x: true %04x %02x, emulator %04x %02x, encode %04x", x,
                      t.bits, t.flags.bits, bits, flags.bits, encoded[i]);
        mismatches.add(buf);
      }
    }
    compared += n;
  });
  EXPECT_EQ(compared.load(), std::uint64_t{1} << 32);
  EXPECT_EQ(mismatches.count(), 0u) << mismatches.report();
}

}  // namespace
