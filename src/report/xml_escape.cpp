#include "report/xml_escape.h"

namespace mpverify::report {

std::string xml_escape(std::string_view text, bool in_attribute) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += in_attribute ? "&apos;" : "'"; break;
      case '\n': out += in_attribute ? "&#10;" : "\n"; break;
      case '\r': out += "&#13;"; break;
      case '\t': out += in_attribute ? "&#9;" : "\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) out += "\xEF\xBF\xBD";  // U+FFFD
        else out += ch;
    }
  }
  return out;
}

}  // namespace mpverify::report
