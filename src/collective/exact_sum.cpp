#include "collective/exact_sum.h"

#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace mpverify::collective {

namespace {

constexpr int kLowestExponent = -149;  // the accumulator's bit 0
constexpr std::size_t kBlock = 256;     // elements summed together (their accumulators stay in cache)

}  // namespace

bool ExactSum::add(double x) {
  if (!std::isfinite(x)) return false;
  if (x == 0) return true;
  const auto bits = std::bit_cast<std::uint64_t>(x);
  const int field = static_cast<int>((bits >> 52) & 0x7ff);
  std::uint64_t m = bits & ((std::uint64_t{1} << 52) - 1);
  int exponent = field - 1075;  // x = m * 2^exponent
  if (field != 0) m |= std::uint64_t{1} << 52;
  else exponent = -1074;
  while (exponent < kLowestExponent && (m & 1) == 0) {
    m >>= 1;
    ++exponent;
  }
  if (exponent < kLowestExponent)
    throw std::invalid_argument("ExactSum: a value with bits below 2^-149 cannot be added exactly");
  const int position = exponent - kLowestExponent;
  if (position + 53 > 300) throw std::invalid_argument("ExactSum: a value beyond the accumulator's range");
  const std::size_t digit = static_cast<std::size_t>(position / 32);
  const unsigned shift = static_cast<unsigned>(position % 32);
  // m << shift spans up to 85 bits: its low 64 bits and the rest, in three 32-bit pieces.
  const std::uint64_t low = m << shift;
  const std::uint64_t high = shift == 0 ? 0 : m >> (64 - shift);
  const std::int64_t sign = bits >> 63 ? -1 : 1;
  digits_[digit] += sign * static_cast<std::int64_t>(low & 0xffffffffu);
  digits_[digit + 1] += sign * static_cast<std::int64_t>(low >> 32);
  digits_[digit + 2] += sign * static_cast<std::int64_t>(high);
  return true;
}

double ExactSum::value() const {
  // Carry into base-2^32 digits in [0, 2^32) with a signed top digit.
  std::array<std::int64_t, 10> d = digits_;
  for (std::size_t k = 0; k + 1 < d.size(); ++k) {
    const std::int64_t carry = d[k] >> 32;  // arithmetic shift: floor division
    d[k] -= carry * (std::int64_t{1} << 32);
    d[k + 1] += carry;
  }
  const bool negative = d.back() < 0;
  if (negative) {  // negate the two's-complement-like digit string
    std::int64_t borrow = 0;
    for (std::size_t k = 0; k < d.size(); ++k) {
      std::int64_t v = -d[k] - borrow;
      borrow = 0;
      if (k + 1 < d.size() && v < 0) {
        v += std::int64_t{1} << 32;
        borrow = 1;
      }
      d[k] = v;
    }
  }
  // The top three non-zero digits hold at least 65 significant bits: rounded once to long double, then to double.
  std::size_t top = d.size();
  while (top > 0 && d[top - 1] == 0) --top;
  if (top == 0) return 0;
  long double v = 0;
  const std::size_t low = top >= 3 ? top - 3 : 0;
  for (std::size_t k = top; k-- > low;) v = v * 4294967296.0L + static_cast<long double>(d[k]);
  const double magnitude = static_cast<double>(std::ldexp(v, static_cast<int>(32 * low) + kLowestExponent));
  return negative ? -magnitude : magnitude;
}

double format_ulp(const formats::Format& format, double x) {
  const double a = std::fabs(x);
  int e = format.emin();
  if (a >= format.min_normal()) e = std::ilogb(a);
  return std::ldexp(1.0, e - format.mantissa_bits);
}

namespace {

void summarize(ErrorReport& report, std::size_t i, double exact, double error, const formats::Format& format) {
  ErrorSummary& s = report.summary;
  report.error[i] = error;
  ++s.compared;
  const double a = std::fabs(error);
  s.inexact += error != 0;
  if (a > s.max_abs_error) {
    s.max_abs_error = a;
    s.max_abs_index = i;
  }
  s.mean_abs_error += a;
  if (exact != 0) s.max_rel_error = std::max(s.max_rel_error, a / std::fabs(exact));
  s.max_ulp_error = std::max(s.max_ulp_error, a / format_ulp(format, exact));
}

}  // namespace

ErrorReport compare_to_exact(const RankRows& rows, std::span<const float> result, std::uint64_t divisor,
                             const formats::Format& format) {
  if (result.size() != rows.n) throw std::invalid_argument("compare_to_exact: result and rows differ in length");
  if (divisor == 0) throw std::invalid_argument("compare_to_exact: divisor 0");
  ErrorReport report;
  report.error.assign(rows.n, std::numeric_limits<double>::quiet_NaN());
  std::vector<ExactSum> sums(kBlock);
  std::vector<std::uint8_t> finite(kBlock);
  for (std::size_t from = 0; from < rows.n; from += kBlock) {
    const std::size_t count = std::min(kBlock, rows.n - from);
    std::fill(sums.begin(), sums.begin() + static_cast<std::ptrdiff_t>(count), ExactSum{});
    std::fill(finite.begin(), finite.end(), 1);
    for (std::size_t r = 0; r < rows.ranks; ++r) {
      const float* x = rows.row(r).data() + from;
      for (std::size_t i = 0; i < count; ++i) finite[i] &= sums[i].add(x[i]);
    }
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t at = from + i;
      if (!finite[i]) {
        ++report.summary.nonfinite_inputs;
        continue;
      }
      if (!std::isfinite(result[at])) {
        ++report.summary.nonfinite_results;
        continue;
      }
      const double exact = sums[i].value() / static_cast<double>(divisor);
      // divisor * result is exact in double (24 + 13 bits); the difference is exact until value().
      sums[i].add(-static_cast<double>(result[at]) * static_cast<double>(divisor));
      summarize(report, at, exact, -sums[i].value() / static_cast<double>(divisor), format);
    }
  }
  if (report.summary.compared) report.summary.mean_abs_error /= static_cast<double>(report.summary.compared);
  return report;
}

}  // namespace mpverify::collective
