// Figures of generated images: base64 (io/base64.h), the PNG encoder
// (report/png_image.h) and the SVG image grid (report/svg_image_grid.h).
// The PNGs are read back by a decoder written here from the PNG
// specification (chunk layout, CRC-32, zlib stream, filter bytes), and the
// grid's pixels are compared with the documented geometry recomputed here.
#include <gtest/gtest.h>

#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/base64.h"
#include "report/png_image.h"
#include "report/svg_image_grid.h"
#include "support/xml_checker.h"

namespace {

using namespace mpverify;

std::uint32_t be32(const std::string& s, std::size_t at) {
  return (std::uint32_t{static_cast<unsigned char>(s[at])} << 24) |
         (std::uint32_t{static_cast<unsigned char>(s[at + 1])} << 16) |
         (std::uint32_t{static_cast<unsigned char>(s[at + 2])} << 8) | std::uint32_t{static_cast<unsigned char>(s[at + 3])};
}

struct DecodedPng {
  std::size_t width = 0, height = 0;
  std::vector<std::uint8_t> pixels;
  std::vector<std::string> chunk_types;
};

// A decoder for what the encoder promises (8-bit greyscale, no interlace),
// checking every chunk's CRC and every row's filter byte.
DecodedPng decode_png(const std::string& png) {
  DecodedPng d;
  if (png.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) != 0) throw std::runtime_error("bad signature");
  std::string idat;
  std::size_t at = 8;
  while (at < png.size()) {
    if (at + 12 > png.size()) throw std::runtime_error("truncated chunk");
    const std::uint32_t length = be32(png, at);
    const std::string type = png.substr(at + 4, 4);
    const std::string data = png.substr(at + 8, length);
    const std::uint32_t crc = be32(png, at + 8 + length);
    const std::string body = png.substr(at + 4, 4 + length);
    const auto expected = static_cast<std::uint32_t>(
        ::crc32(::crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size())));
    if (crc != expected) throw std::runtime_error("CRC mismatch in " + type);
    d.chunk_types.push_back(type);
    if (type == "IHDR") {
      d.width = be32(data, 0);
      d.height = be32(data, 4);
      if (data.size() != 13 || data[8] != 8 || data[9] != 0 || data[10] != 0 || data[11] != 0 || data[12] != 0)
        throw std::runtime_error("IHDR is not 8-bit greyscale, deflate, filter 0, no interlace");
    } else if (type == "IDAT") {
      idat += data;
    }
    at += 12 + length;
  }
  std::vector<Bytef> raw(d.height * (d.width + 1));
  uLongf raw_size = static_cast<uLongf>(raw.size());
  if (::uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(idat.data()), static_cast<uLong>(idat.size())) !=
          Z_OK ||
      raw_size != raw.size())
    throw std::runtime_error("the zlib stream does not hold height x (width + 1) bytes");
  for (std::size_t y = 0; y < d.height; ++y) {
    if (raw[y * (d.width + 1)] != 0) throw std::runtime_error("row filter is not 0");
    d.pixels.insert(d.pixels.end(), raw.begin() + static_cast<std::ptrdiff_t>(y * (d.width + 1) + 1),
                    raw.begin() + static_cast<std::ptrdiff_t>((y + 1) * (d.width + 1)));
  }
  return d;
}

std::string base64_decode(const std::string& text) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (const char ch : text) {
    if (ch == '=') break;
    const auto v = alphabet.find(ch);
    if (v == std::string::npos) throw std::runtime_error("not base64");
    buffer = (buffer << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xff);
    }
  }
  return out;
}

TEST(Base64, Rfc4648TestVectors) {
  // RFC 4648, section 10.
  EXPECT_EQ(io::base64_encode(""), "");
  EXPECT_EQ(io::base64_encode("f"), "Zg==");
  EXPECT_EQ(io::base64_encode("fo"), "Zm8=");
  EXPECT_EQ(io::base64_encode("foo"), "Zm9v");
  EXPECT_EQ(io::base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(io::base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(io::base64_encode("foobar"), "Zm9vYmFy");
  // High bytes (no sign extension): 0xff 0xfe 0xfd -> 111111 111111 111011 111101.
  EXPECT_EQ(io::base64_encode(std::string("\xff\xfe\xfd", 3)), "//79");
  EXPECT_EQ(io::base64_encode(std::string("\0\0\0", 3)), "AAAA");
}

TEST(PngImage, DecodesToThePixelsGiven) {
  std::size_t cases = 0;
  for (const auto& [w, h] : std::vector<std::pair<std::size_t, std::size_t>>{{1, 1}, {3, 2}, {28, 28}, {233, 117}}) {
    std::vector<std::uint8_t> pixels(w * h);
    for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>((i * 37 + i / w) % 256);
    const std::string png = report::encode_png_gray8(w, h, pixels);
    const DecodedPng d = decode_png(png);
    EXPECT_EQ(d.width, w);
    EXPECT_EQ(d.height, h);
    EXPECT_EQ(d.pixels, pixels);
    EXPECT_EQ(d.chunk_types, (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));
    // The IEND chunk is always the same 12 bytes; its CRC, 0xAE426082, is the
    // value every PNG file ends with (independent of our CRC call).
    EXPECT_EQ(png.substr(png.size() - 12), std::string("\0\0\0\0IEND\xae\x42\x60\x82", 12));
    EXPECT_EQ(report::encode_png_gray8(w, h, pixels), png) << "same pixels, same bytes";
    ++cases;
  }
  EXPECT_EQ(cases, 4u);
}

TEST(PngImage, RefusesInconsistentSizes) {
  const std::vector<std::uint8_t> six(6, 0);
  EXPECT_THROW(report::encode_png_gray8(0, 6, six), std::invalid_argument);
  EXPECT_THROW(report::encode_png_gray8(6, 0, six), std::invalid_argument);
  EXPECT_THROW(report::encode_png_gray8(4, 2, six), std::invalid_argument);
  EXPECT_THROW(report::encode_png_gray8(5, 1, six), std::invalid_argument);
  EXPECT_NO_THROW(report::encode_png_gray8(3, 2, six));
}

// The grid of `count` side x side images with values v(k, y, x), recomputed
// from the header's geometry.
std::vector<std::uint8_t> expected_grid(const std::vector<float>& images, std::size_t side, std::size_t count,
                                        std::size_t columns, std::size_t& width, std::size_t& height) {
  const std::size_t cols = std::min(columns, count), rows = (count + cols - 1) / cols;
  width = cols * (side + 1) + 1;
  height = rows * (side + 1) + 1;
  std::vector<std::uint8_t> g(width * height, 128);
  for (std::size_t k = 0; k < count; ++k)
    for (std::size_t y = 0; y < side; ++y)
      for (std::size_t x = 0; x < side; ++x) {
        const std::size_t py = 1 + (k / cols) * (side + 1) + y, px = 1 + (k % cols) * (side + 1) + x;
        g[py * width + px] = static_cast<std::uint8_t>(std::lround(255.0 * images[(k * side + y) * side + x]));
      }
  return g;
}

std::vector<float> ramp_images(std::size_t count, std::size_t side) {
  std::vector<float> v(count * side * side);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 257) / 256.0f;
  return v;
}

TEST(ImageGrid, TilesImagesAtTheDocumentedPixels) {
  for (const auto& [count, columns] : std::vector<std::pair<std::size_t, std::size_t>>{{1, 8}, {5, 2}, {64, 8}, {10, 4}}) {
    const std::size_t side = 7;
    const std::vector<float> images = ramp_images(count, side);
    std::size_t w = 0, h = 0, ew = 0, eh = 0;
    const std::vector<std::uint8_t> got = report::tile_images(images, side, columns, w, h);
    const std::vector<std::uint8_t> want = expected_grid(images, side, count, columns, ew, eh);
    EXPECT_EQ(w, ew);
    EXPECT_EQ(h, eh);
    EXPECT_EQ(got, want) << count << " images in " << columns << " columns";
  }
  // Values on the grey levels' boundaries: 0 -> 0, 1 -> 255, 0.5 -> lround(127.5) = 128.
  std::size_t w = 0, h = 0;
  const std::vector<float> one{0.0f, 1.0f, 0.5f, 0.25f};
  const std::vector<std::uint8_t> g = report::tile_images(one, 2, 1, w, h);
  ASSERT_EQ(w, 4u);
  ASSERT_EQ(h, 4u);
  EXPECT_EQ(g[1 * 4 + 1], 0);
  EXPECT_EQ(g[1 * 4 + 2], 255);
  EXPECT_EQ(g[2 * 4 + 1], 128);
  EXPECT_EQ(g[2 * 4 + 2], 64);  // 63.75 rounds to 64
  EXPECT_EQ(g[0], 128);         // the separator
}

TEST(ImageGrid, RefusesBadImages) {
  std::size_t w = 0, h = 0;
  std::vector<float> images = ramp_images(2, 4);
  images[20] = std::nanf("");
  try {
    report::tile_images(images, 4, 2, w, h);
    ADD_FAILURE() << "NaN accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("image 1 pixel (1, 0)"), std::string::npos) << e.what();
  }
  images[20] = 1.0001f;
  EXPECT_THROW(report::tile_images(images, 4, 2, w, h), std::invalid_argument);
  images[20] = -0.0001f;
  EXPECT_THROW(report::tile_images(images, 4, 2, w, h), std::invalid_argument);
  images[20] = 0.5f;
  EXPECT_NO_THROW(report::tile_images(images, 4, 2, w, h));
  images.pop_back();
  EXPECT_THROW(report::tile_images(images, 4, 2, w, h), std::invalid_argument);
  EXPECT_THROW(report::tile_images({}, 4, 2, w, h), std::invalid_argument);
  EXPECT_THROW(report::svg_image_grid({}), std::invalid_argument);
}

TEST(ImageGrid, SvgEmbedsEachPanelAsAPngOfItsGrid) {
  report::ImageGridFigure f;
  f.title = "Samples <seed 1> & more";
  f.side = 5;
  f.columns = 3;
  f.scale = 2;
  f.panels.push_back({"fp32", ramp_images(7, 5), "none"});
  f.panels.push_back({"o2", {}, "diverged: no images"});
  f.panels.push_back({"diff", ramp_images(4, 5), "none"});
  const std::string svg = report::svg_image_grid(f);
  const test::XmlElement root = test::XmlReader(svg).parse();
  EXPECT_EQ(root.name, "svg");
  const std::vector<const test::XmlElement*> images = root.all("image");
  ASSERT_EQ(images.size(), 2u) << "one <image> per non-empty panel";
  std::size_t index = 0;
  for (const std::size_t panel : {0u, 2u}) {
    const std::string href = images[index]->attributes.at("href");
    const std::string prefix = "data:image/png;base64,";
    ASSERT_EQ(href.compare(0, prefix.size(), prefix), 0);
    const DecodedPng d = decode_png(base64_decode(href.substr(prefix.size())));
    std::size_t ew = 0, eh = 0;
    const std::size_t count = f.panels[panel].images.size() / 25;
    EXPECT_EQ(d.pixels, expected_grid(f.panels[panel].images, 5, count, 3, ew, eh));
    EXPECT_EQ(d.width, ew);
    // Drawn `scale` times larger.
    EXPECT_EQ(std::stod(images[index]->attributes.at("width")), 2.0 * static_cast<double>(ew));
    EXPECT_EQ(std::stod(images[index]->attributes.at("height")), 2.0 * static_cast<double>(eh));
    ++index;
  }
  // Labels, the escaped title and the empty panel's text are there as text.
  std::vector<std::string> texts;
  for (const test::XmlElement* t : root.all("text")) texts.push_back(t->text);
  for (const std::string want : {"Samples <seed 1> & more", "fp32", "o2", "diff", "diverged: no images"})
    EXPECT_NE(std::find(texts.begin(), texts.end(), want), texts.end()) << want;
  EXPECT_EQ(report::svg_image_grid(f), svg) << "same inputs, same bytes";
}

}  // namespace
