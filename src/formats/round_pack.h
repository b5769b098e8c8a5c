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

std::uint32_t round_pack(const Format& f, bool negative, double magnitude, int residual,
                         const RoundingContext& rc, Flags& flags);

// Signed zero of the format (fnuz has no negative zero).
std::uint32_t zero_bits(const Format& f, bool negative);

}  // namespace mpverify::formats
