#include "formats/format.h"

#include <charconv>
#include <cmath>

namespace mpverify::formats {

int Format::emax() const {
  switch (encoding) {
    case Encoding::ieee: return static_cast<int>(exponent_field_max()) - 1 - bias;  // all-ones is inf/NaN
    case Encoding::fn:
    case Encoding::fnuz: return static_cast<int>(exponent_field_max()) - bias;
  }
  return 0;
}

std::uint32_t Format::max_fraction_in_top_binade() const {
  // fn reserves S.1111.111 for NaN, so its top binade stops one short.
  return encoding == Encoding::fn ? mantissa_mask() - 1 : mantissa_mask();
}

double Format::max_finite() const {
  return std::ldexp(1.0 + std::ldexp(static_cast<double>(max_fraction_in_top_binade()), -mantissa_bits), emax());
}
double Format::min_normal() const { return std::ldexp(1.0, emin()); }
double Format::min_subnormal() const {
  return subnormals ? std::ldexp(1.0, emin() - mantissa_bits) : min_normal();
}
double Format::epsilon() const { return std::ldexp(1.0, -mantissa_bits); }
double Format::unit_roundoff() const { return std::ldexp(1.0, -precision()); }
double Format::lost_update_ratio_needed() const { return std::ldexp(1.0, precision()); }
double Format::lost_update_ratio_sufficient() const { return std::ldexp(1.0, precision() + 1); }

std::uint32_t Format::positive_infinity_bits() const { return exponent_field_max() << mantissa_bits; }
std::uint32_t Format::max_finite_bits() const {
  const std::uint32_t exponent_field = static_cast<std::uint32_t>(emax() + bias);
  return (exponent_field << mantissa_bits) | max_fraction_in_top_binade();
}
std::uint32_t Format::default_nan_bits() const {
  switch (encoding) {
    // x86's default NaN is negative and quiet (float 0xffc00000, fp16 0xfe00).
    case Encoding::ieee: return sign_mask() | positive_infinity_bits() | (1u << (mantissa_bits - 1));
    case Encoding::fn: return all_bits_mask();  // S.1111.111 with the sign set
    case Encoding::fnuz: return sign_mask();
  }
  return 0;
}

void Format::validate() const {
  auto fail = [&](const std::string& what) {
    throw FormatError("format '" + name + "': " + what);
  };
  if (exponent_bits < 2 || exponent_bits > 8) fail("exponent_bits must be 2..8, got " + std::to_string(exponent_bits));
  if (mantissa_bits < 1 || mantissa_bits > 23) fail("mantissa_bits must be 1..23, got " + std::to_string(mantissa_bits));
  if (emin() - mantissa_bits < -149 || emax() > 127)
    fail("bias " + std::to_string(bias) + " puts values outside float32's range");
  if (encoding != Encoding::ieee && overflow == Overflow::ieee)
    fail("overflow policy 'ieee' needs infinities; use ':nan' or ':saturate' with encoding " +
         std::string(to_string(encoding)));
  if (encoding == Encoding::fn && mantissa_bits < 1) fail("fn encoding needs a fraction bit for NaN");
}

namespace {

Format make(std::string name, int e, int m, Encoding enc = Encoding::ieee, Overflow ov = Overflow::ieee) {
  Format f;
  f.name = std::move(name);
  f.exponent_bits = e;
  f.mantissa_bits = m;
  // fnuz moves the bias up by one: the negative-zero encoding became NaN and
  // the range shifts down so that 1.0 keeps an exact encoding.
  f.bias = (1 << (e - 1)) - 1 + (enc == Encoding::fnuz ? 1 : 0);
  f.encoding = enc;
  f.overflow = ov;
  f.validate();
  return f;
}

}  // namespace

Format custom_format(int exponent_bits, int mantissa_bits) {
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict, bug 105651) on "e" + std::string.
  std::string name = "e";
  name += std::to_string(exponent_bits);
  name += 'm';
  name += std::to_string(mantissa_bits);
  return make(std::move(name), exponent_bits, mantissa_bits);
}

const std::vector<Format>& presets() {
  // fp8-e4m3 overflows to NaN (PyTorch's float8_e4m3fn cast); ":saturate"
  // gives the saturating cast that Transformer Engine uses.
  static const std::vector<Format> all = {
      make("fp16", 5, 10),
      make("bf16", 8, 7),
      make("tf32", 8, 10),
      make("fp8-e4m3", 4, 3, Encoding::fn, Overflow::nan),
      make("fp8-e5m2", 5, 2),
      make("fp8-e4m3fnuz", 4, 3, Encoding::fnuz, Overflow::nan),
      make("fp8-e5m2fnuz", 5, 2, Encoding::fnuz, Overflow::nan),
  };
  return all;
}

Format parse_format(std::string_view text) {
  const std::string_view accepted =
      "expected a preset (fp16, bf16, tf32, fp8-e4m3, fp8-e5m2, fp8-e4m3fnuz, fp8-e5m2fnuz, fp32) or eXmY "
      "(X = 2..8 exponent bits, Y = 1..23 fraction bits, e.g. e5m7), optionally followed by :saturate, "
      ":nan, :ieee or :ftz";
  const std::size_t colon = text.find(':');
  const std::string_view base = text.substr(0, colon);
  Format f;
  bool found = false;
  if (base == "fp32") {  // IEEE binary32 itself, as an output format of policies
    f = custom_format(8, 23);
    f.name = "fp32";
    found = true;
  }
  for (const Format& p : presets()) {
    if (p.name == base) { f = p; found = true; }
  }
  if (!found && base.size() >= 4 && base[0] == 'e') {
    const std::size_t m_at = base.find('m');
    int e = 0, m = 0;
    if (m_at != std::string_view::npos && m_at > 1) {
      auto [pe, ece] = std::from_chars(base.data() + 1, base.data() + m_at, e);
      auto [pm, ecm] = std::from_chars(base.data() + m_at + 1, base.data() + base.size(), m);
      if (ece == std::errc() && ecm == std::errc() && pe == base.data() + m_at &&
          pm == base.data() + base.size()) {
        if (e < 2 || e > 8 || m < 1 || m > 23)
          throw FormatError("format '" + std::string(text) + "': " + std::string(accepted));
        f = custom_format(e, m);
        found = true;
      }
    }
  }
  if (!found) throw FormatError("unknown format '" + std::string(text) + "': " + std::string(accepted));
  std::string_view rest = colon == std::string_view::npos ? std::string_view{} : text.substr(colon);
  while (!rest.empty()) {
    const std::size_t next = rest.find(':', 1);
    const std::string_view mod = rest.substr(1, next == std::string_view::npos ? rest.size() - 1 : next - 1);
    if (mod == "saturate") f.overflow = Overflow::saturate;
    else if (mod == "nan") f.overflow = Overflow::nan;
    else if (mod == "ieee") f.overflow = Overflow::ieee;
    else if (mod == "ftz") f.subnormals = false;
    else throw FormatError("format '" + std::string(text) + "': unknown modifier ':" + std::string(mod) + "'; " +
                           std::string(accepted));
    f.name += ':';
    f.name += mod;
    rest = next == std::string_view::npos ? std::string_view{} : rest.substr(next);
  }
  f.validate();
  return f;
}

std::string_view to_string(Encoding e) {
  switch (e) {
    case Encoding::ieee: return "ieee";
    case Encoding::fn: return "fn";
    case Encoding::fnuz: return "fnuz";
  }
  return "?";
}

std::string_view to_string(Overflow o) {
  switch (o) {
    case Overflow::ieee: return "ieee";
    case Overflow::saturate: return "saturate";
    case Overflow::nan: return "nan";
  }
  return "?";
}

bool same_values(const Format& a, const Format& b) {
  return a.exponent_bits == b.exponent_bits && a.mantissa_bits == b.mantissa_bits && a.bias == b.bias &&
         a.subnormals == b.subnormals && a.encoding == b.encoding;
}

bool same_encoding(const Format& a, const Format& b) {
  return a.exponent_bits == b.exponent_bits && a.mantissa_bits == b.mantissa_bits && a.bias == b.bias &&
         a.subnormals == b.subnormals && a.encoding == b.encoding && a.overflow == b.overflow;
}

}  // namespace mpverify::formats
