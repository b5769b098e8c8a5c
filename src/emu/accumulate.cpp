#include "emu/accumulate.h"

#include <cmath>

#include "formats/arithmetic.h"
#include "formats/encoding.h"

namespace mpverify::emu {

Accumulator::Accumulator(const formats::Format& format, Counters* counters, double start)
    : format_(format), counters_(counters), sum_(start) {}

void Accumulator::add(double addend) {
  formats::Flags flags;
  const std::uint32_t bits = formats::sum_to_format(format_, sum_, addend, {}, flags);
  const double result = formats::to_double(format_, bits);
  if (counters_) {
    // sum_ + addend in double is the exact sum or its nearest double, which
    // has the same sign, zero-ness and finiteness: all count_rounding reads
    // besides the flags.
    if (std::isnan(result) && !std::isnan(sum_) && !std::isnan(addend)) {
      // inf - inf: the sum itself created the NaN (a NaN "exact value"
      // would read as a NaN coming in).
      counters_->elements += 1;
      counters_->nan_created += 1;
    } else {
      count_rounding(*counters_, format_, sum_ + addend, bits, flags);
    }
    if (addend != 0 && std::isfinite(addend) && std::isfinite(sum_)) {
      counters_->addends_nonzero += 1;
      counters_->swamped += result == sum_;
    }
  }
  sum_ = result;
}

double sum_in_format(std::span<const double> terms, const formats::Format& format, Counters* counters) {
  Accumulator acc(format, counters);
  for (double t : terms) acc.add(t);
  return acc.value();
}

}  // namespace mpverify::emu
