// Recursive summation in a format: every addition rounded once (RNE), as a
// kernel that keeps its running sum in that format does. Reductions that
// frameworks keep in fp32 (softmax, losses, batch-norm statistics, bias
// gradients) use it with fp32; an fp16 running sum with fp16.
//
// The addend is given exactly, as a double (a product of two values of a
// format of at most 24 significant bits is exact in double), so each step is
// one correct rounding of (sum + addend), like an FMA into the running sum.
#pragma once

#include <span>

#include "emu/counters.h"
#include "formats/format.h"

namespace mpverify::emu {

class Accumulator {
 public:
  // Counts every addition into *counters (when not null): the rounding, and
  // swamping (addend != 0 but the sum did not change).
  explicit Accumulator(const formats::Format& format, Counters* counters = nullptr, double start = 0.0);
  void add(double addend);
  // The running sum: a value of the format (or NaN / an infinity).
  double value() const { return sum_; }

 private:
  formats::Format format_;
  Counters* counters_;
  double sum_;
};

// terms[0] + terms[1] + ... in order, every addition rounded to `format`.
double sum_in_format(std::span<const double> terms, const formats::Format& format, Counters* counters = nullptr);

}  // namespace mpverify::emu
