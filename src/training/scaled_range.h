// Where a tensor lands when it is multiplied by a scale and rounded to a
// narrow format, judged from its largest magnitude (amax) and, where known,
// its smallest nonzero one (amin). Used by the replays (training/
// scaler_replay.h) to decide a loss scaler's overflow from a recorded amax and
// to count an FP8 scaling's overflowing and flushed steps.
//
// overflow: the value × scale, rounded to the format (round to nearest even),
//   lies beyond its largest finite value (the format's overflow flag: fp16
//   overflows from 65520 = 65504 + half an ulp up, bf16 from (2 - 2^-8) 2^127,
//   E4M3 above 464, E5M2 from 61440); also whenever the value, the scale or
//   the product is not finite (a recorded inf or NaN is an overflow at any
//   scale).
// zero: a positive value × scale rounds to zero in the format (at or below
//   half its smallest subnormal: fp16 2^-25, E4M3 2^-10, E5M2 2^-17).
//
// product: `exact` rounds the exact product once (a loss scale multiplies the
// loss, and the backward pass produces the scaled gradient directly in the
// gradient format); `fp32` first rounds it to fp32, then to the format, as
// Transformer Engine's cast computes fl32(x · s) before converting to FP8.
#pragma once

#include "formats/format.h"

namespace mpverify::training {

enum class ScaledProduct { exact, fp32 };

struct ScaledFit {
  bool overflow = false;
  bool zero = false;
};

ScaledFit scaled_fit(const formats::Format& format, double value, double scale, ScaledProduct product);

}  // namespace mpverify::training
