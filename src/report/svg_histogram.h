// Exponent histograms drawn as a standalone SVG: one panel per series (e.g.
// one per loss scale), bars of the fraction of the series' values in each
// binade [2^e, 2^(e+1)), on a shared exponent axis, with vertical marks (a
// format's smallest subnormal, smallest normal, largest finite; or 2^p for
// swamping). Values outside the bins (zeros, NaN, infinities, out of range)
// are listed in each panel's caption, not drawn. The output depends only on
// the inputs (no clock, no randomness), so the same data gives the same file.
#pragma once

#include <string>
#include <vector>

#include "emu/exponent_histogram.h"

namespace mpverify::report {

struct HistogramSeries {
  std::string label;
  emu::ExponentHistogram histogram;
};

struct AxisMark {
  std::string label;
  int exponent = 0;  // drawn at the left edge of this binade
};

std::string svg_histogram(const std::string& title, const std::vector<HistogramSeries>& series,
                          const std::vector<AxisMark>& marks);

}  // namespace mpverify::report
