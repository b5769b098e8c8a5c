#include "report/text_format.h"

#include <cmath>
#include <cstdio>

namespace mpverify::report {

std::string fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::string general(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", value);
  return buf;
}

std::string percent(double fraction) { return fixed(100.0 * fraction, 2); }

std::string power_of_two_text(double value) {
  if (value > 0 && std::isfinite(value)) {
    const double e = std::log2(value);
    if (e == std::floor(e)) return "2^" + std::to_string(static_cast<long>(e));
  }
  return general(value);
}

std::string sentence(std::string text) {
  if (text.empty()) return text;
  if (text.front() >= 'a' && text.front() <= 'z') text.front() = static_cast<char>(text.front() - 'a' + 'A');
  if (text.back() != '.') text += '.';
  return text;
}

void add_cell(std::string& row, const std::string& text) {
  row += ' ';
  row += text;
  row += " |";
}

}  // namespace mpverify::report
