// Correctly rounded conversions and arithmetic in any Format, with IEEE flags.
//
// Each operation computes its exact result (or the nearest double plus the
// sign of what is left over) and rounds it once with round_pack(); one
// operation per file, as in Berkeley SoftFloat. Implementation-defined choices
// follow SoftFloat's 8086-SSE specialisation (what x86 hardware does):
//  - tininess after rounding by default (RoundingContext::tininess);
//  - a NaN operand propagates: the first NaN among the operands, quieted;
//    a signalling NaN raises `invalid`;
//  - an invalid operation returns the format's default NaN (sign set).
#pragma once

#include <cstdint>

#include "formats/flags.h"
#include "formats/format.h"
#include "formats/rounding.h"

namespace mpverify::formats {

// --- conversions into a format (one rounding) -------------------------------
std::uint32_t from_double(const Format& f, double x, const RoundingContext& rc, Flags& flags);
std::uint32_t from_float(const Format& f, float x, const RoundingContext& rc, Flags& flags);
// Between two formats of this library.
std::uint32_t convert(const Format& from, std::uint32_t bits, const Format& to,
                      const RoundingContext& rc, Flags& flags);

// x + y, rounded once to f, for any doubles whose finite sum cannot overflow
// double (e.g. two floats, or a product of two format values plus a third).
// NaNs and infinities follow IEEE 754: the first NaN propagates quieted,
// inf - inf is invalid, inf + finite is that infinity. add() and the array
// and GEMM routines all end here.
std::uint32_t sum_to_format(const Format& f, double x, double y, const RoundingContext& rc, Flags& flags);

// --- arithmetic (operands and result in format f) ---------------------------
std::uint32_t add(const Format& f, std::uint32_t a, std::uint32_t b, const RoundingContext& rc, Flags& flags);
std::uint32_t sub(const Format& f, std::uint32_t a, std::uint32_t b, const RoundingContext& rc, Flags& flags);
std::uint32_t mul(const Format& f, std::uint32_t a, std::uint32_t b, const RoundingContext& rc, Flags& flags);
std::uint32_t div(const Format& f, std::uint32_t a, std::uint32_t b, const RoundingContext& rc, Flags& flags);
std::uint32_t sqrt(const Format& f, std::uint32_t a, const RoundingContext& rc, Flags& flags);
// a * b + c with a single rounding.
std::uint32_t fma(const Format& f, std::uint32_t a, std::uint32_t b, std::uint32_t c,
                  const RoundingContext& rc, Flags& flags);

}  // namespace mpverify::formats
