// What counts as an update and as a lost one (swamping), defined once for
// every path that counts additions w + u: the emulator's array additions,
// optimizers and running sums, the GEMM's accumulation, and the GPU
// counters (header-only so CUDA kernels compile the same lines). The
// AVX-512 kernels evaluate the same predicates on masks, each beside its
// scalar twin, and are tested against this definition through the portable
// paths (native_rounding_test, the GEMM tile property).
//
// An update is an addend u != 0 added to w, both finite. It is lost when w is
// not zero and the rounded result equals w. A u added to w = 0 whose result
// is 0 is not swamping but underflow: u itself rounded to zero, which
// count_rounding counts as underflow_to_zero.
//
// The ratio |w|/|u| alone does not decide it: with round-to-nearest-even to a
// format of precision p, a lost update implies |w|/|u| >= 2^p for a normal w,
// and |w|/|u| > 2^(p+1) implies a lost update for every w; between the two it
// depends on where w sits in its binade (fp16: w = 2047, u = 0.8999 gives
// 2048, kept at a ratio of about 2275). formats::Format's
// lost_update_ratio_needed() and lost_update_ratio_sufficient() give the two.
#pragma once

#include <cfloat>
#include <cmath>

#include "formats/host_device.h"

namespace mpverify::emu {

// u != 0, and both finite (a comparison with DBL_MAX: false for infinities and NaN, in host and device code).
MPVERIFY_HOST_DEVICE inline bool is_update(double w, double u) {
  return u != 0 && fabs(u) <= DBL_MAX && fabs(w) <= DBL_MAX;
}

// An update to a non-zero w whose rounded result is w.
MPVERIFY_HOST_DEVICE inline bool is_lost_update(double w, double u, double result) {
  return is_update(w, u) && w != 0 && result == w;
}

}  // namespace mpverify::emu
