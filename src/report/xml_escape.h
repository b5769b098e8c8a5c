// Text made safe for XML and HTML: every SVG figure, the HTML page and the
// JUnit reports escape through this one function.
#pragma once

#include <string>
#include <string_view>

namespace mpverify::report {

// & < > " become entities; control characters that XML 1.0 forbids become
// U+FFFD, and \r becomes &#13; (a parser would turn it into \n). With
// `in_attribute`, ' is escaped too, and \n and \t become character references
// (attribute-value normalisation would turn them into spaces).
std::string xml_escape(std::string_view text, bool in_attribute = false);

}  // namespace mpverify::report
