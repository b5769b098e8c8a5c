// Knuth's TwoSum (TAOCP vol. 2, 4.2.2, Theorem B): for finite doubles a, b
// and s = fl(a + b) also finite, a + b == s + e exactly, where e is what this
// returns. Six additions, no branch, no magnitude test (unlike Dekker's
// FastTwoSum). The one definition used by the emulator's additions and FMA,
// its native-rounding shortcut and the GPU counters; the AVX-512 form beside
// it (two_sum_avx512.h) is the same six operations on vectors.
#pragma once

#include "formats/host_device.h"

namespace mpverify::formats {

MPVERIFY_HOST_DEVICE inline double two_sum_error(double a, double b, double s) {
  const double b_virtual = s - a;
  const double a_virtual = s - b_virtual;
  return (a - a_virtual) + (b - b_virtual);
}

}  // namespace mpverify::formats
