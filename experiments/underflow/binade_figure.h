// The figure of Micikevicius et al.'s Multibox SSD histogram, as an SVG: the
// share of a tensor's values in each binade [2^e, 2^(e+1)) (x: e, y: percent
// of ALL values, zeros included in the denominator), the FP32 zeros reported
// in each panel's caption (as the paper's "67% are zero" note, not drawn),
// and the target format's limits marked: dashed lines at its smallest
// subnormal, smallest normal and largest finite value, and the ranges shaded
// by what rounding to nearest-even into the format does to a value there
// (below half the smallest subnormal: zero; up to the smallest normal:
// subnormal; from the binade after the largest finite value: overflow).
// One panel per series (e.g. the first, middle and last step), on a shared
// exponent axis and a shared y axis so that panels compare by eye.
//
// Unlike report/svg_histogram.h (bars scaled to each panel's peak, ticks
// every 8 binades that overlap the end ticks), the y axis here is a labelled
// percentage and the tick spacing is chosen from the pixel width of a binade
// so that labels never overlap. The output depends only on the inputs.
#pragma once

#include <string>
#include <vector>

#include "emu/exponent_histogram.h"

namespace mpverify::experiments {

struct BinadePanel {
  std::string label;
  emu::ExponentHistogram histogram;
};

struct BinadeFigure {
  std::string title;
  std::string x_label = "log2 |value|: binade [2^e, 2^(e+1))";
  std::string format_name = "fp16";
  emu::FormatThresholds thresholds;
  std::vector<BinadePanel> panels;
};

// Geometry, so a test can recompute where a bar is drawn: binade e spans
// x = kBinadeLeft + (e - lo) * w .. + w, w = kBinadePlotWidth / (hi - lo + 1),
// where [lo, hi] covers every non-empty bin and every mark, widened by one
// binade each side; a bar of p percent is p / y_max * kBinadePanelHeight high.
inline constexpr double kBinadeLeft = 70, kBinadePlotWidth = 860, kBinadePanelHeight = 150;

// The tick spacing (in binades) for `bins` binades over kBinadePlotWidth:
// the smallest of 1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50 giving labels at
// least kMinTickPixels apart.
inline constexpr double kMinTickPixels = 36;
int binade_tick_step(int bins);

// A "nice" axis top for a largest bar of `peak` percent: the smallest of
// 1, 2, 5 times a power of ten that is >= peak (100 at most; 1 for an empty figure).
double binade_axis_top(double peak_percent);

std::string svg_binade_figure(const BinadeFigure& figure);

}  // namespace mpverify::experiments
