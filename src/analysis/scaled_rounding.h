// What one value becomes when a tensor is scaled by S and cast to a format,
// the way PyTorch's tensor.mul(S).half() does it: the product is computed in
// the tensor's own type (fl32(x * S) for every dtype that is a float32 value:
// f16, bf16, fp8, f32; fl64(x * S) for f64), then rounded once, to nearest
// even, into the format. This is the definition; the fast counting in
// scale_sweep.h is held against it.
//
// Categories of a value x, with v the product and r the rounded result:
//  - zero_in: x is +-0;  nonfinite_in: x is NaN or +-inf (nothing else counted);
//  - underflow_to_zero: x non-zero and finite, r is +-0 (also when v itself
//    is 0, i.e. the product underflowed in the tensor's type);
//  - subnormal: r is a non-zero subnormal of the format;
//  - overflow: x finite and r is infinite or NaN, or the IEEE overflow flag is
//    raised (a saturating format gives its largest value and raises it; fp8-e4m3
//    as PyTorch casts it gives NaN); also when v itself overflowed to inf.
// These are emu::count_rounding's rules applied to the rounding of v, plus the
// two ways the product in the tensor's type can already have lost x.
#pragma once

#include <cstdint>

#include "formats/format.h"

namespace mpverify::analysis {

struct ScaledOutcome {
  bool zero_in = false;
  bool nonfinite_in = false;
  bool underflow_to_zero = false;
  bool subnormal = false;
  bool overflow = false;
  double product = 0;  // v (a float widened to double for float inputs)
};

ScaledOutcome scale_and_round(float x, float scale, const formats::Format& f);
ScaledOutcome scale_and_round(double x, double scale, const formats::Format& f);

// Throws std::invalid_argument unless `scale` is a finite positive float value
// (PyTorch multiplies a float32 tensor by the scalar as a float32).
void check_scale(double scale);

}  // namespace mpverify::analysis
