// Grids of small greyscale images (a GAN's samples) as a standalone SVG
// figure: each panel is one PNG (report/png_image.h) embedded as a data: URI
// in an <image> element, so the figure is one self-contained file that a
// code-hosting site shows through a Markdown image link and that the reports
// page (report/html_page.h) inlines as it is. The output depends only on the
// inputs (same pixels, same bytes).
//
// Geometry: a panel of n images in `columns` columns is a PNG of
// columns * (side + 1) + 1 by rows * (side + 1) + 1 pixels, the images
// separated by a 1-pixel grey (128) line; image k sits at row k / columns,
// column k % columns, its pixel (y, x) at PNG pixel (1 + r (side + 1) + y,
// 1 + c (side + 1) + x) with grey level lround(255 v) (v = 0 black, 1 white:
// MNIST's white ink on black). Each panel is drawn `scale` times larger with
// image-rendering "pixelated" (no smoothing), panels side by side from the
// left, each with its label above it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mpverify::report {

struct ImagePanel {
  std::string label;          // written above the panel
  std::vector<float> images;  // count x side x side, C order, values in [0, 1]; empty: a panel saying `empty_text`
  std::string empty_text = "no images";
};

struct ImageGridFigure {
  std::string title;
  std::size_t side = 28;    // each image is side x side
  std::size_t columns = 8;  // images per row of a panel
  std::size_t scale = 2;    // screen pixels per image pixel
  std::vector<ImagePanel> panels;
  std::string note;         // one line under the panels (may be empty)
};

// The grid of one panel as greyscale pixels (the geometry above); width and
// height are set. Throws std::invalid_argument when images.size() is not a
// positive multiple of side * side, or a value is not a finite number in
// [0, 1] (naming the image and pixel).
std::vector<std::uint8_t> tile_images(std::span<const float> images, std::size_t side, std::size_t columns,
                                      std::size_t& width, std::size_t& height);

// The SVG; throws std::invalid_argument for side, columns or scale 0, no
// panels, or a panel tile_images refuses.
std::string svg_image_grid(const ImageGridFigure& figure);

}  // namespace mpverify::report
