#include "emu/accumulate.h"

#include <cmath>

#include "formats/arithmetic.h"
#include "formats/encoding.h"

namespace mpverify::emu {

Accumulator::Accumulator(const formats::Format& format, Counters* counters, double start)
    : format_(format), native_(native_format(format)), counters_(counters), sum_(start) {}

namespace detail {

double add_in_format_generic(const formats::Format& format, double sum, double addend, Counters* counters) {
  formats::Flags flags;
  const std::uint32_t bits = formats::sum_to_format(format, sum, addend, {}, flags);
  const double result = formats::to_double(format, bits);
  if (counters) {
    // sum + addend in double is the exact sum or its nearest double, which
    // has the same sign, zero-ness and finiteness: all count_rounding reads
    // besides the flags.
    if (std::isnan(result) && !std::isnan(sum) && !std::isnan(addend)) {
      // inf - inf: the sum itself created the NaN (a NaN "exact value"
      // would read as a NaN coming in).
      counters->elements += 1;
      counters->nan_created += 1;
    } else {
      count_rounding(*counters, format, sum + addend, bits, flags);
    }
    count_update(*counters, sum, addend, result);
  }
  return result;
}

}  // namespace detail

void add_lanes(const formats::Format& format, double* lanes, const double* terms, std::size_t n, Counters* counters,
               LanePath path) {
  const NativeFormat native = native_format(format);
  std::size_t done = 0;
  if (path == LanePath::automatic && native != NativeFormat::none)
    done = detail::add_lanes_avx512(format, native, lanes, terms, n, counters);
  for (std::size_t i = done; i < n; ++i) lanes[i] = add_in_format(format, native, lanes[i], terms[i], counters);
}

double sum_in_format(std::span<const double> terms, const formats::Format& format, Counters* counters) {
  Accumulator acc(format, counters);
  for (double t : terms) acc.add(t);
  return acc.value();
}

}  // namespace mpverify::emu
