// Rounding modes, the tininess rule, and what a rounding needs besides the
// value: the context passed to every operation in this folder.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace mpverify::formats {

enum class Rounding : std::uint8_t {
  nearest_even,  // rne: IEEE default
  toward_zero,   // rtz
  up,            // toward +infinity
  down,          // toward -infinity
  nearest_away,  // rna: ties away from zero
  odd,           // round to odd: truncate, then set the last bit if inexact
  stochastic,    // round up with probability equal to the fractional distance,
                 // resolved to `random_bits` bits (see RoundingContext)
};

// IEEE 754 lets an implementation detect tininess before or after rounding.
// x86 (SSE, F16C) and SoftFloat's 8086-SSE specialisation detect it after
// rounding, so that is the default; ARM and RISC-V detect it before.
enum class Tininess : std::uint8_t { after_rounding, before_rounding };

struct RoundingContext {
  Rounding mode = Rounding::nearest_even;
  Tininess tininess = Tininess::after_rounding;
  // Stochastic rounding: the discarded fraction f in [0, 1) is truncated to
  // `random_bits` bits, F = floor(f * 2^bits), and the value rounds up when
  // F + (random mod 2^bits) >= 2^bits, i.e. with probability F / 2^bits.
  int random_bits = 32;      // 1..32
  std::uint32_t random = 0;  // the draw for this one rounding
};

constexpr Rounding all_roundings[] = {
    Rounding::nearest_even, Rounding::toward_zero,  Rounding::up,        Rounding::down,
    Rounding::nearest_away, Rounding::odd,          Rounding::stochastic};

// Short names used on the command line: rne, rtz, up, down, rna, odd, stochastic.
std::string_view to_string(Rounding r);
std::optional<Rounding> parse_rounding(std::string_view name);

}  // namespace mpverify::formats
