// Exhaustive, bit-exact checks of the fp16 emulator against the x86 hardware
// (F16C conversions, SSE arithmetic), bits and flags: every float input, every
// fp16 pair. The subject is the emulator (scalar and every array path); the
// truth is the instruction. Label: exhaustive.
#include <gtest/gtest.h>

#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "emu/cpu_features.h"
#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "support/parallel.h"
#include "support/x86_oracle.h"

namespace {

using namespace mpverify;
using formats::Flags;
using formats::Rounding;
using test::X86Rounding;

const formats::Format& fp16() {
  static const formats::Format f = formats::parse_format("fp16");
  return f;
}

std::string hex_case(const char* what, std::uint64_t input, std::uint32_t want_bits, Flags want_flags,
                     std::uint32_t got_bits, Flags got_flags) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %08" PRIx64 ": true %04x %02x, emulator %04x %02x", what, input, want_bits,
                want_flags.bits, got_bits, got_flags.bits);
  return buf;
}

X86Rounding to_x86(Rounding r) {
  switch (r) {
    case Rounding::toward_zero: return X86Rounding::toward_zero;
    case Rounding::up: return X86Rounding::up;
    case Rounding::down: return X86Rounding::down;
    default: return X86Rounding::nearest;
  }
}

bool cpu_ok() {
  __builtin_cpu_init();
  return emu::cpu_has_f16c() && __builtin_cpu_supports("avx");  // CPUID for f16c: clang 16 rejects the name
}

// Every float -> fp16 in round-to-nearest-even: the scalar emulator (bits and
// flags) and every array path (bits and counters) against vcvtps2ph.
TEST(ExhaustiveFp16, FloatToFp16EveryInputEveryPath) {
  if (!cpu_ok()) GTEST_SKIP() << "this CPU has no F16C instruction to compare with";
  std::vector<emu::SimdPath> paths = {emu::SimdPath::portable};
  for (auto p : {emu::SimdPath::avx2_f16c, emu::SimdPath::avx512})
    if (emu::path_available(p)) paths.push_back(p);
  emu::QuantizeSpec spec{fp16()};
  test::Mismatches scalar_mismatches, path_mismatches;
  std::atomic<std::uint64_t> compared{0};
  test::parallel_chunks(std::uint64_t{1} << 32, 1 << 16, [&](std::uint64_t begin, std::uint64_t end) {
    const std::size_t n = end - begin;
    // One set of buffers per thread: allocating 512 KB per chunk cost about a tenth of the test in page
    // faults and zeroing.
    thread_local std::vector<float> in;
    thread_local std::vector<std::uint16_t> truth, got;
    in.resize(n);
    truth.resize(n);
    got.resize(n);
    emu::Counters expected_counters;
    for (std::size_t i = 0; i < n; ++i) {
      in[i] = std::bit_cast<float>(static_cast<std::uint32_t>(begin + i));
      const auto t = test::x86_float_to_fp16(in[i], X86Rounding::nearest);
      truth[i] = t.bits;
      emu::count_rounding(expected_counters, fp16(), static_cast<double>(in[i]), t.bits, t.flags);
      Flags flags;
      const std::uint32_t bits = formats::from_float(fp16(), in[i], {}, flags);
      if (bits != t.bits || flags != t.flags)
        scalar_mismatches.add(hex_case("from_float", begin + i, t.bits, t.flags, bits, flags));
    }
    for (auto path : paths) {
      emu::Counters counters;
      emu::encode(in, got, spec, &counters, path);
      for (std::size_t i = 0; i < n; ++i)
        if (got[i] != truth[i])
          path_mismatches.add(std::string(emu::to_string(path)) + " " + hex_case("encode", begin + i, truth[i], {}, got[i], {}));
      if (!(counters == expected_counters))
        path_mismatches.add(std::string(emu::to_string(path)) + " counters differ in chunk at " + std::to_string(begin));
    }
    compared += n;
  });
  EXPECT_EQ(compared.load(), std::uint64_t{1} << 32);
  EXPECT_EQ(scalar_mismatches.count(), 0u) << scalar_mismatches.report();
  EXPECT_EQ(path_mismatches.count(), 0u) << path_mismatches.report();
}

// Every fp16 -> float: the emulator's to_float against vcvtph2ps.
TEST(ExhaustiveFp16, Fp16ToFloatEveryInput) {
  if (!cpu_ok()) GTEST_SKIP() << "this CPU has no F16C instruction to compare with";
  std::uint64_t compared = 0;
  test::Mismatches mismatches;
  for (std::uint32_t h = 0; h < 0x10000; ++h, ++compared) {
    Flags want_flags, got_flags;
    const float want = test::x86_fp16_to_float(static_cast<std::uint16_t>(h), want_flags);
    const float got = formats::to_float(fp16(), h, got_flags);
    if (std::bit_cast<std::uint32_t>(want) != std::bit_cast<std::uint32_t>(got) || want_flags != got_flags)
      mismatches.add(hex_case("to_float", h, std::bit_cast<std::uint32_t>(want), want_flags,
                              std::bit_cast<std::uint32_t>(got), got_flags));
  }
  EXPECT_EQ(compared, 0x10000u);
  EXPECT_EQ(mismatches.count(), 0u) << mismatches.report();
}

// Every pair of fp16 operands, in round-to-nearest-even.
void check_all_pairs(test::X86Op op) {
  test::Mismatches mismatches;
  std::atomic<std::uint64_t> compared{0};
  test::parallel_chunks(std::uint64_t{1} << 32, 1 << 16, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t k = begin; k < end; ++k) {
      const auto a = static_cast<std::uint16_t>(k >> 16), b = static_cast<std::uint16_t>(k);
      const auto t = test::x86_fp16_op(op, a, b, X86Rounding::nearest);
      Flags flags;
      const std::uint32_t bits = op == test::X86Op::add ? formats::add(fp16(), a, b, {}, flags)
                                                         : formats::mul(fp16(), a, b, {}, flags);
      if (bits != t.bits || flags != t.flags)
        mismatches.add(hex_case(op == test::X86Op::add ? "add" : "mul", k, t.bits, t.flags, bits, flags));
    }
    compared += end - begin;
  });
  EXPECT_EQ(compared.load(), std::uint64_t{1} << 32);
  EXPECT_EQ(mismatches.count(), 0u) << mismatches.report();
}

TEST(ExhaustiveFp16, AddEveryPairRne) {
  if (!cpu_ok()) GTEST_SKIP() << "this CPU has no F16C instruction to compare with";
  check_all_pairs(test::X86Op::add);
}

TEST(ExhaustiveFp16, MulEveryPairRne) {
  if (!cpu_ok()) GTEST_SKIP() << "this CPU has no F16C instruction to compare with";
  check_all_pairs(test::X86Op::mul);
}

// The directed modes, which MXCSR also offers: 2^26 random pairs per op and
// mode, and 2^26 random float conversions.
TEST(ExhaustiveFp16, DirectedModesLargeSample) {
  if (!cpu_ok()) GTEST_SKIP() << "this CPU has no F16C instruction to compare with";
  constexpr std::uint64_t kSamples = std::uint64_t{1} << 26;
  for (Rounding mode : {Rounding::toward_zero, Rounding::up, Rounding::down}) {
    const formats::RoundingContext rc{mode};
    test::Mismatches mismatches;
    std::atomic<std::uint64_t> compared{0};
    test::parallel_chunks(kSamples, 1 << 16, [&](std::uint64_t begin, std::uint64_t end) {
      std::mt19937_64 rng(begin * 7 + static_cast<std::uint64_t>(mode));
      for (std::uint64_t k = begin; k < end; ++k) {
        const std::uint64_t r = rng();
        const auto a = static_cast<std::uint16_t>(r), b = static_cast<std::uint16_t>(r >> 16);
        for (auto op : {test::X86Op::add, test::X86Op::mul}) {
          const auto t = test::x86_fp16_op(op, a, b, to_x86(mode));
          Flags flags;
          const std::uint32_t bits = op == test::X86Op::add ? formats::add(fp16(), a, b, rc, flags)
                                                             : formats::mul(fp16(), a, b, rc, flags);
          if (bits != t.bits || flags != t.flags)
            mismatches.add(std::string(formats::to_string(mode)) + " " +
                           hex_case(op == test::X86Op::add ? "add" : "mul", (std::uint64_t{a} << 16) | b, t.bits,
                                    t.flags, bits, flags));
        }
        const float x = std::bit_cast<float>(static_cast<std::uint32_t>(r >> 32));
        const auto t = test::x86_float_to_fp16(x, to_x86(mode));
        Flags flags;
        const std::uint32_t bits = formats::from_float(fp16(), x, rc, flags);
        if (bits != t.bits || flags != t.flags)
          mismatches.add(std::string(formats::to_string(mode)) + " " +
                         hex_case("from_float", r >> 32, t.bits, t.flags, bits, flags));
      }
      compared += end - begin;
    });
    EXPECT_EQ(compared.load(), kSamples);
    EXPECT_EQ(mismatches.count(), 0u) << formats::to_string(mode) << ": " << mismatches.report();
  }
}

}  // namespace
