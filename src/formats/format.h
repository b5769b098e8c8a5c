// A low-precision floating-point format, described by its bit layout and its
// choices for special values, with the constants that follow from them.
//
// Every format here has 1 sign bit (or none: `is_signed`), `exponent_bits`
// (2..8) and `mantissa_bits` (0..23) stored fraction bits, so every finite
// value is exactly a float and a double; that is what lets the arithmetic in
// this folder compute exact intermediates in double (see round_pack.h).
//
// The OCP Microscaling (MX v1.0) formats are described by the same fields:
// FP4/FP6 elements are `finite` (no inf, no NaN), NVFP4's UE4M3 block scale
// is fp8-e4m3 without its sign bit, and the E8M0 scale is unsigned, has no
// fraction bits and no zero (exponent field 0 is the value 2^-127).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mpverify::formats {

// How the all-ones exponent (and NaN) is encoded.
enum class Encoding : std::uint8_t {
  ieee,    // all-ones exponent: infinity (fraction 0) or NaN; signed zeros
  fn,      // OCP "fn": no infinities; only S.1111.111 is NaN (fp8-e4m3; unsigned:
           // ue4m3's 0x7f, and e8m0's 0xff, which with no fraction bits is its whole
           // top binade)
  fnuz,    // "fnuz": no infinities, no negative zero; 1000...0 is the only NaN
  finite,  // OCP FP4/FP6: no infinities and no NaN; every pattern is a number, so
           // overflow can only saturate and a NaN input has nowhere to go (invalid)
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
  bool is_signed = true;   // false: no sign bit; a negative input is invalid (NaN)
  bool has_zero = true;    // false (E8M0): exponent field 0 is the binade 2^-bias,
                           // there is no zero and no subnormal, and anything below
                           // the smallest value rounds up to it (underflow)
  Encoding encoding = Encoding::ieee;
  Overflow overflow = Overflow::ieee;

  // --- layout -------------------------------------------------------------
  int width() const { return (is_signed ? 1 : 0) + exponent_bits + mantissa_bits; }
  int precision() const { return mantissa_bits + 1; }
  std::uint32_t sign_mask() const { return is_signed ? 1u << (width() - 1) : 0u; }  // 0: unsigned
  std::uint32_t exponent_field_max() const { return (1u << exponent_bits) - 1; }
  std::uint32_t mantissa_mask() const { return (1u << mantissa_bits) - 1; }
  std::uint32_t all_bits_mask() const { return width() == 32 ? 0xffffffffu : (1u << width()) - 1; }
  bool has_infinity() const { return encoding == Encoding::ieee; }
  bool has_nan() const { return encoding != Encoding::finite; }
  bool has_negative_zero() const { return is_signed && has_zero && encoding != Encoding::fnuz; }

  // --- exponent range (unbiased) --------------------------------------------
  int emin() const { return (has_zero ? 1 : 0) - bias; }  // exponent of the smallest normal
  // Exponent of the largest finite binade. Defined here, like the other
  // accessors the arithmetic calls on every operation: out of line, the calls
  // cost more than the arithmetic of an fp16 add.
  int emax() const {
    const int top = static_cast<int>(exponent_field_max()) - bias;  // the all-ones exponent field
    switch (encoding) {
      case Encoding::ieee: return top - 1;  // all-ones is inf/NaN
      // fn's NaN is the all-ones pattern; with no fraction bits (e8m0) that is the whole top binade.
      case Encoding::fn: return mantissa_bits == 0 ? top - 1 : top;
      case Encoding::fnuz:
      case Encoding::finite: return top;
    }
    return 0;
  }
  // Largest fraction field in the top binade (fn reserves all-ones for NaN;
  // with no fraction bits that is the whole binade, and emax is one lower).
  std::uint32_t max_fraction_in_top_binade() const {
    return encoding == Encoding::fn && mantissa_bits > 0 ? mantissa_mask() - 1 : mantissa_mask();
  }

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
  // Only with has_infinity().
  std::uint32_t positive_infinity_bits() const { return exponent_field_max() << mantissa_bits; }
  std::uint32_t max_finite_bits() const {
    return (static_cast<std::uint32_t>(emax() + bias) << mantissa_bits) | max_fraction_in_top_binade();
  }
  // What an invalid operation returns: the format's default NaN, or for a
  // `finite` format (no NaN) its substitute, +max_finite (with `invalid` raised).
  std::uint32_t default_nan_bits() const;

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

// Named presets of element formats, all signed with a zero: fp16, bf16, tf32,
// fp8-e4m3, fp8-e5m2, fp8-e4m3fnuz, fp8-e5m2fnuz and the OCP MX element
// formats fp4-e2m1, fp6-e2m3, fp6-e3m2.
const std::vector<Format>& presets();
// The block-scale formats: e8m0 (OCP MX) and ue4m3 (NVFP4). Kept apart
// because they are unsigned (and e8m0 has no zero): properties of signed
// arithmetic such as round(-x) == -round(x) do not hold for them.
const std::vector<Format>& scale_presets();
// presets() then scale_presets(): every name parse_format knows but fp32.
const std::vector<Format>& all_presets();

// IEEE binary32 ("fp32"), parsed once: the emulator's paths ask for it on every call.
const Format& fp32();

// Parses a preset name or a custom `eXmY` (IEEE encoding, bias 2^(X-1)-1),
// optionally followed by modifiers: `:saturate`, `:nan`, `:ieee` (overflow
// policy), `:ftz` (no subnormals). Throws FormatError with a message that lists
// what is accepted. `eXmY` is always IEEE-like: e2m1 is not OCP FP4 (see
// namesake_note).
Format parse_format(std::string_view text);

// One line telling an OCP-style preset from the IEEE-like eXmY of the same
// shape (a mix-up that has caused real bugs): for fp4-e2m1, and for e2m1, both
// say "e2m1 is IEEE-like (max 3, inf, NaN); fp4-e2m1 is OCP's (max 6, no inf,
// no NaN)". Empty when f has no such namesake.
std::string namesake_note(const Format& f);

// An IEEE-style custom format with `exponent_bits` and `mantissa_bits`.
Format custom_format(int exponent_bits, int mantissa_bits);

std::string_view to_string(Encoding e);
std::string_view to_string(Overflow o);

}  // namespace mpverify::formats
