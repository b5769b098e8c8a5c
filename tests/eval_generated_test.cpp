// `mpverify eval --check` on a large set of generated cases: our own
// generator writes TestFloat's line format with the expected results of the
// independent oracle (tests/oracle), as testfloat_gen would, and the built
// program must pass every one. Label: exhaustive.
#include <gtest/gtest.h>

#include <bit>
#include <cstdio>
#include <cmath>
#include <random>
#include <string>

#include "formats/philox.h"
#include "io/testfloat_cases.h"
#include "oracle/exact_oracle.h"
#include "support/run_command.h"

namespace {

using namespace mpverify;
using formats::Rounding;

std::string line(std::initializer_list<std::uint32_t> operands, int width, const oracle::Result& r) {
  std::string s;
  for (auto v : operands) s += io::hex_field(v, width) + " ";
  return s + io::hex_field(r.bits, width) + " " + io::hex_field(r.flags.bits, 8) + "\n";
}

// Runs eval --check on the generated cases; every case must pass.
void expect_pass(const std::string& args, const std::string& cases, std::size_t count) {
  const auto r = test::run_command(std::string(MPVERIFY_BIN) + " eval --check " + args, cases);
  const std::string summary = std::to_string(count) + " passed, 0 failed\n";
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.out.substr(0, 2000);
  EXPECT_TRUE(r.out.ends_with(summary)) << args << "\n" << r.out.substr(0, 2000);
}

const char* tininess_flag(formats::Tininess t) {
  return t == formats::Tininess::after_rounding ? "after" : "before";
}

// Every FP8 pair for each binary op, every operand for sqrt, in every
// deterministic mode and both tininess rules.
TEST(EvalGenerated, Fp8EveryPairEveryOpEveryMode) {
  std::size_t runs = 0;
  for (const char* name : {"fp8-e4m3", "fp8-e5m2"}) {
    const auto f = formats::parse_format(name);
    const auto& truth = oracle::Oracle::for_format(f);
    for (Rounding mode : {Rounding::nearest_even, Rounding::toward_zero, Rounding::up, Rounding::down,
                          Rounding::nearest_away, Rounding::odd}) {
      for (auto tininess : {formats::Tininess::after_rounding, formats::Tininess::before_rounding}) {
        const formats::RoundingContext rc{mode, tininess};
        const std::string args = std::string(" --format ") + name + " --rounding " +
                                 std::string(formats::to_string(mode)) + " --tininess " + tininess_flag(tininess);
        for (const char* op : {"add", "sub", "mul", "div"}) {
          std::string cases;
          for (std::uint32_t a = 0; a < 256; ++a)
            for (std::uint32_t b = 0; b < 256; ++b) {
              const std::string o = op;
              const auto r = o == "add" ? truth.add(a, b, rc)
                             : o == "sub" ? truth.sub(a, b, rc)
                             : o == "mul" ? truth.mul(a, b, rc)
                                          : truth.div(a, b, rc);
              cases += line({a, b}, 8, r);
            }
          expect_pass(std::string("--op ") + op + args, cases, 65536);
          ++runs;
        }
        std::string cases;
        for (std::uint32_t a = 0; a < 256; ++a) cases += line({a}, 8, truth.sqrt(a, rc));
        expect_pass("--op sqrt" + args, cases, 256);
        ++runs;
      }
    }
  }
  EXPECT_EQ(runs, 2u * 6 * 2 * 5);
}

// Random fp16 / bf16 / e5m7 cases for every op and stochastic rounding with
// its seed: case k of the stream uses draw (seed, 0, k), which the generator
// reproduces.
TEST(EvalGenerated, SixteenBitFormatsRandomCasesEveryMode) {
  std::size_t runs = 0;
  for (const char* name : {"fp16", "bf16", "e5m7"}) {
    const auto f = formats::parse_format(name);
    const auto& truth = oracle::Oracle::for_format(f);
    for (Rounding mode : formats::all_roundings) {
      for (const char* op : {"add", "mul", "div", "fma", "from-f32"}) {
        std::mt19937_64 rng(runs + 1);
        std::string cases;
        constexpr std::size_t kCases = 20000;
        for (std::size_t k = 0; k < kCases; ++k) {
          formats::RoundingContext rc{mode};
          rc.random = formats::stochastic_draw(9, 0, k);
          const auto a = static_cast<std::uint32_t>(rng()) & f.all_bits_mask();
          const auto b = static_cast<std::uint32_t>(rng()) & f.all_bits_mask();
          const auto c = static_cast<std::uint32_t>(rng()) & f.all_bits_mask();
          const std::string o = op;
          if (o == "from-f32") {
            const auto x = static_cast<std::uint32_t>(rng());
            const auto r = truth.from_float(std::bit_cast<float>(x), rc);
            cases += io::hex_field(x, 32) + " " + io::hex_field(r.bits, f.width()) + " " +
                     io::hex_field(r.flags.bits, 8) + "\n";
          } else if (o == "fma") {
            cases += line({a, b, c}, f.width(), truth.fma(a, b, c, rc));
          } else {
            cases += line({a, b}, f.width(), o == "add" ? truth.add(a, b, rc) : o == "mul" ? truth.mul(a, b, rc) : truth.div(a, b, rc));
          }
        }
        expect_pass(std::string("--op ") + op + " --format " + name + " --rounding " +
                        std::string(formats::to_string(mode)) + " --seed 9",
                    cases, kCases);
        ++runs;
      }
    }
  }
  EXPECT_EQ(runs, 3u * 7 * 5);
}

}  // namespace

namespace {

using namespace mpverify;
using formats::Rounding;

// The ops the tests above leave out: sub and sqrt in the 16-bit formats,
// from-f64, to-f32 and to-f64 over every bit pattern, and conversions between
// formats (from-FORMAT), in every rounding mode.
TEST(EvalGenerated, RemainingOpsEveryMode) {
  std::size_t runs = 0;
  auto check = [&](const std::string& args, const std::string& cases, std::size_t count) {
    expect_pass(args, cases, count);
    ++runs;
  };
  for (const char* name : {"fp16", "bf16", "e5m7"}) {
    const auto f = formats::parse_format(name);
    const auto& truth = oracle::Oracle::for_format(f);
    const std::uint32_t patterns = f.all_bits_mask() + 1;
    // Signalling NaN (IEEE encodings): top fraction bit clear. Widening one
    // raises invalid and gives a quiet NaN (any NaN matches under --check).
    auto signalling = [&](std::uint32_t b) { return truth.is_nan(b) && !(b & (1u << (f.mantissa_bits - 1))); };
    std::string to32, to64;
    for (std::uint32_t b = 0; b < patterns; ++b) {
      const double v = truth.value(b);
      const std::string flags = signalling(b) ? "10" : "00";
      to32 += io::hex_field(b, f.width()) + " " + io::hex_field(std::bit_cast<std::uint32_t>(static_cast<float>(v)), 32) + " " + flags + "\n";
      to64 += io::hex_field(b, f.width()) + " " + io::hex_field(std::bit_cast<std::uint64_t>(v), 64) + " " + flags + "\n";
    }
    check(std::string("--op to-f32 --format ") + name, to32, patterns);
    check(std::string("--op to-f64 --format ") + name, to64, patterns);
    for (Rounding mode : formats::all_roundings) {
      const std::string args = std::string(" --format ") + name + " --rounding " + std::string(formats::to_string(mode)) + " --seed 3";
      std::mt19937_64 rng(runs + 7);
      std::normal_distribution<double> normal;
      std::string sub, sqrt, f64;
      constexpr std::size_t kCases = 20000;
      for (std::size_t k = 0; k < kCases; ++k) {
        formats::RoundingContext rc{mode};
        rc.random = formats::stochastic_draw(3, 0, k);
        const auto a = static_cast<std::uint32_t>(rng()) & f.all_bits_mask();
        const auto b = static_cast<std::uint32_t>(rng()) & f.all_bits_mask();
        sub += line({a, b}, f.width(), truth.sub(a, b, rc));
        sqrt += line({a}, f.width(), truth.sqrt(a, rc));
        // Doubles spanning far past the format's range in both directions.
        const double x = std::ldexp(normal(rng), static_cast<int>(rng() % 320) - 160);
        const auto r = truth.from_double(x, rc);
        f64 += io::hex_field(std::bit_cast<std::uint64_t>(x), 64) + " " + io::hex_field(r.bits, f.width()) + " " +
               io::hex_field(r.flags.bits, 8) + "\n";
      }
      check("--op sub" + args, sub, kCases);
      check("--op sqrt" + args, sqrt, kCases);
      check("--op from-f64" + args, f64, kCases);
    }
  }
  // Conversions between formats: every source pattern, every mode. The truth
  // rounds the source's exact value; a signalling NaN source raises invalid.
  struct Pair { const char* from; const char* to; };
  for (const Pair& p : {Pair{"bf16", "fp16"}, Pair{"fp16", "fp8-e4m3"}, Pair{"fp16", "bf16"}, Pair{"fp8-e5m2", "fp8-e4m3"}}) {
    const auto from = formats::parse_format(p.from), to = formats::parse_format(p.to);
    const auto& source = oracle::Oracle::for_format(from);
    const auto& target = oracle::Oracle::for_format(to);
    for (Rounding mode : formats::all_roundings) {
      std::string cases;
      const std::uint32_t patterns = from.all_bits_mask() + 1;
      for (std::uint32_t b = 0; b < patterns; ++b) {
        formats::RoundingContext rc{mode};
        rc.random = formats::stochastic_draw(5, 0, b);
        auto r = target.from_double(source.value(b), rc);
        if (source.is_nan(b) && from.encoding == formats::Encoding::ieee && !(b & (1u << (from.mantissa_bits - 1))))
          r.flags.raise(formats::Flags::invalid);
        cases += io::hex_field(b, from.width()) + " " + io::hex_field(r.bits, to.width()) + " " +
                 io::hex_field(r.flags.bits, 8) + "\n";
      }
      check(std::string("--op from-") + p.from + " --format " + p.to + " --rounding " +
                std::string(formats::to_string(mode)) + " --seed 5",
            cases, patterns);
    }
  }
  EXPECT_EQ(runs, 3u * (2 + 7 * 3) + 4u * 7);
}

}  // namespace
