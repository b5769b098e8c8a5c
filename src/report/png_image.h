// A minimal PNG encoder (ISO/IEC 15948): 8-bit greyscale, no interlace,
// filter type 0 (None) on every row, the image data compressed by zlib at a
// fixed level, so the same pixels give the same bytes (with the same zlib).
// What the figures need to show generated images inside an SVG (a data: URI)
// without drawing every pixel as an element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace mpverify::report {

// `pixels`: height rows of width bytes (0 black, 255 white), row-major.
// Throws std::invalid_argument when width or height is 0, above 2^31 - 1, or
// pixels.size() != width * height; std::runtime_error if zlib fails.
std::string encode_png_gray8(std::size_t width, std::size_t height, std::span<const std::uint8_t> pixels);

}  // namespace mpverify::report
