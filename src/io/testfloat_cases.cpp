#include "io/testfloat_cases.h"

#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "formats/encoding.h"

namespace mpverify::io {

using formats::Flags;
using Kind = Operation::Kind;

int Operation::arity() const {
  switch (kind) {
    case Kind::add:
    case Kind::sub:
    case Kind::mul:
    case Kind::div: return 2;
    case Kind::fma: return 3;
    default: return 1;
  }
}

int Operation::operand_bits() const {
  switch (kind) {
    case Kind::from_f32: return 32;
    case Kind::from_f64: return 64;
    case Kind::from_format: return source.width();
    default: return format.width();
  }
}

int Operation::result_bits() const {
  switch (kind) {
    case Kind::to_f32: return 32;
    case Kind::to_f64: return 64;
    default: return format.width();
  }
}

Operation parse_operation(std::string_view name, const formats::Format& format) {
  static constexpr std::pair<std::string_view, Kind> fixed[] = {
      {"add", Kind::add},         {"sub", Kind::sub},         {"mul", Kind::mul},       {"div", Kind::div},
      {"sqrt", Kind::sqrt},       {"fma", Kind::fma},         {"from-f32", Kind::from_f32},
      {"from-f64", Kind::from_f64}, {"to-f32", Kind::to_f32}, {"to-f64", Kind::to_f64}};
  for (const auto& [n, k] : fixed)
    if (n == name) return {k, format, format};
  if (name.starts_with("from-")) {
    try {
      return {Kind::from_format, format, formats::parse_format(name.substr(5))};
    } catch (const formats::FormatError& e) {
      throw CaseError("--op '" + std::string(name) + "': " + e.what());
    }
  }
  throw CaseError("--op '" + std::string(name) +
                  "': expected add, sub, mul, div, sqrt, fma, from-f32, from-f64, to-f32, to-f64 or from-FORMAT "
                  "(e.g. from-bf16, from-e5m7)");
}

namespace {

std::uint64_t parse_hex(std::string_view field, int width_bits, const char* what) {
  std::string_view digits = field;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) digits.remove_prefix(2);
  if (digits.empty() || digits.size() > 16)
    throw CaseError(std::string(what) + " '" + std::string(field) + "' is not a hex number of at most 16 digits");
  std::uint64_t v = 0;
  for (char ch : digits) {
    const int d = std::isdigit(static_cast<unsigned char>(ch)) ? ch - '0'
                  : (ch >= 'a' && ch <= 'f')                   ? ch - 'a' + 10
                  : (ch >= 'A' && ch <= 'F')                   ? ch - 'A' + 10
                                                               : -1;
    if (d < 0) throw CaseError(std::string(what) + " '" + std::string(field) + "' is not hexadecimal");
    v = (v << 4) | static_cast<std::uint64_t>(d);
  }
  if (width_bits < 64 && (v >> width_bits) != 0)
    throw CaseError(std::string(what) + " '" + std::string(field) + "' does not fit in " + std::to_string(width_bits) +
                    " bits");
  return v;
}

}  // namespace

Case parse_case(std::string_view line, const Operation& op, bool require_expected) {
  std::vector<std::string_view> fields;
  for (std::size_t i = 0; i < line.size();) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    const std::size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  const std::size_t n = static_cast<std::size_t>(op.arity());
  if (fields.size() != n + 2 && (require_expected || fields.size() != n))
    throw CaseError("expected " + std::to_string(n) + (require_expected ? "" : " or " + std::to_string(n + 2)) +
                    " fields (" + std::to_string(n) + " operand(s)" +
                    (require_expected ? ", the expected result and flags" : "[, expected result, flags]") +
                    "), got " + std::to_string(fields.size()));
  Case c;
  for (std::size_t k = 0; k < n; ++k) c.operands.push_back(parse_hex(fields[k], op.operand_bits(), "operand"));
  if (fields.size() == n + 2) {
    c.expected_result = parse_hex(fields[n], op.result_bits(), "expected result");
    c.expected_flags = static_cast<std::uint8_t>(parse_hex(fields[n + 1], 5, "expected flags"));
  }
  return c;
}

Outcome evaluate(const Operation& op, const Case& c, const formats::RoundingContext& rc) {
  const formats::Format& f = op.format;
  auto bits = [&](std::size_t k) { return static_cast<std::uint32_t>(c.operands[k]); };
  Flags flags;
  std::uint64_t r = 0;
  switch (op.kind) {
    case Kind::add: r = formats::add(f, bits(0), bits(1), rc, flags); break;
    case Kind::sub: r = formats::sub(f, bits(0), bits(1), rc, flags); break;
    case Kind::mul: r = formats::mul(f, bits(0), bits(1), rc, flags); break;
    case Kind::div: r = formats::div(f, bits(0), bits(1), rc, flags); break;
    case Kind::sqrt: r = formats::sqrt(f, bits(0), rc, flags); break;
    case Kind::fma: r = formats::fma(f, bits(0), bits(1), bits(2), rc, flags); break;
    case Kind::from_f32: r = formats::from_float(f, std::bit_cast<float>(bits(0)), rc, flags); break;
    case Kind::from_f64: r = formats::from_double(f, std::bit_cast<double>(c.operands[0]), rc, flags); break;
    case Kind::to_f32: r = std::bit_cast<std::uint32_t>(formats::to_float(f, bits(0), flags)); break;
    case Kind::to_f64: r = std::bit_cast<std::uint64_t>(formats::to_double(f, bits(0), flags)); break;
    case Kind::from_format: r = formats::convert(op.source, bits(0), f, rc, flags); break;
  }
  return {r, flags};
}

bool matches(const Operation& op, const Outcome& ours, std::uint64_t expected_result, std::uint8_t expected_flags,
             bool exact_nan) {
  if (ours.flags.bits != expected_flags) return false;
  if (ours.result == expected_result) return true;
  if (exact_nan) return false;
  // Generators differ in their default NaN: any NaN matches any NaN.
  switch (op.kind) {
    case Kind::to_f32:
      return std::isnan(std::bit_cast<float>(static_cast<std::uint32_t>(ours.result))) &&
             std::isnan(std::bit_cast<float>(static_cast<std::uint32_t>(expected_result)));
    case Kind::to_f64:
      return std::isnan(std::bit_cast<double>(ours.result)) && std::isnan(std::bit_cast<double>(expected_result));
    default:
      return formats::is_nan(op.format, static_cast<std::uint32_t>(ours.result)) &&
             formats::is_nan(op.format, static_cast<std::uint32_t>(expected_result));
  }
}

std::string hex_field(std::uint64_t value, int width_bits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%0*llX", (width_bits + 3) / 4, static_cast<unsigned long long>(value));
  return buf;
}

}  // namespace mpverify::io
