#include "ops/pool_shape.h"

#include <stdexcept>
#include <string>

namespace mpverify::ops {

std::size_t PoolShape::x_size() const {
  return static_cast<std::size_t>(n) * static_cast<std::size_t>(c) * static_cast<std::size_t>(h) *
         static_cast<std::size_t>(w);
}

std::size_t PoolShape::y_size() const {
  return static_cast<std::size_t>(n) * static_cast<std::size_t>(c) * static_cast<std::size_t>(out_h()) *
         static_cast<std::size_t>(out_w());
}

int PoolShape::max_windows_per_element() const {
  return ((r + stride - 1) / stride) * ((s + stride - 1) / stride);
}

void PoolShape::check_dims(const char* op) const {
  std::string problem;
  if (n < 1 || c < 1 || h < 1 || w < 1 || r < 1 || s < 1 || stride < 1)
    problem = "n, c, h, w, r, s and stride must be at least 1";
  else if (pad < 0 || pad >= r || pad >= s)
    problem = "pad must satisfy 0 <= pad < r and pad < s (every window must hold an input element)";
  else if (h + 2 * pad < r || w + 2 * pad < s)
    problem = "the window is larger than the padded input";
  if (problem.empty()) return;
  std::string message(op);
  message += ": ";
  message += problem;
  throw std::invalid_argument(message);
}

}  // namespace mpverify::ops
