#include "report/svg_image_grid.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string_view>

#include "io/base64.h"
#include "report/png_image.h"
#include "report/svg_number.h"
#include "report/xml_escape.h"

namespace mpverify::report {

namespace {

constexpr std::uint8_t kSeparator = 128;
constexpr double kMargin = 16, kTitleHeight = 34, kLabelHeight = 20, kGap = 24;

}  // namespace

std::vector<std::uint8_t> tile_images(std::span<const float> images, std::size_t side, std::size_t columns,
                                      std::size_t& width, std::size_t& height) {
  const std::size_t per_image = side * side;
  if (side == 0 || columns == 0) throw std::invalid_argument("tile_images: side and columns must be at least 1");
  if (images.empty() || images.size() % per_image != 0)
    throw std::invalid_argument("tile_images: " + std::to_string(images.size()) + " values are not a positive whole number of " +
                                std::to_string(side) + " x " + std::to_string(side) + " images");
  const std::size_t count = images.size() / per_image;
  const std::size_t cols = std::min(columns, count);
  const std::size_t rows = (count + cols - 1) / cols;
  width = cols * (side + 1) + 1;
  height = rows * (side + 1) + 1;
  std::vector<std::uint8_t> pixels(width * height, kSeparator);
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t r = k / cols, c = k % cols;
    for (std::size_t y = 0; y < side; ++y)
      for (std::size_t x = 0; x < side; ++x) {
        const float v = images[k * per_image + y * side + x];
        if (!(v >= 0.0f && v <= 1.0f)) {
          std::string message = "tile_images: image ";
          message += std::to_string(k);
          message += " pixel (" + std::to_string(y) + ", " + std::to_string(x) + ") is " + std::to_string(v);
          message += "; values must be finite and in [0, 1]";
          throw std::invalid_argument(message);
        }
        pixels[(1 + r * (side + 1) + y) * width + 1 + c * (side + 1) + x] =
            static_cast<std::uint8_t>(std::lround(255.0 * static_cast<double>(v)));
      }
  }
  return pixels;
}

std::string svg_image_grid(const ImageGridFigure& figure) {
  if (figure.side == 0 || figure.columns == 0 || figure.scale == 0)
    throw std::invalid_argument("svg_image_grid: side, columns and scale must be at least 1");
  if (figure.panels.empty()) throw std::invalid_argument("svg_image_grid: no panels");
  struct Placed {
    std::size_t width = 0, height = 0;  // PNG pixels
    std::string png;
  };
  std::vector<Placed> placed;
  // An empty panel takes the size of a full row of `columns` images, one row high.
  for (const ImagePanel& p : figure.panels) {
    Placed q;
    if (p.images.empty()) {
      q.width = figure.columns * (figure.side + 1) + 1;
      q.height = figure.side + 2;
    } else {
      const std::vector<std::uint8_t> pixels = tile_images(p.images, figure.side, figure.columns, q.width, q.height);
      q.png = encode_png_gray8(q.width, q.height, pixels);
    }
    placed.push_back(std::move(q));
  }
  const double s = static_cast<double>(figure.scale);
  double width = kMargin, panels_height = 0;
  for (const Placed& q : placed) {
    width += s * static_cast<double>(q.width) + kGap;
    panels_height = std::max(panels_height, s * static_cast<double>(q.height));
  }
  width += kMargin - kGap;
  const double top = kTitleHeight + kLabelHeight;
  const double height = top + panels_height + (figure.note.empty() ? 12.0 : 32.0);
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg_coordinate(width) + "\" height=\"" + svg_coordinate(height) +
                    "\" viewBox=\"0 0 " + svg_coordinate(width) + " " + svg_coordinate(height) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + svg_coordinate(kMargin) + "\" y=\"24\" font-size=\"15\">" + xml_escape(figure.title) + "</text>\n";
  double x = kMargin;
  for (std::size_t i = 0; i < placed.size(); ++i) {
    const Placed& q = placed[i];
    const double w = s * static_cast<double>(q.width), h = s * static_cast<double>(q.height);
    svg += "<text x=\"" + svg_coordinate(x) + "\" y=\"" + svg_coordinate(top - 6) + "\">" + xml_escape(figure.panels[i].label) + "</text>\n";
    if (q.png.empty()) {
      svg += "<rect x=\"" + svg_coordinate(x) + "\" y=\"" + svg_coordinate(top) + "\" width=\"" + svg_coordinate(w) + "\" height=\"" + svg_coordinate(h) +
             "\" fill=\"#eeeeee\" stroke=\"#888888\"/>\n";
      svg += "<text x=\"" + svg_coordinate(x + w / 2) + "\" y=\"" + svg_coordinate(top + h / 2 + 4) + "\" text-anchor=\"middle\">" +
             xml_escape(figure.panels[i].empty_text) + "</text>\n";
    } else {
      svg += "<image x=\"" + svg_coordinate(x) + "\" y=\"" + svg_coordinate(top) + "\" width=\"" + svg_coordinate(w) + "\" height=\"" + svg_coordinate(h) +
             "\" preserveAspectRatio=\"none\" image-rendering=\"pixelated\" style=\"image-rendering:pixelated\" "
             "href=\"data:image/png;base64," +
             io::base64_encode(q.png) + "\"/>\n";
    }
    x += w + kGap;
  }
  if (!figure.note.empty())
    svg += "<text x=\"" + svg_coordinate(kMargin) + "\" y=\"" + svg_coordinate(top + panels_height + 22) + "\">" + xml_escape(figure.note) +
           "</text>\n";
  svg += "</svg>\n";
  return svg;
}

}  // namespace mpverify::report
