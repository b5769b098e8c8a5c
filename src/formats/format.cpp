#include "formats/format.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace mpverify::formats {

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

std::uint32_t Format::default_nan_bits() const {
  switch (encoding) {
    // x86's default NaN is negative and quiet (float 0xffc00000, fp16 0xfe00).
    case Encoding::ieee: return sign_mask() | positive_infinity_bits() | (1u << (mantissa_bits - 1));
    case Encoding::fn: return all_bits_mask();  // S.1111.111 with the sign set
    case Encoding::fnuz: return sign_mask();
    // No NaN to return: the largest value stands in for it, and the caller
    // raises `invalid` (a choice; torchao's FP4/FP6 casts leave NaN undefined).
    case Encoding::finite: return max_finite_bits();
  }
  return 0;
}

void Format::validate() const {
  auto fail = [&](const std::string& what) {
    throw FormatError("format '" + name + "': " + what);
  };
  if (exponent_bits < 2 || exponent_bits > 8) fail("exponent_bits must be 2..8, got " + std::to_string(exponent_bits));
  if (mantissa_bits < 0 || mantissa_bits > 23)
    fail("mantissa_bits must be 0..23, got " + std::to_string(mantissa_bits));
  if (mantissa_bits == 0 && encoding == Encoding::ieee)
    fail("ieee encoding needs a fraction bit to tell NaN from infinity");
  if (emin() - mantissa_bits < -149 || emax() > 127)
    fail("bias " + std::to_string(bias) + " puts values outside float32's range");
  if (encoding != Encoding::ieee && overflow == Overflow::ieee)
    fail("overflow policy 'ieee' needs infinities; use ':nan' or ':saturate' with encoding " +
         std::string(to_string(encoding)));
  if (encoding == Encoding::finite && overflow != Overflow::saturate)
    fail("encoding 'finite' has no NaN and no infinity, so overflow must saturate (':saturate')");
  if (!is_signed && encoding != Encoding::fn)
    fail("an unsigned format needs encoding 'fn': a negative input becomes its NaN");
  if (!has_zero && subnormals) fail("a format without zero has no subnormals; use ':ftz'");
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

// NVFP4's block scale: OCP E4M3 without the sign bit (values 2^-9..448, 0x7f
// NaN). Saturating, as torchao clamps the scale to 448 before its E4M3 cast
// (prototype/mx_formats/nvfp4_tensor.py, nvfp4_quantize).
Format make_ue4m3() {
  Format f = make("ue4m3", 4, 3, Encoding::fn, Overflow::saturate);
  f.is_signed = false;
  f.validate();
  return f;
}

// The OCP MX v1.0 scale (section 5.4.1): 8 exponent bits, bias 127, no sign,
// no fraction, no zero; 0xff is NaN, 0x00 is 2^-127. Overflow gives NaN, as
// PyTorch's float8_e8m0fnu cast does (a rounding past 2^127 lands on 0xff)
// and as microxcaling marks an overflowing shared exponent; ":saturate" gives
// Transformer Engine's clamp at 2^127.
Format make_e8m0() {
  Format f = make("e8m0", 8, 0, Encoding::fn, Overflow::nan);
  f.is_signed = false;
  f.has_zero = false;
  f.subnormals = false;
  f.validate();
  return f;
}

// Where a preset's name starts: "fp8-e4m3:saturate" -> "fp8-e4m3".
std::string_view base_name(std::string_view name) { return name.substr(0, name.find(':')); }

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
      // OCP MX v1.0 element formats (section 5.3): no inf, no NaN, saturating.
      make("fp4-e2m1", 2, 1, Encoding::finite, Overflow::saturate),
      make("fp6-e2m3", 2, 3, Encoding::finite, Overflow::saturate),
      make("fp6-e3m2", 3, 2, Encoding::finite, Overflow::saturate),
  };
  return all;
}

const std::vector<Format>& scale_presets() {
  static const std::vector<Format> all = {make_e8m0(), make_ue4m3()};
  return all;
}

const std::vector<Format>& all_presets() {
  static const std::vector<Format> all = [] {
    std::vector<Format> v = presets();
    v.insert(v.end(), scale_presets().begin(), scale_presets().end());
    return v;
  }();
  return all;
}

const Format& fp32() {
  static const Format f = parse_format("fp32");
  return f;
}

namespace {

// What parse_format accepts, for its error messages.
std::string accepted_formats() {
  std::string accepted = "expected a preset (";
  for (const Format& p : all_presets()) accepted += p.name + ", ";
  return accepted +
         "fp32) or eXmY (IEEE-like: X = 2..8 exponent bits, Y = 1..23 fraction bits, e.g. e5m7; e2m1 is not "
         "OCP FP4, which is fp4-e2m1), optionally followed by :saturate, :nan, :ieee or :ftz";
}

}  // namespace

Format parse_format(std::string_view text) {
  const std::size_t colon = text.find(':');
  const std::string_view base = text.substr(0, colon);
  Format f;
  bool found = false;
  if (base == "fp32") {  // IEEE binary32 itself, as an output format of policies
    f = custom_format(8, 23);
    f.name = "fp32";
    found = true;
  }
  for (const Format& p : all_presets()) {
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
          throw FormatError("format '" + std::string(text) + "': " + accepted_formats());
        f = custom_format(e, m);
        found = true;
      }
    }
  }
  if (!found) throw FormatError("unknown format '" + std::string(text) + "': " + accepted_formats());
  std::string_view rest = colon == std::string_view::npos ? std::string_view{} : text.substr(colon);
  while (!rest.empty()) {
    const std::size_t next = rest.find(':', 1);
    const std::string_view mod = rest.substr(1, next == std::string_view::npos ? rest.size() - 1 : next - 1);
    if (mod == "saturate") f.overflow = Overflow::saturate;
    else if (mod == "nan") f.overflow = Overflow::nan;
    else if (mod == "ieee") f.overflow = Overflow::ieee;
    else if (mod == "ftz") f.subnormals = false;
    else
      throw FormatError("format '" + std::string(text) + "': unknown modifier ':" + std::string(mod) + "'; " +
                        accepted_formats());
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
    case Encoding::finite: return "finite";
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
         a.subnormals == b.subnormals && a.is_signed == b.is_signed && a.has_zero == b.has_zero &&
         a.encoding == b.encoding;
}

bool same_encoding(const Format& a, const Format& b) { return same_values(a, b) && a.overflow == b.overflow; }

namespace {

std::string shortest(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string specials(const Format& f) {
  switch (f.encoding) {
    case Encoding::ieee: return "inf, NaN";
    case Encoding::fn: return "no inf, NaN only at all-ones";
    case Encoding::fnuz: return "no inf, no -0, NaN in its place";
    case Encoding::finite: return "no inf, no NaN";
  }
  return "?";
}

}  // namespace

std::string namesake_note(const Format& f) {
  if (!f.is_signed || f.mantissa_bits < 1) return "";  // no eXmY has f's shape
  const Format generic = custom_format(f.exponent_bits, f.mantissa_bits);
  // The presets of the same shape whose values differ from the eXmY's.
  std::vector<const Format*> lookalikes;
  bool concerns_f = base_name(f.name) == generic.name;
  for (const Format& p : presets()) {
    if (!p.is_signed || p.exponent_bits != f.exponent_bits || p.mantissa_bits != f.mantissa_bits ||
        same_values(p, generic))
      continue;
    lookalikes.push_back(&p);
    concerns_f = concerns_f || base_name(f.name) == p.name;
  }
  if (lookalikes.empty() || !concerns_f) return "";
  std::string note =
      generic.name + " is IEEE-like (max " + shortest(generic.max_finite()) + ", " + specials(generic) + ")";
  for (const Format* p : lookalikes)
    note += "; " + p->name + " is another format (max " + shortest(p->max_finite()) + ", " + specials(*p) + ")";
  return note;
}

}  // namespace mpverify::formats
