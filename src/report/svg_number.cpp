#include "report/svg_number.h"

#include <cstdio>

namespace mpverify::report {

std::string svg_coordinate(double value) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.2f", value);
  return buf;
}

std::string tick_label(double value) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%g", value);
  return buf;
}

}  // namespace mpverify::report
