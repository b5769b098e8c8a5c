// How the SVG figures write numbers: coordinates with two decimals (a
// hundredth of a pixel; fixed, so that the same figure is the same bytes)
// and axis tick labels in the shortest form.
#pragma once

#include <string>

namespace mpverify::report {

std::string svg_coordinate(double value);  // "%.2f"
std::string tick_label(double value);      // "%g"

}  // namespace mpverify::report
