// See exact_oracle.h. Everything here is computed from the format's bit
// fields with long double arithmetic; no function of the emulator is used.
#include "exact_oracle.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

static_assert(std::numeric_limits<long double>::digits == 64 &&
                  std::numeric_limits<long double>::max_exponent == 16384,
              "the oracle needs the x87 80-bit long double (64-bit significand)");

namespace mpverify::oracle {

using formats::Encoding;
using formats::Flags;
using formats::Format;
using formats::Overflow;
using formats::Rounding;
using formats::RoundingContext;
using formats::Tininess;

namespace {

// (s, err) with s + err == a + b exactly (Knuth's TwoSum; valid for any
// binary floating point with round-to-nearest and no overflow).
void two_sum(long double a, long double b, long double& s, long double& err) {
  s = a + b;
  const long double bb = s - a;
  err = (a - (s - bb)) + (b - bb);
}

int sign_of(long double v) { return v > 0 ? 1 : (v < 0 ? -1 : 0); }

// floor(log2(v)) for a positive, finite, normal x87 long double: its biased
// exponent field (bytes 8..9 of the 80-bit layout). Only used to narrow the
// table search; the rounding decisions never depend on it.
int binary_exponent(long double v) {
  unsigned char bytes[sizeof(long double)];
  std::memcpy(bytes, &v, sizeof v);
  const int biased = (bytes[8] | (bytes[9] << 8)) & 0x7FFF;
  return biased - 16383;
}

// The sign of a - q*b, exactly, for a, b > 0 of at most 17 significant bits
// and q = a / b rounded to long double (64 bits). (fmal would do, but glibc's
// software fmal is slow.) Veltkamp-split q = qh + ql with qh of 40 bits and
// ql of at most 24 bits: qh*b (<= 57 bits) and ql*b (<= 41 bits) are exact;
// qh*b is within a factor 2 of a, so a - qh*b is exact (Sterbenz); then
// sign(a - q b) = sign((a - qh b) - ql b) is one exact comparison.
int quotient_residual(long double a, long double b, long double q) {
  const long double c = q * 16777217.0L;  // 2^24 + 1
  const long double qh = c - (c - q);
  const long double ql = q - qh;
  const long double t = a - qh * b;
  const long double u = ql * b;
  return t > u ? 1 : (t < u ? -1 : 0);
}

}  // namespace

Oracle::Oracle(const Format& f) : f_(f) {
  if (f.exponent_bits < 2 || f.exponent_bits > 8 || f.mantissa_bits < 1 || f.width() > 19 || !f.is_signed ||
      !f.has_zero || f.encoding == Encoding::finite)
    throw std::invalid_argument("oracle: unsupported format " + f.name +
                                " (need 2..8 exponent bits, >= 1 fraction bit, width <= 19, a sign bit, a zero "
                                "and a NaN; the OCP MX formats have their own test)");
  m_ = f.mantissa_bits;
  sign_ = 1u << (f.width() - 1);
  exp_ones_ = (1u << f.exponent_bits) - 1;
  frac_mask_ = (1u << m_) - 1;
  switch (f.encoding) {
    case Encoding::ieee:
      max_index_ = (exp_ones_ << m_) - 1;  // exponent all-ones minus one, fraction all ones
      default_nan_ = sign_ | (exp_ones_ << m_) | (1u << (m_ - 1));
      break;
    case Encoding::fn:
      if (m_ < 1) throw std::invalid_argument("oracle: fn encoding needs a fraction");
      max_index_ = (exp_ones_ << m_) | (frac_mask_ - 1);  // S.1111.111 is NaN
      default_nan_ = sign_ | (exp_ones_ << m_) | frac_mask_;
      break;
    case Encoding::fnuz:
      max_index_ = sign_ - 1;  // every positive encoding is finite
      default_nan_ = sign_;    // 1000...0 is the only NaN
      break;
    case Encoding::finite: break;  // refused above
  }
  table_.resize(static_cast<std::size_t>(max_index_) + 2);
  for (std::uint32_t i = 0; i <= max_index_; ++i) table_[i] = magnitude_of_index(i);
  const int top_exponent_field = static_cast<int>(max_index_ >> m_);
  const long double top_ulp = std::ldexp(1.0L, top_exponent_field - f.bias - m_);
  table_[max_index_ + 1] = table_[max_index_] + top_ulp;  // the overflow point
  for (std::size_t i = 1; i < table_.size(); ++i)
    if (!(table_[i - 1] < table_[i]))
      throw std::invalid_argument("oracle: value table of " + f.name + " is not increasing");
  search_.resize(table_.size() - 1);
  for (std::size_t i = 0; i < search_.size(); ++i) {
    search_[i] = static_cast<float>(table_[i]);
    if (static_cast<long double>(search_[i]) != table_[i])
      throw std::invalid_argument("oracle: a value of " + f.name + " is not exactly a float");
  }
  overflow_ = table_.back();
  // bracket_[e - bracket_min_exponent_]: the first table index whose value is
  // >= 2^e, for e from the smallest subnormal's exponent to one past the
  // overflow point's.
  bracket_min_exponent_ = binary_exponent(table_[1]);
  const int bracket_max_exponent = binary_exponent(overflow_) + 1;
  for (int e = bracket_min_exponent_; e <= bracket_max_exponent; ++e)
    bracket_.push_back(static_cast<std::size_t>(
        std::lower_bound(table_.begin(), table_.end(), std::ldexp(1.0L, e)) - table_.begin()));
  scale_.resize(exp_ones_ + 1);
  for (std::uint32_t e = 0; e <= exp_ones_; ++e)
    scale_[e] = std::ldexp(1.0L, static_cast<int>(e == 0 ? 1 : e) - f.bias - m_);
  min_normal_ = std::ldexp(1.0L, 1 - f.bias);
  below_min_normal_ = min_normal_ - std::ldexp(1.0L, 1 - f.bias - (m_ + 1));
}

const Oracle& Oracle::for_format(const Format& f) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<Oracle>> cache;
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& o : cache)
    if (o->f_ == f) return *o;
  cache.push_back(std::make_unique<Oracle>(f));
  return *cache.back();
}

long double Oracle::magnitude_of_index(std::uint32_t index) const {
  const std::uint32_t e = index >> m_;
  const std::uint32_t frac = index & frac_mask_;
  if (e == 0) return std::ldexp(static_cast<long double>(frac), 1 - f_.bias - m_);
  return std::ldexp(static_cast<long double>(frac | (1u << m_)), static_cast<int>(e) - f_.bias - m_);
}

// ---------------------------------------------------------------------------
// Encodings
// ---------------------------------------------------------------------------

std::uint32_t Oracle::zero_bits(bool negative) const {
  if (f_.encoding == Encoding::fnuz) return 0;
  return negative ? sign_ : 0;
}

std::uint32_t Oracle::infinity_bits(bool negative) const {
  return (negative ? sign_ : 0) | (exp_ones_ << m_);
}

std::uint32_t Oracle::nan_bits(bool negative) const {
  switch (f_.encoding) {
    case Encoding::ieee: return (negative ? sign_ : 0) | (exp_ones_ << m_) | (1u << (m_ - 1));
    case Encoding::fn: return (negative ? sign_ : 0) | (exp_ones_ << m_) | frac_mask_;
    case Encoding::fnuz: return sign_;
    case Encoding::finite: break;  // refused by the constructor
  }
  return default_nan_;
}

std::uint32_t Oracle::max_bits(bool negative) const { return (negative ? sign_ : 0) | max_index_; }

bool Oracle::is_nan(std::uint32_t bits) const { return decode(bits).kind == Kind::nan; }
bool Oracle::is_signaling_nan(std::uint32_t bits) const {
  const Operand o = decode(bits);
  return o.kind == Kind::nan && o.signaling;
}
bool Oracle::is_infinity(std::uint32_t bits) const { return decode(bits).kind == Kind::infinity; }

std::uint32_t Oracle::quiet(std::uint32_t bits) const {
  switch (f_.encoding) {
    case Encoding::ieee: return bits | (1u << (m_ - 1));
    case Encoding::fn: return bits;  // one NaN per sign
    case Encoding::fnuz: return sign_;
    case Encoding::finite: break;  // refused by the constructor
  }
  return bits;
}

Oracle::Operand Oracle::decode(std::uint32_t bits) const {
  bits &= (sign_ << 1) - 1;
  Operand o;
  o.negative = (bits & sign_) != 0;
  const std::uint32_t e = (bits >> m_) & exp_ones_;
  const std::uint32_t frac = bits & frac_mask_;
  switch (f_.encoding) {
    case Encoding::ieee:
      if (e == exp_ones_) {
        if (frac == 0) {
          o.kind = Kind::infinity;
        } else {
          o.kind = Kind::nan;
          o.signaling = ((frac >> (m_ - 1)) & 1u) == 0;
        }
        return o;
      }
      break;
    case Encoding::fn:
      if (e == exp_ones_ && frac == frac_mask_) {
        o.kind = Kind::nan;
        return o;
      }
      break;
    case Encoding::fnuz:
      if (bits == sign_) {
        o.kind = Kind::nan;
        return o;
      }
      break;
    case Encoding::finite: break;  // refused by the constructor
  }
  if (e == 0 && (frac == 0 || !f_.subnormals)) {
    o.kind = Kind::zero;
    return o;
  }
  o.kind = Kind::finite;
  // integer significand * 2^(exponent - bias - m): exact (the same as
  // magnitude_of_index, without a libm call per operand).
  o.magnitude = static_cast<long double>(e == 0 ? frac : (frac | (1u << m_))) * scale_[e];
  return o;
}

double Oracle::value(std::uint32_t bits) const {
  const Operand o = decode(bits);
  switch (o.kind) {
    case Kind::nan: return std::nan("");
    case Kind::infinity: return o.negative ? -HUGE_VAL : HUGE_VAL;
    case Kind::zero: return o.negative ? -0.0 : 0.0;
    case Kind::finite: break;
  }
  const double v = static_cast<double>(o.magnitude);
  return o.negative ? -v : v;
}

// ---------------------------------------------------------------------------
// Rounding
// ---------------------------------------------------------------------------

// Decides between the neighbours lo < exact < hi (exact = mag + residual*tiny).
bool Oracle::choose_upper(bool negative, long double mag, int residual, long double lo,
                          long double hi, bool hi_odd, const RoundingContext& rc) const {
  switch (rc.mode) {
    case Rounding::nearest_even:
    case Rounding::nearest_away: {
      const long double mid = (lo + hi) / 2;  // exact: at most p + 2 bits
      const int cmp = mag < mid ? -1 : (mag > mid ? 1 : residual);
      if (cmp < 0) return false;
      if (cmp > 0) return true;
      return rc.mode == Rounding::nearest_away ? true : !hi_odd;
    }
    case Rounding::toward_zero: return false;
    case Rounding::up: return !negative;
    case Rounding::down: return negative;
    case Rounding::odd: return hi_odd;
    case Rounding::stochastic: {
      const int r = std::clamp(rc.random_bits, 1, 32);
      // lo <= mag < 2 lo (or lo == 0) and hi - lo is a power of two: exact.
      const long double frac = (mag - lo) / (hi - lo);
      const long double scaled = std::ldexp(frac, r);
      const long double fl = std::floor(scaled);
      std::uint64_t big_f = static_cast<std::uint64_t>(fl);
      if (residual < 0 && fl == scaled) big_f -= 1;  // exact value just below an integer
      const std::uint64_t one = std::uint64_t{1} << r;
      const std::uint64_t draw = static_cast<std::uint64_t>(rc.random) & (one - 1);
      return big_f + draw >= one;
    }
  }
  return false;
}

Result Oracle::overflow(bool negative, const RoundingContext& rc) const {
  Result r;
  r.flags.raise(Flags::overflow | Flags::inexact);
  const bool to_infinity = rc.mode == Rounding::nearest_even || rc.mode == Rounding::nearest_away ||
                           rc.mode == Rounding::stochastic ||
                           (rc.mode == Rounding::up && !negative) ||
                           (rc.mode == Rounding::down && negative);
  switch (f_.overflow) {
    case Overflow::ieee:
      if (!to_infinity)
        r.bits = max_bits(negative);
      else
        r.bits = f_.encoding == Encoding::ieee ? infinity_bits(negative) : nan_bits(negative);
      break;
    case Overflow::nan: r.bits = to_infinity ? nan_bits(negative) : max_bits(negative); break;
    case Overflow::saturate: r.bits = max_bits(negative); break;
  }
  return r;
}

Result Oracle::round(bool negative, long double mag, int residual, const RoundingContext& rc) const {
  Result r;
  if (mag == 0) {  // an exact zero (callers pass residual 0)
    r.bits = zero_bits(negative);
    return r;
  }
  const std::size_t sentinel = table_.size() - 1;
  if (mag > overflow_ || (mag == overflow_ && residual >= 0))
    return overflow(negative, rc);
  // k: the largest index with table_[k] <= mag, by binary search. To keep
  // the search short and in cache it runs over the compact float copy of the
  // table (the same values, exactly; comparisons in long double), within the
  // entries of mag's binade [2^e, 2^(e+1)) as bracketed at construction.
  // (The overflow point, which may not be a float, is not in that copy.)
  std::size_t k = sentinel;
  if (mag < overflow_) {
    const int e = binary_exponent(mag);
    std::size_t first = 0, last = search_.size();  // k in [first, last)
    if (e < bracket_min_exponent_) {
      last = 1;  // below the smallest subnormal: k = 0
    } else {
      const std::size_t b = static_cast<std::size_t>(e - bracket_min_exponent_);
      first = bracket_[b] - 1;  // entries before bracket_[b] are < 2^e <= mag
      last = std::min<std::size_t>(bracket_[b + 1], search_.size());
    }
    const float* base = search_.data() + first;
    for (std::size_t n = last - first; n > 1;) {
      const std::size_t half = n / 2;
      base = static_cast<long double>(base[half]) <= mag ? base + half : base;
      n -= half;
    }
    k = static_cast<std::size_t>(base - search_.data());
  }
  const std::uint32_t first_normal = 1u << m_;
  std::size_t index;
  bool inexact;
  const long double at_k = entry(k);
  if (at_k == mag && residual == 0) {
    index = k;
    inexact = false;
  } else {
    const std::size_t lo = (at_k == mag && residual < 0) ? k - 1 : k;
    const std::size_t hi = lo + 1;
    const bool up = choose_upper(negative, mag, residual, entry(lo), entry(hi), (hi & 1) != 0, rc);
    index = up ? hi : lo;
    if (index == sentinel) return overflow(negative, rc);
    inexact = true;
  }
  if (inexact) {
    r.flags.raise(Flags::inexact);
    const bool below_min_normal = mag < min_normal_ || (mag == min_normal_ && residual < 0);
    bool tiny = false;
    if (below_min_normal) {
      if (rc.tininess == Tininess::before_rounding) {
        tiny = true;
      } else if (mag < below_min_normal_ || (mag == below_min_normal_ && residual <= 0)) {
        tiny = true;
      } else {
        // Round to p bits with an unbounded exponent: between the p-bit
        // predecessor of min_normal (odd significand) and min_normal (even).
        tiny = !choose_upper(negative, mag, residual, below_min_normal_, min_normal_, false, rc);
      }
    }
    if (tiny) r.flags.raise(Flags::underflow);
  }
  if (!f_.subnormals && index != 0 && index < first_normal) {
    r.bits = zero_bits(negative);
    r.flags.raise(Flags::underflow | Flags::inexact);
    return r;
  }
  r.bits = index == 0 ? zero_bits(negative) : ((negative ? sign_ : 0) | static_cast<std::uint32_t>(index));
  return r;
}

// ---------------------------------------------------------------------------
// Special cases
// ---------------------------------------------------------------------------

Result Oracle::invalid() const {
  Result r;
  r.bits = default_nan_;
  r.flags.raise(Flags::invalid);
  return r;
}

Result Oracle::propagate_nan(std::initializer_list<std::uint32_t> operands) const {
  Result r;
  bool found = false;
  for (std::uint32_t b : operands) {
    const Operand o = decode(b);
    if (o.kind != Kind::nan) continue;
    if (o.signaling) r.flags.raise(Flags::invalid);
    if (!found) {
      r.bits = quiet(b & ((sign_ << 1) - 1));
      found = true;
    }
  }
  return r;
}

Result Oracle::from_nan(bool negative, bool signaling, std::uint64_t top_fraction_bits,
                        int source_fraction_bits) const {
  Result r;
  if (signaling) r.flags.raise(Flags::invalid);
  if (f_.encoding == Encoding::ieee) {
    const std::uint32_t payload =
        static_cast<std::uint32_t>(top_fraction_bits >> (source_fraction_bits - m_));
    r.bits = (negative ? sign_ : 0) | (exp_ones_ << m_) | payload | (1u << (m_ - 1));
  } else {
    r.bits = nan_bits(negative);
  }
  return r;
}

Result Oracle::from_infinity(bool negative) const {
  Result r;
  if (f_.encoding == Encoding::ieee) {
    r.bits = infinity_bits(negative);
    return r;
  }
  if (f_.overflow == Overflow::saturate) {
    r.bits = max_bits(negative);
    r.flags.raise(Flags::overflow | Flags::inexact);
  } else {
    r.bits = nan_bits(negative);
    r.flags.raise(Flags::invalid);
  }
  return r;
}

// ---------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------

Result Oracle::from_double(double x, const RoundingContext& rc) const {
  const std::uint64_t u = std::bit_cast<std::uint64_t>(x);
  const bool negative = (u >> 63) != 0;
  if (std::isnan(x)) {
    const std::uint64_t frac = u & ((std::uint64_t{1} << 52) - 1);
    return from_nan(negative, ((frac >> 51) & 1) == 0, frac, 52);
  }
  if (std::isinf(x)) return from_infinity(negative);
  return round(negative, std::fabs(static_cast<long double>(x)), 0, rc);
}

Result Oracle::from_float(float x, const RoundingContext& rc) const {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const bool negative = (u >> 31) != 0;
  if (std::isnan(x)) {
    const std::uint64_t frac = u & ((1u << 23) - 1);
    return from_nan(negative, ((frac >> 22) & 1) == 0, frac, 23);
  }
  if (std::isinf(x)) return from_infinity(negative);
  return round(negative, std::fabs(static_cast<long double>(x)), 0, rc);
}

// ---------------------------------------------------------------------------
// Arithmetic
// ---------------------------------------------------------------------------

Result Oracle::add_operands(const Operand& x, const Operand& y, std::uint32_t a, std::uint32_t b,
                            const RoundingContext& rc) const {
  if (x.kind == Kind::nan || y.kind == Kind::nan) return propagate_nan({a, b});
  if (x.kind == Kind::infinity && y.kind == Kind::infinity) {
    if (x.negative != y.negative) return invalid();
    return Result{infinity_bits(x.negative), {}};
  }
  if (x.kind == Kind::infinity) return Result{infinity_bits(x.negative), {}};
  if (y.kind == Kind::infinity) return Result{infinity_bits(y.negative), {}};
  const long double sx = x.negative ? -x.magnitude : x.magnitude;
  const long double sy = y.negative ? -y.magnitude : y.magnitude;
  long double s, err;
  two_sum(sx, sy, s, err);
  if (s == 0 && err == 0) {
    const bool negative = x.negative == y.negative ? x.negative : rc.mode == Rounding::down;
    return Result{zero_bits(negative), {}};
  }
  const int residual = err == 0 ? 0 : (sign_of(err) == sign_of(s) ? 1 : -1);
  return round(s < 0, std::fabs(s), residual, rc);
}

Result Oracle::add(std::uint32_t a, std::uint32_t b, const RoundingContext& rc) const {
  return add_operands(decode(a), decode(b), a, b, rc);
}

Result Oracle::sub(std::uint32_t a, std::uint32_t b, const RoundingContext& rc) const {
  Operand y = decode(b);
  y.negative = !y.negative;
  return add_operands(decode(a), y, a, b, rc);
}

Result Oracle::mul(std::uint32_t a, std::uint32_t b, const RoundingContext& rc) const {
  const Operand x = decode(a), y = decode(b);
  if (x.kind == Kind::nan || y.kind == Kind::nan) return propagate_nan({a, b});
  if ((x.kind == Kind::infinity && y.kind == Kind::zero) ||
      (x.kind == Kind::zero && y.kind == Kind::infinity))
    return invalid();
  const bool negative = x.negative != y.negative;
  if (x.kind == Kind::infinity || y.kind == Kind::infinity) return Result{infinity_bits(negative), {}};
  if (x.kind == Kind::zero || y.kind == Kind::zero) return Result{zero_bits(negative), {}};
  // At most 2 * 17 significant bits: exact in long double.
  return round(negative, x.magnitude * y.magnitude, 0, rc);
}

Result Oracle::div(std::uint32_t a, std::uint32_t b, const RoundingContext& rc) const {
  const Operand x = decode(a), y = decode(b);
  if (x.kind == Kind::nan || y.kind == Kind::nan) return propagate_nan({a, b});
  if (x.kind == Kind::infinity && y.kind == Kind::infinity) return invalid();
  if (x.kind == Kind::zero && y.kind == Kind::zero) return invalid();
  const bool negative = x.negative != y.negative;
  if (x.kind == Kind::infinity) return Result{infinity_bits(negative), {}};
  if (y.kind == Kind::infinity) return Result{zero_bits(negative), {}};
  if (x.kind == Kind::zero) return Result{zero_bits(negative), {}};
  if (y.kind == Kind::zero) {
    Result r;
    r.flags.raise(Flags::infinite);
    if (f_.encoding == Encoding::ieee)
      r.bits = infinity_bits(negative);
    else if (f_.overflow == Overflow::saturate)
      r.bits = max_bits(negative);
    else
      r.bits = default_nan_;
    return r;
  }
  const long double q = x.magnitude / y.magnitude;  // correctly rounded to 64 bits
  return round(negative, q, quotient_residual(x.magnitude, y.magnitude, q), rc);
}

Result Oracle::sqrt(std::uint32_t a, const RoundingContext& rc) const {
  const Operand x = decode(a);
  if (x.kind == Kind::nan) return propagate_nan({a});
  if (x.kind == Kind::zero) return Result{zero_bits(x.negative), {}};
  if (x.negative) return invalid();
  if (x.kind == Kind::infinity) return Result{infinity_bits(false), {}};
  const long double s = std::sqrt(x.magnitude);
  const long double rem = std::fma(-s, s, x.magnitude);
  return round(false, s, sign_of(rem), rc);
}

Result Oracle::fma(std::uint32_t a, std::uint32_t b, std::uint32_t c, const RoundingContext& rc) const {
  const Operand x = decode(a), y = decode(b), z = decode(c);
  if (x.kind == Kind::nan || y.kind == Kind::nan) return propagate_nan({a, b, c});
  if ((x.kind == Kind::infinity && y.kind == Kind::zero) ||
      (x.kind == Kind::zero && y.kind == Kind::infinity)) {
    Result r = invalid();  // SoftFloat: even when c is a NaN
    return r;
  }
  if (z.kind == Kind::nan) return propagate_nan({c});
  const bool product_negative = x.negative != y.negative;
  if (x.kind == Kind::infinity || y.kind == Kind::infinity) {
    if (z.kind == Kind::infinity && z.negative != product_negative) return invalid();
    return Result{infinity_bits(product_negative), {}};
  }
  if (z.kind == Kind::infinity) return Result{infinity_bits(z.negative), {}};
  const long double p = x.magnitude * y.magnitude;  // exact (zero when a or b is zero)
  const long double sp = product_negative ? -p : p;
  const long double sc = z.negative ? -z.magnitude : z.magnitude;
  long double s, err;
  two_sum(sp, sc, s, err);
  if (s == 0 && err == 0) {
    const bool negative = product_negative == z.negative ? z.negative : rc.mode == Rounding::down;
    return Result{zero_bits(negative), {}};
  }
  const int residual = err == 0 ? 0 : (sign_of(err) == sign_of(s) ? 1 : -1);
  return round(s < 0, std::fabs(s), residual, rc);
}

}  // namespace mpverify::oracle
