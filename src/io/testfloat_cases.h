// TestFloat's line format, as written by Berkeley TestFloat's testfloat_gen:
// one case per line, whitespace-separated hexadecimal fields: the operands,
// then (optionally) the expected result and the expected flags as TestFloat's
// bitmask (inexact 1, underflow 2, overflow 4, infinite 8, invalid 16), e.g.
// "87FF E850 E850 01" for an fp16 addition.
//
// An Operation names what a line asks for (add, sub, mul, div, sqrt, fma,
// from-f32, from-f64, to-f32, to-f64, from-F2) in a format; evaluate() runs
// the emulator on one case.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "formats/arithmetic.h"
#include "formats/format.h"

namespace mpverify::io {

class CaseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Operation {
  enum class Kind { add, sub, mul, div, sqrt, fma, from_f32, from_f64, to_f32, to_f64, from_format };
  Kind kind;
  formats::Format format;       // the format of the arithmetic, or the conversion's target/source
  formats::Format source;       // from_format only: the format converted from
  int arity() const;            // operands per case
  int operand_bits() const;     // width of each operand field
  int result_bits() const;      // width of the result field
};

// "add", "fma", "from-f32", "to-f64", "from-bf16", "from-e5m7", ... in `format`.
// Throws CaseError listing the accepted names.
Operation parse_operation(std::string_view op, const formats::Format& format);

struct Case {
  std::vector<std::uint64_t> operands;
  std::optional<std::uint64_t> expected_result;
  std::optional<std::uint8_t> expected_flags;
};

// Parses one line (fields with or without 0x). Accepts `arity` fields, or
// arity + 2 (the expected result and flags); `require_expected` demands the
// latter. Throws CaseError saying what is wrong with the line (the caller adds
// the line number).
Case parse_case(std::string_view line, const Operation& op, bool require_expected);

struct Outcome {
  std::uint64_t result;
  formats::Flags flags;
};

Outcome evaluate(const Operation& op, const Case& c, const formats::RoundingContext& rc);

// Whether `ours` matches the expectation: equal bits and flags, except that
// any NaN matches any NaN unless exact_nan.
bool matches(const Operation& op, const Outcome& ours, std::uint64_t expected_result, std::uint8_t expected_flags,
             bool exact_nan);

// Upper-case, zero-padded hex of `width_bits` bits, as TestFloat writes it.
std::string hex_field(std::uint64_t value, int width_bits);

}  // namespace mpverify::io
