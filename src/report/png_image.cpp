#include "report/png_image.h"

#include <stdexcept>
#include <string_view>
#include <vector>

#include <zlib.h>

namespace mpverify::report {

namespace {

void put_u32(std::string& out, std::uint32_t v) {
  out += static_cast<char>((v >> 24) & 0xff);
  out += static_cast<char>((v >> 16) & 0xff);
  out += static_cast<char>((v >> 8) & 0xff);
  out += static_cast<char>(v & 0xff);
}

// length, type, data, CRC-32 of type and data (the PNG chunk layout).
void put_chunk(std::string& out, std::string_view type, std::string_view data) {
  put_u32(out, static_cast<std::uint32_t>(data.size()));
  std::string body(type);
  body += data;
  out += body;
  uLong crc = ::crc32(0L, Z_NULL, 0);
  crc = ::crc32(crc, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()));
  put_u32(out, static_cast<std::uint32_t>(crc));
}

}  // namespace

std::string encode_png_gray8(std::size_t width, std::size_t height, std::span<const std::uint8_t> pixels) {
  constexpr std::size_t kMaxSide = 0x7fffffff;  // PNG's limit on each dimension
  if (width == 0 || height == 0 || width > kMaxSide || height > kMaxSide)
    throw std::invalid_argument("encode_png_gray8: width and height must be in [1, 2^31 - 1] (got " +
                                std::to_string(width) + " x " + std::to_string(height) + ")");
  if (pixels.size() / width != height || pixels.size() % width != 0)
    throw std::invalid_argument("encode_png_gray8: " + std::to_string(pixels.size()) + " pixels are not " +
                                std::to_string(width) + " x " + std::to_string(height));
  // Every row prefixed by its filter type, 0 (None).
  std::vector<Bytef> raw;
  raw.reserve(height * (width + 1));
  for (std::size_t y = 0; y < height; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), pixels.begin() + static_cast<std::ptrdiff_t>(y * width),
               pixels.begin() + static_cast<std::ptrdiff_t>((y + 1) * width));
  }
  uLongf packed_size = ::compressBound(static_cast<uLong>(raw.size()));
  std::vector<Bytef> packed(packed_size);
  if (::compress2(packed.data(), &packed_size, raw.data(), static_cast<uLong>(raw.size()), 9) != Z_OK)
    throw std::runtime_error("encode_png_gray8: zlib's compress2 failed");

  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string header;
  put_u32(header, static_cast<std::uint32_t>(width));
  put_u32(header, static_cast<std::uint32_t>(height));
  header += static_cast<char>(8);  // bit depth
  header += static_cast<char>(0);  // colour type: greyscale
  header += static_cast<char>(0);  // compression: deflate
  header += static_cast<char>(0);  // filter method 0
  header += static_cast<char>(0);  // no interlace
  put_chunk(png, "IHDR", header);
  put_chunk(png, "IDAT", std::string_view(reinterpret_cast<const char*>(packed.data()), packed_size));
  put_chunk(png, "IEND", {});
  return png;
}

}  // namespace mpverify::report
