// The one rounding routine every operation ends in.
//
// An operation describes its exact result as `magnitude` (a double, > 0 or an
// exact 0) plus `residual`, the sign of (exact |result| - magnitude): 0 when
// the double is exact, +1 when the exact value is a little larger, -1 when a
// little smaller, always by less than half a double ulp. Because every
// rounding boundary of a Format (its values and the midpoints between them)
// has at most 25 significant bits and lies well inside double's range, no
// boundary can fall strictly between `magnitude` and the exact value, so this
// pair decides every rounding mode exactly (docs/formats.md, "One rounding
// routine").
#pragma once

#include <cstdint>

#include "formats/flags.h"
#include "formats/format.h"
#include "formats/rounding.h"

namespace mpverify::formats {

// Formats without a sign bit: a negative result (but -0) is invalid and gives
// NaN. Formats without zero (e8m0): anything below the smallest value,
// zero included, gives that value in every mode, with underflow and inexact
// (the only value on the zero side; PyTorch's float8_e8m0fnu cast also maps 0
// to 2^-127, and Transformer Engine's scale for an amax of 0 is 2^-127).
std::uint32_t round_pack(const Format& f, bool negative, double magnitude, int residual,
                         const RoundingContext& rc, Flags& flags);

// Signed zero of the format (fnuz and unsigned formats have no negative zero).
// Only for formats with a zero; see zero_result.
std::uint32_t zero_bits(const Format& f, bool negative);

// An exact zero result: zero_bits, or in a format without zero its smallest
// value, with underflow and inexact.
std::uint32_t zero_result(const Format& f, bool negative, Flags& flags);

}  // namespace mpverify::formats
