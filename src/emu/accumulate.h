// Recursive summation in a format: every addition rounded once (RNE), as a
// kernel that keeps its running sum in that format does. Reductions that
// frameworks keep in fp32 (softmax, losses, batch-norm statistics, bias
// gradients) use it with fp32; an fp16 running sum with fp16.
//
// The addend is given exactly, as a double (a product of two values of a
// format of at most 24 significant bits is exact in double), so each step is
// one correct rounding of (sum + addend), like an FMA into the running sum.
#pragma once

#include <cstddef>
#include <span>

#include "emu/counters.h"
#include "emu/native_rounding.h"
#include "formats/format.h"

namespace mpverify::emu {

// One rounding of the exact sum + addend to `format`, counted as an addition
// (the rounding, and swamping: addend != 0 but the sum did not change) into
// *counters when not null. `native` is native_format(format), looked up once
// by the caller's loop; binary32 and binary16 take the hardware's path where
// it is exact (native_rounding.h), anything else the generic emulator.
namespace detail {
double add_in_format_generic(const formats::Format& format, double sum, double addend, Counters* counters);
// add_lanes on AVX-512 for a native format (accumulate_x86.cpp): handles a
// prefix of whole vectors of 8 and returns its length (0 without AVX-512).
std::size_t add_lanes_avx512(const formats::Format& format, NativeFormat native, double* lanes,
                             const double* terms, std::size_t n, Counters* counters);
// values[i] = round_value(format, values[i]) on AVX-512, the same way (behind round_values).
std::size_t round_lanes_avx512(const formats::Format& format, NativeFormat native, double* values, std::size_t n,
                               Counters* counters);
}

inline double add_in_format(const formats::Format& format, NativeFormat native, double sum, double addend,
                            Counters* counters) {
  NativeResult r;
  if (!sum_natively(native, sum, addend, r)) return detail::add_in_format_generic(format, sum, addend, counters);
  if (counters) {
    count_native_rounding(*counters, sum + addend, r.inexact);
    count_update(*counters, sum, addend, r.value);
  }
  return r.value;
}

class Accumulator {
 public:
  // Counts every addition into *counters (when not null): the rounding, and
  // swamping (addend != 0 but the sum did not change).
  explicit Accumulator(const formats::Format& format, Counters* counters = nullptr, double start = 0.0);
  void add(double addend) { sum_ = add_in_format(format_, native_, sum_, addend, counters_); }
  // The running sum: a value of the format (or NaN / an infinity).
  double value() const { return sum_; }

 private:
  formats::Format format_;
  NativeFormat native_;  // binary32 and binary16 take the hardware's path where it is exact
  Counters* counters_;
  double sum_;
};

// lanes[i] = add_in_format(lanes[i], terms[i]) for i < n: many running sums
// advanced by one step each (block_sum's lanes). `simd` picks the AVX-512
// kernel for binary32 and binary16 where the CPU has it; the results and
// counts are the same either way (native_rounding_test holds them together).
enum class LanePath { automatic, portable };
void add_lanes(const formats::Format& format, double* lanes, const double* terms, std::size_t n, Counters* counters,
               LanePath path = LanePath::automatic);

// terms[0] + terms[1] + ... in order, every addition rounded to `format`.
double sum_in_format(std::span<const double> terms, const formats::Format& format, Counters* counters = nullptr);

}  // namespace mpverify::emu
