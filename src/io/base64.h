// Base64 (RFC 4648, section 4: the standard alphabet, '=' padding, no line
// breaks), for data: URIs (a PNG embedded in an SVG figure).
#pragma once

#include <string>
#include <string_view>

namespace mpverify::io {

std::string base64_encode(std::string_view bytes);

}  // namespace mpverify::io
