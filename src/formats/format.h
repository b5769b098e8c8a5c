// A low-precision floating-point format, described by its bit layout and its
// choices for special values, with the constants that follow from them.
//
// Every format here has 1 sign bit, `exponent_bits` (2..8) and `mantissa_bits`
// (1..23) stored fraction bits, so every finite value is exactly a float and a
// double; that is what lets the arithmetic in this folder compute exact
// intermediates in double (see round_pack.h).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mpverify::formats {

// How the all-ones exponent (and NaN) is encoded.
enum class Encoding : std::uint8_t {
  ieee,  // all-ones exponent: infinity (fraction 0) or NaN; signed zeros
  fn,    // OCP "fn": no infinities; only S.1111.111 is NaN (fp8-e4m3)
  fnuz,  // "fnuz": no infinities, no negative zero; 1000...0 is the only NaN
};

// What a result too large for the format becomes. `ieee` follows IEEE 754
// (infinity, or the largest finite value for the rounding modes that never
// round away from zero); `nan` gives NaN where IEEE would give infinity and
// is the only non-saturating choice for formats without infinities;
// `saturate` always gives the largest finite value of the right sign.
enum class Overflow : std::uint8_t { ieee, saturate, nan };

class FormatError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct Format {
  std::string name;
  int exponent_bits = 0;
  int mantissa_bits = 0;  // stored fraction bits; precision p = mantissa_bits + 1
  int bias = 0;
  bool subnormals = true;  // false: subnormal results flush to zero and
                           // subnormal encodings read as zero
  Encoding encoding = Encoding::ieee;
  Overflow overflow = Overflow::ieee;

  // --- layout -------------------------------------------------------------
  int width() const { return 1 + exponent_bits + mantissa_bits; }
  int precision() const { return mantissa_bits + 1; }
  std::uint32_t sign_mask() const { return 1u << (width() - 1); }
  std::uint32_t exponent_field_max() const { return (1u << exponent_bits) - 1; }
  std::uint32_t mantissa_mask() const { return (1u << mantissa_bits) - 1; }
  std::uint32_t all_bits_mask() const { return width() == 32 ? 0xffffffffu : (1u << width()) - 1; }
  bool has_infinity() const { return encoding == Encoding::ieee; }
  bool has_negative_zero() const { return encoding != Encoding::fnuz; }

  // --- exponent range (unbiased) --------------------------------------------
  int emin() const { return 1 - bias; }  // exponent of the smallest normal
  int emax() const;                      // exponent of the largest finite binade
  // Largest fraction field in the top binade (fn reserves all-ones for NaN).
  std::uint32_t max_fraction_in_top_binade() const;

  // --- derived constants (exact powers of two or sums of them) --------------
  double max_finite() const;
  double min_normal() const;
  double min_subnormal() const;  // == min_normal() when subnormals are off
  double epsilon() const;        // 2^-mantissa_bits: the gap between 1 and the next value
  double unit_roundoff() const;  // 2^-precision: half of epsilon
  // The two bounds on |w|/|u| for a lost update (fl(w + u) == w, u != 0) under
  // round-to-nearest (emu/lost_update.h). Needed: a lost update to a normal w
  // has |w|/|u| >= 2^p. Sufficient: |w|/|u| > 2^(p+1) loses u from every w.
  // Between the two it depends on where w sits in its binade.
  double lost_update_ratio_needed() const;      // 2^p
  double lost_update_ratio_sufficient() const;  // 2^(p+1)

  // Encodings of special values.
  std::uint32_t positive_infinity_bits() const;  // only with has_infinity()
  std::uint32_t max_finite_bits() const;
  std::uint32_t default_nan_bits() const;  // what an invalid operation returns

  // Throws FormatError naming the offending field when the descriptor is
  // inconsistent (e.g. ieee overflow policy on a format without infinities).
  void validate() const;

  friend bool operator==(const Format&, const Format&) = default;
};

// Whether the same bits mean the same values in a and b, and the same results
// come out of the same operations: the same exponent and fraction widths,
// bias, subnormal handling, infinity/NaN encoding and overflow policy. The
// name is not looked at (operator== compares it too): a custom e5m10 is fp16.
bool same_encoding(const Format& a, const Format& b);

// The same values under the same bits (same_encoding but for what rounding does on overflow): what an
// operand's format must be for a tensor-core instruction that reads it.
bool same_values(const Format& a, const Format& b);

// Named presets: fp16, bf16, tf32, fp8-e4m3, fp8-e5m2, fp8-e4m3fnuz,
// fp8-e5m2fnuz.
const std::vector<Format>& presets();

// Parses a preset name or a custom `eXmY` (IEEE encoding, bias 2^(X-1)-1),
// optionally followed by modifiers: `:saturate`, `:nan`, `:ieee` (overflow
// policy), `:ftz` (no subnormals). Throws FormatError with a message that lists
// what is accepted.
Format parse_format(std::string_view text);

// An IEEE-style custom format with `exponent_bits` and `mantissa_bits`.
Format custom_format(int exponent_bits, int mantissa_bits);

std::string_view to_string(Encoding e);
std::string_view to_string(Overflow o);

}  // namespace mpverify::formats
