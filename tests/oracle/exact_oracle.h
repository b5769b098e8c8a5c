// An independent "true" oracle for the low-precision formats (TestFloat style).
//
// The emulator in src/formats/ rounds by manipulating the bits of doubles.
// This oracle deliberately works another way, so that the two can be held
// against each other:
//  - every finite non-negative value of the format is enumerated once, in
//    encoding order, into a sorted table of `long double` (x87 80-bit, 64-bit
//    significand), computed from the bit fields with ldexpl; one extra entry,
//    the "overflow point", is the value the next encoding after the largest
//    finite one would have with an unbounded exponent;
//  - an exact result is described by a `long double` plus the sign of what is
//    left over (TwoSum for sums, fmal remainders for quotients and square
//    roots; products are exact);
//  - rounding binary-searches the table for the two neighbours and decides
//    between them by mode, using the table index parity for "even"/"odd".
//
// Only the plain data fields and the inline layout accessors of
// formats::Format are used; nothing of the emulator is called.
//
// Implementation-defined choices follow Berkeley SoftFloat's 8086-SSE
// specialisation (x86 behaviour), as the emulator documents:
//  - a NaN operand propagates: the first NaN (a before b before c), quieted;
//    a signalling NaN anywhere raises `invalid`;
//  - invalid operations return the default NaN (sign set, quiet);
//  - 0 * inf + c is invalid even when c is a NaN;
//  - tininess is detected after rounding unless the context says otherwise.
// Formats up to 19 bits wide are supported (fp16, bf16, tf32, fp8, eXmY).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "formats/flags.h"
#include "formats/format.h"
#include "formats/rounding.h"

namespace mpverify::oracle {

struct Result {
  std::uint32_t bits = 0;
  formats::Flags flags{};
  friend bool operator==(const Result&, const Result&) = default;
};

class Oracle {
 public:
  // Builds the value table eagerly; afterwards the object is immutable and
  // may be shared between threads. Throws std::invalid_argument for formats
  // wider than 19 bits or with an inconsistent layout.
  explicit Oracle(const formats::Format& f);

  // A process-wide cache: one Oracle per distinct Format (thread-safe).
  static const Oracle& for_format(const formats::Format& f);

  const formats::Format& format() const { return f_; }

  // --- conversions (one rounding) -------------------------------------------
  Result from_double(double x, const formats::RoundingContext& rc) const;
  Result from_float(float x, const formats::RoundingContext& rc) const;

  // --- arithmetic -------------------------------------------------------------
  Result add(std::uint32_t a, std::uint32_t b, const formats::RoundingContext& rc) const;
  Result sub(std::uint32_t a, std::uint32_t b, const formats::RoundingContext& rc) const;
  Result mul(std::uint32_t a, std::uint32_t b, const formats::RoundingContext& rc) const;
  Result div(std::uint32_t a, std::uint32_t b, const formats::RoundingContext& rc) const;
  Result sqrt(std::uint32_t a, const formats::RoundingContext& rc) const;
  Result fma(std::uint32_t a, std::uint32_t b, std::uint32_t c,
             const formats::RoundingContext& rc) const;

  // The value of an encoding (NaN for NaNs, +-inf for infinities; subnormal
  // encodings read as signed zero when the format has no subnormals).
  double value(std::uint32_t bits) const;

  // Rounds the exact value (negative ? -1 : 1) * (magnitude + tiny), where
  // the sign of `tiny` is `residual` (0: magnitude is exact; +1: the exact
  // magnitude is a little larger; -1: a little smaller; "a little" = less
  // than half an ulp of the long double). magnitude >= 0.
  Result round(bool negative, long double magnitude, int residual,
               const formats::RoundingContext& rc) const;

  // --- introspection (for tests) ----------------------------------------------
  // Number of finite non-negative encodings (table entries without the
  // overflow point); entry i is the value of encoding i.
  std::size_t finite_count() const { return table_.size() - 1; }
  long double table_value(std::size_t i) const { return table_[i]; }
  long double overflow_point() const { return table_.back(); }
  std::uint32_t max_finite_bits() const { return max_index_; }
  std::uint32_t default_nan() const { return default_nan_; }
  std::uint32_t quiet(std::uint32_t nan_bits) const;
  bool is_nan(std::uint32_t bits) const;
  bool is_signaling_nan(std::uint32_t bits) const;
  bool is_infinity(std::uint32_t bits) const;

 private:
  enum class Kind : std::uint8_t { zero, finite, infinity, nan };
  struct Operand {
    Kind kind = Kind::zero;
    bool negative = false;
    bool signaling = false;
    long double magnitude = 0.0L;
  };

  Operand decode(std::uint32_t bits) const;
  long double magnitude_of_index(std::uint32_t index) const;  // with subnormals
  bool choose_upper(bool negative, long double mag, int residual, long double lo, long double hi,
                    bool hi_odd, const formats::RoundingContext& rc) const;
  Result overflow(bool negative, const formats::RoundingContext& rc) const;
  Result invalid() const;
  Result propagate_nan(std::initializer_list<std::uint32_t> operands) const;
  Result add_operands(const Operand& x, const Operand& y, std::uint32_t a, std::uint32_t b,
                      const formats::RoundingContext& rc) const;
  std::uint32_t zero_bits(bool negative) const;
  std::uint32_t infinity_bits(bool negative) const;
  std::uint32_t nan_bits(bool negative) const;
  std::uint32_t max_bits(bool negative) const;
  Result from_nan(bool negative, bool signaling, std::uint64_t top_fraction_bits, int source_fraction_bits) const;
  Result from_infinity(bool negative) const;

  formats::Format f_;
  int m_ = 0;                    // stored fraction bits
  std::uint32_t sign_ = 0;       // sign bit
  std::uint32_t exp_ones_ = 0;   // all-ones exponent field
  std::uint32_t frac_mask_ = 0;  // fraction field mask
  std::uint32_t max_index_ = 0;  // largest finite positive encoding
  std::uint32_t default_nan_ = 0;
  long double min_normal_ = 0.0L;
  long double below_min_normal_ = 0.0L;  // p-bit predecessor of min_normal
  // The value table: finite values in encoding order, then the overflow point.
  std::vector<long double> table_;
  // The finite values again as floats (exact: at most 17 significant bits in
  // float's range), which keeps the hot search in cache.
  std::vector<float> search_;
  long double overflow_ = 0.0L;  // table_.back()
  std::vector<long double> scale_;  // 2^(e - bias - m) per exponent field (e = 0 as e = 1)
  // First table index with value >= 2^e, per binary exponent e (see round()).
  std::vector<std::size_t> bracket_;
  int bracket_min_exponent_ = 0;

  long double entry(std::size_t i) const {
    return i < search_.size() ? static_cast<long double>(search_[i]) : overflow_;
  }
};

}  // namespace mpverify::oracle
