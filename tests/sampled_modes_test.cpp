// Sampled tests of the 16- and 19-bit formats in every rounding mode:
// TestFloat-style operands (biased toward the edges of the exponent and
// significand ranges), compared bit for bit and flag for flag against the
// exact oracle (tests/oracle/). ctest label "exhaustive".
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "formats/arithmetic.h"
#include "formats/format.h"
#include "formats/rounding.h"
#include "oracle/compare.h"
#include "oracle/exact_oracle.h"

namespace {

using mpverify::formats::Encoding;
using mpverify::formats::Format;
using mpverify::formats::parse_format;
using mpverify::formats::Rounding;
using mpverify::formats::RoundingContext;
using mpverify::formats::Tininess;
using mpverify::oracle::Oracle;
using mpverify::oracle::Result;
using mpverify::oracle::testing::hex_bits;
using mpverify::oracle::testing::Lcg;
using mpverify::oracle::testing::Op;
using mpverify::oracle::testing::parallel_for;
using mpverify::oracle::testing::Tally;

constexpr std::uint32_t kPairsPerMode = 1u << 22;    // add, sub, mul, div
constexpr std::uint32_t kTriplesPerMode = 1u << 20;  // fma; also sqrt operands
constexpr std::uint32_t kDoublesPerMode = 1u << 18;  // from_double
constexpr std::uint32_t kFloatsPerMode = 1u << 16;   // from_float
constexpr std::uint32_t kChunks = 64;                // work items for parallel_for

// TestFloat-style operand generator for a format.
class Operands {
 public:
  Operands(const Format& f, const Oracle& o, std::uint64_t seed)
      : f_(f), o_(o), rng_(seed), m_(f.mantissa_bits), sign_(1u << (f.width() - 1)),
        exp_ones_((1u << f.exponent_bits) - 1), frac_mask_((1u << f.mantissa_bits) - 1),
        max_(o.max_finite_bits()) {}

  Lcg& rng() { return rng_; }

  std::uint32_t sign() { return (rng_.next32() & 1) ? sign_ : 0; }

  // Significand patterns: uniform, all ones, zero, single bits, runs of ones
  // from the top or the bottom, near-0 and near-all-ones.
  std::uint32_t fraction() {
    const std::uint32_t r = rng_.below(12);
    const std::uint32_t k = rng_.below(static_cast<std::uint32_t>(m_));
    switch (r) {
      case 0: return 0;
      case 1: return frac_mask_;
      case 2: return 1u << k;
      case 3: return frac_mask_ & ~(1u << k);
      case 4: return (frac_mask_ << k) & frac_mask_;  // ones from the top
      case 5: return frac_mask_ >> k;                 // ones from the bottom
      case 6: return rng_.below(4);
      case 7: return frac_mask_ - rng_.below(4);
      case 8: return (1u << (m_ - 1)) | rng_.below(3);  // just above the midpoint of a binade
      default: return rng_.next32() & frac_mask_;
    }
  }

  // Exponent fields: uniform, the extremes, and around the bias (values near 1).
  std::uint32_t exponent() {
    const std::uint32_t top = f_.encoding == Encoding::ieee ? exp_ones_ - 1 : exp_ones_;
    switch (rng_.below(8)) {
      case 0: return 0;
      case 1: return 1 + rng_.below(2);
      case 2: return top - rng_.below(2);
      case 3: {
        const int e = f_.bias - 3 + static_cast<int>(rng_.below(7));
        return static_cast<std::uint32_t>(std::clamp(e, 0, static_cast<int>(top)));
      }
      default: return rng_.below(top + 1);
    }
  }

  std::uint32_t nan() {
    switch (f_.encoding) {
      case Encoding::ieee: {
        std::uint32_t frac = rng_.next32() & frac_mask_;
        if (frac == 0) frac = 1;
        return sign() | (exp_ones_ << m_) | frac;  // quiet or signalling, random payload
      }
      case Encoding::fn: return sign() | (exp_ones_ << m_) | frac_mask_;
      case Encoding::fnuz: return sign_;
      case Encoding::finite: return sign() | max_;  // no NaN (these formats: exhaustive_small_formats_test)
    }
    return 0;
  }

  std::uint32_t special() {
    switch (rng_.below(6)) {
      case 0: return f_.has_negative_zero() ? sign() : 0;  // zero
      case 1: return f_.encoding == Encoding::ieee ? sign() | (exp_ones_ << m_) : nan();  // infinity
      case 2: return nan();
      case 3: return sign() | (max_ - rng_.below(4));  // near max finite
      case 4: return sign() | ((1u << m_) - 3 + rng_.below(7));  // around min normal
      default: return sign() | (1u + rng_.below(4));  // smallest subnormals
    }
  }

  // One operand.
  std::uint32_t next() {
    const std::uint32_t r = rng_.below(16);
    if (r < 3) return rng_.next32() & ((sign_ << 1) - 1);  // uniform bit pattern
    if (r < 5) return special();
    if (r < 6) return sign() | (rng_.next32() & frac_mask_);  // subnormal (or zero)
    return sign() | (exponent() << m_) | fraction();
  }

  // An operand related to `a`: within a few ulps of +-a, or with a nearby exponent.
  std::uint32_t near(std::uint32_t a) {
    if (o_.is_nan(a) || o_.is_infinity(a)) return next();
    const std::uint32_t mag = a & ~sign_;
    const std::uint32_t s = (rng_.next32() & 1) ? (a & sign_) : ((a & sign_) ^ sign_);
    switch (rng_.below(3)) {
      case 0: {  // a few encodings away (cancellation when the signs differ)
        const std::int64_t d = static_cast<std::int64_t>(rng_.below(7)) - 3;
        const std::int64_t v = std::clamp<std::int64_t>(static_cast<std::int64_t>(mag) + d, 0, max_);
        return s | static_cast<std::uint32_t>(v);
      }
      case 1: {  // exponent within a few binades, random fraction
        const std::int64_t e = static_cast<std::int64_t>(mag >> m_) + static_cast<std::int64_t>(rng_.below(9)) - 4;
        const std::int64_t top = max_ >> m_;
        const std::uint32_t ef = static_cast<std::uint32_t>(std::clamp<std::int64_t>(e, 0, top));
        std::uint32_t v = (ef << m_) | fraction();
        if (v > max_) v = max_;
        return s | v;
      }
      default: {  // exponent about p binades away (sticky bits / lost updates)
        const std::int64_t e = static_cast<std::int64_t>(mag >> m_) - (m_ + 1) + static_cast<std::int64_t>(rng_.below(5)) - 2;
        const std::int64_t top = max_ >> m_;
        const std::uint32_t ef = static_cast<std::uint32_t>(std::clamp<std::int64_t>(e, 0, top));
        std::uint32_t v = (ef << m_) | fraction();
        if (v > max_) v = max_;
        return s | v;
      }
    }
  }

  // A rounding context in `mode`: random tininess rule; stochastic draws with
  // 32 bits of randomness most of the time, fewer otherwise.
  RoundingContext context(Rounding mode) {
    RoundingContext rc;
    rc.mode = mode;
    rc.tininess = (rng_.next32() & 1) ? Tininess::after_rounding : Tininess::before_rounding;
    if (mode == Rounding::stochastic) {
      rc.random_bits = rng_.below(4) == 0 ? 1 + static_cast<int>(rng_.below(31)) : 32;
      rc.random = rng_.next32();
    }
    return rc;
  }

  // A double to convert: uniform bit patterns (mostly far outside the
  // format's range), doubles in and around the range, rounding boundaries
  // (values, midpoints, and their neighbouring doubles), specials.
  double next_double() {
    const double inf = std::numeric_limits<double>::infinity();
    switch (rng_.below(10)) {
      case 0: return std::bit_cast<double>(rng_.next64());
      case 1: {  // anywhere from far below the smallest subnormal to far above max
        const int lo = f_.emin() - m_ - 40, hi = 128 + 40;
        const int e = lo + static_cast<int>(rng_.below(static_cast<std::uint32_t>(hi - lo)));
        const double v = std::ldexp(1.0 + std::ldexp(static_cast<double>(rng_.next64() >> 12), -52), e);
        return (rng_.next32() & 1) ? -v : v;
      }
      case 2:
      case 3: {  // within the format's range (a little beyond at both ends)
        const int lo = f_.emin() - m_ - 3, hi = static_cast<int>(max_ >> m_) - f_.bias + 2;
        const int e = lo + static_cast<int>(rng_.below(static_cast<std::uint32_t>(hi - lo)));
        const double v = std::ldexp(1.0 + std::ldexp(static_cast<double>(rng_.next64() >> 12), -52), e);
        return (rng_.next32() & 1) ? -v : v;
      }
      case 4:
      case 5:
      case 6:
      case 7: {  // a rounding boundary, possibly nudged by a few doubles
        std::uint32_t idx = rng_.below(4) == 0 ? max_ - rng_.below(3) : next() & ~sign_;
        if (idx > max_) idx = max_;
        const double v = static_cast<double>(o_.table_value(idx));
        const double w = static_cast<double>(o_.table_value(idx + 1));  // may be the overflow point
        double x = rng_.below(2) ? (v + w) / 2 : v;
        for (std::uint32_t k = rng_.below(4); k > 0; --k) x = std::nextafter(x, (rng_.next32() & 1) ? inf : 0.0);
        return (rng_.next32() & 1) ? -x : x;
      }
      case 8: {  // beyond the overflow point / below half the smallest subnormal
        const double top = static_cast<double>(o_.overflow_point());
        const double tiny = static_cast<double>(o_.table_value(1));
        const double x = rng_.below(2) ? top * (1.0 + rng_.below(1000) / 64.0)
                                       : tiny * std::ldexp(1.0, -1 - static_cast<int>(rng_.below(60)));
        return (rng_.next32() & 1) ? -x : x;
      }
      default: {
        switch (rng_.below(5)) {
          case 0: return (rng_.next32() & 1) ? -0.0 : 0.0;
          case 1: return (rng_.next32() & 1) ? -inf : inf;
          case 2: return std::bit_cast<double>(0x7FF0000000000000ull | (rng_.next64() & 0x800FFFFFFFFFFFFFull) | 1);
          case 3: return std::numeric_limits<double>::denorm_min();
          default: return -std::numeric_limits<double>::max();
        }
      }
    }
  }

  float next_float() {
    if (rng_.below(4) == 0) return std::bit_cast<float>(rng_.next32());
    const double x = next_double();
    if (std::isnan(x)) return std::bit_cast<float>(0x7F800000u | (rng_.next32() & 0x807FFFFFu) | 1u);
    return static_cast<float>(x);  // the rounding here only moves the input
  }

 private:
  const Format& f_;
  const Oracle& o_;
  Lcg rng_;
  int m_;
  std::uint32_t sign_, exp_ones_, frac_mask_, max_;
};

std::string param_label(const testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

std::uint64_t seed_for(const std::string& format, int op, Rounding mode, std::uint32_t chunk) {
  std::uint64_t h = 1469598103934665603ull;
  for (char ch : format) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  return h ^ (static_cast<std::uint64_t>(op) << 40) ^ (static_cast<std::uint64_t>(mode) << 32) ^ chunk;
}

class SampledModes : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { f_ = parse_format(GetParam()); }
  Format f_;
};

// add, sub, mul, div: 2^22 pairs per operation and rounding mode.
TEST_P(SampledModes, BinaryOps) {
  const Oracle& o = Oracle::for_format(f_);
  Tally tally;
  for (Op op : {Op::add, Op::sub, Op::mul, Op::div}) {
    for (Rounding mode : mpverify::formats::all_roundings) {
      parallel_for(kChunks, [&](std::uint32_t chunk) {
        Operands gen(f_, o, seed_for(GetParam(), static_cast<int>(op), mode, chunk));
        Tally::Counter count(tally);
        for (std::uint32_t i = 0; i < kPairsPerMode / kChunks; ++i) {
          const std::uint32_t a = gen.next();
          const std::uint32_t b = gen.rng().below(4) == 0 ? gen.near(a) : gen.next();
          count.compare_op(op, f_, o, a, b, 0, gen.context(mode));
        }
      });
    }
  }
  EXPECT_EQ(tally.mismatches(), 0u) << tally.report();
  EXPECT_EQ(tally.compared(), 4ull * 7ull * kPairsPerMode);
}

// fma: 2^20 triples per mode, a third with c close to -(a*b) (cancellation).
// sqrt: 2^20 operands per mode, some of them perfect squares and their
// neighbours.
TEST_P(SampledModes, FmaAndSqrt) {
  const Oracle& o = Oracle::for_format(f_);
  const std::uint32_t sign = 1u << (f_.width() - 1);
  Tally tally;
  for (Rounding mode : mpverify::formats::all_roundings) {
    parallel_for(kChunks, [&](std::uint32_t chunk) {
      Operands gen(f_, o, seed_for(GetParam(), 100, mode, chunk));
      Tally::Counter count(tally);
      RoundingContext rne;
      for (std::uint32_t i = 0; i < kTriplesPerMode / kChunks; ++i) {
        const std::uint32_t a = gen.next();
        const std::uint32_t b = gen.rng().below(4) == 0 ? gen.near(a) : gen.next();
        std::uint32_t c;
        switch (gen.rng().below(3)) {
          case 0: {  // c close to -(a*b): massive cancellation
            const std::uint32_t p = o.mul(a, b, rne).bits ^ sign;
            c = gen.near(p);
            if (gen.rng().below(2) == 0) c = p;
            break;
          }
          case 1: c = gen.near(a); break;
          default: c = gen.next(); break;
        }
        count.compare_op(Op::fma, f_, o, a, b, c, gen.context(mode));
      }
    });
    parallel_for(kChunks, [&](std::uint32_t chunk) {
      Operands gen(f_, o, seed_for(GetParam(), 101, mode, chunk));
      Tally::Counter count(tally);
      RoundingContext rne;
      for (std::uint32_t i = 0; i < kTriplesPerMode / kChunks; ++i) {
        std::uint32_t a = gen.next();
        if (gen.rng().below(4) == 0) {  // a square, or within an encoding or two of one
          const std::uint32_t x = gen.next() & ~sign;
          a = o.mul(x, x, rne).bits;
          if (!o.is_nan(a) && !o.is_infinity(a)) a = gen.near(a) & ~sign;
        }
        count.compare_op(Op::sqrt, f_, o, a, 0, 0, gen.context(mode));
      }
    });
  }
  EXPECT_EQ(tally.mismatches(), 0u) << tally.report();
  EXPECT_EQ(tally.compared(), 7ull * 2ull * kTriplesPerMode);
}

std::string double_hex(double x) { return hex_bits(static_cast<std::uint32_t>(std::bit_cast<std::uint64_t>(x) >> 32), 32) +
                                          hex_bits(static_cast<std::uint32_t>(std::bit_cast<std::uint64_t>(x)), 32); }

// from_double and from_float, every mode.
TEST_P(SampledModes, Conversions) {
  const Oracle& o = Oracle::for_format(f_);
  Tally tally;
  for (Rounding mode : mpverify::formats::all_roundings) {
    parallel_for(kChunks, [&](std::uint32_t chunk) {
      Operands gen(f_, o, seed_for(GetParam(), 200, mode, chunk));
      Tally::Counter count(tally);
      for (std::uint32_t i = 0; i < kDoublesPerMode / kChunks; ++i) {
        const double x = gen.next_double();
        const RoundingContext rc = gen.context(mode);
        Result got;
        got.bits = mpverify::formats::from_double(f_, x, rc, got.flags);
        count.compare(f_, "from_double", double_hex(x), rc, o.from_double(x, rc), got);
      }
      for (std::uint32_t i = 0; i < kFloatsPerMode / kChunks; ++i) {
        const float x = gen.next_float();
        const RoundingContext rc = gen.context(mode);
        Result got;
        got.bits = mpverify::formats::from_float(f_, x, rc, got.flags);
        count.compare(f_, "from_float", hex_bits(std::bit_cast<std::uint32_t>(x), 32), rc, o.from_float(x, rc), got);
      }
    });
  }
  EXPECT_EQ(tally.mismatches(), 0u) << tally.report();
  EXPECT_EQ(tally.compared(), 7ull * (kDoublesPerMode + kFloatsPerMode));
}

INSTANTIATE_TEST_SUITE_P(Formats, SampledModes, testing::Values("fp16", "bf16", "tf32", "e5m7"), param_label);

// Variants of the policies (saturation, NaN on overflow, flush to zero) at a
// sixteenth of the volume.
class SampledModesVariants : public testing::TestWithParam<std::string> {};

TEST_P(SampledModesVariants, AllOps) {
  const Format f = parse_format(GetParam());
  const Oracle& o = Oracle::for_format(f);
  Tally tally;
  constexpr std::uint32_t kPerMode = kPairsPerMode / 16;
  for (Op op : {Op::add, Op::sub, Op::mul, Op::div, Op::sqrt, Op::fma}) {
    for (Rounding mode : mpverify::formats::all_roundings) {
      parallel_for(kChunks, [&](std::uint32_t chunk) {
        Operands gen(f, o, seed_for(GetParam(), 300 + static_cast<int>(op), mode, chunk));
        Tally::Counter count(tally);
        for (std::uint32_t i = 0; i < kPerMode / kChunks; ++i) {
          const std::uint32_t a = gen.next();
          const std::uint32_t b = gen.rng().below(4) == 0 ? gen.near(a) : gen.next();
          const std::uint32_t c = gen.rng().below(2) == 0 ? gen.near(a) : gen.next();
          count.compare_op(op, f, o, a, b, c, gen.context(mode));
        }
        for (std::uint32_t i = 0; i < kPerMode / kChunks / 16; ++i) {
          const double x = gen.next_double();
          const RoundingContext rc = gen.context(mode);
          Result got;
          got.bits = mpverify::formats::from_double(f, x, rc, got.flags);
          count.compare(f, "from_double", double_hex(x), rc, o.from_double(x, rc), got);
        }
      });
    }
  }
  EXPECT_EQ(tally.mismatches(), 0u) << tally.report();
  EXPECT_EQ(tally.compared(), 6ull * 7ull * (kPerMode + kPerMode / 16));
}

INSTANTIATE_TEST_SUITE_P(Formats, SampledModesVariants,
                         testing::Values("fp16:saturate", "fp16:ftz", "bf16:nan", "e5m7:ftz:saturate", "e2m16",
                                         "e8m10:ftz"),
                         param_label);

}  // namespace
