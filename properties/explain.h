// Failure messages that state a case exactly: bit patterns in hex, doubles as
// hex floats (decimal can hide the last bit), formats and modes by name.
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <iomanip>
#include <ios>
#include <ostream>
#include <sstream>
#include <string>

#include "formats/flags.h"
#include "formats/format.h"
#include "formats/rounding.h"

// RC_ASSERT with an explanation that is built only when the check fails: the
// inner loops make millions of checks, and formatting each would dominate.
#define PROP_ASSERT(condition, ...)                                                                             \
  do {                                                                                                          \
    if (!(condition)) RC_FAIL(std::string(#condition) + "\n  " + ::mpverify::properties::explain(__VA_ARGS__)); \
  } while (false)

namespace mpverify::properties {

struct Bits {
  const formats::Format& format;
  std::uint32_t bits;
};
struct Exact {
  double value;
};

inline std::ostream& operator<<(std::ostream& os, const Bits& b) {
  const int digits = (b.format.width() + 3) / 4;
  return os << "0x" << std::hex << std::setw(digits) << std::setfill('0') << b.bits << std::dec << std::setfill(' ');
}
inline std::ostream& operator<<(std::ostream& os, const Exact& e) {
  return os << std::hexfloat << e.value << std::defaultfloat << " (" << std::setprecision(17) << e.value
            << std::setprecision(6) << ")";
}
inline std::ostream& operator<<(std::ostream& os, formats::Rounding r) { return os << formats::to_string(r); }
inline std::ostream& operator<<(std::ostream& os, formats::Flags f) {
  os << "{";
  const char* sep = "";
  for (const std::string& name : formats::flag_names(f)) {
    os << sep << name;
    sep = ",";
  }
  return os << "}";
}
inline std::ostream& operator<<(std::ostream& os, const formats::Format& f) {
  return os << f.name << " (e" << f.exponent_bits << "m" << f.mantissa_bits << " bias " << f.bias << ", "
            << formats::to_string(f.encoding) << ", overflow " << formats::to_string(f.overflow)
            << (f.subnormals ? "" : ", ftz") << ")";
}

// Streams its arguments one after another.
template <typename... Args>
std::string explain(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace mpverify::properties

// RapidCheck prints generated values with showValue, found by argument-
// dependent lookup; without these a failing Format would print as "<?>".
namespace mpverify::formats {
inline void showValue(const Format& f, std::ostream& os) { ::mpverify::properties::operator<<(os, f); }
inline void showValue(Rounding r, std::ostream& os) { os << to_string(r); }
}  // namespace mpverify::formats
