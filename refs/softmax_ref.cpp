#include "refs/softmax_ref.h"

#include <algorithm>
#include <cmath>

#include "ops/size_check.h"
#include "refs/fp64_copies.h"

namespace mpverify::refs {

using detail::widen;
using detail::narrow;

std::vector<double> softmax_fp64(const ops::SoftmaxShape& s, std::span<const double> x) {
  ops::check_softmax_shape(s, "softmax");
  ops::check_size("softmax", "x", x.size(), s.size());
  const auto C = static_cast<std::size_t>(s.cols);
  std::vector<double> y(x.size(), 0.0);
  for (std::size_t r = 0; r < static_cast<std::size_t>(s.rows); ++r) {
    const auto row = x.subspan(r * C, s.visible(r));
    // Subtracting the max keeps every exponent <= 0: nothing overflows.
    const double m = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (std::size_t j = 0; j < row.size(); ++j) sum += (y[r * C + j] = std::exp(row[j] - m));
    for (std::size_t j = 0; j < row.size(); ++j) y[r * C + j] /= sum;
  }
  return y;
}

std::vector<double> softmax_backward_fp64(const ops::SoftmaxShape& s, std::span<const double> y,
                                          std::span<const double> dy) {
  ops::check_softmax_shape(s, "softmax_backward");
  ops::check_size("softmax_backward", "y", y.size(), s.size());
  ops::check_size("softmax_backward", "dy", dy.size(), s.size());
  const auto C = static_cast<std::size_t>(s.cols);
  std::vector<double> dx(y.size(), 0.0);
  for (std::size_t r = 0; r < static_cast<std::size_t>(s.rows); ++r) {
    const std::size_t v = s.visible(r), base = r * C;
    double dot = 0;
    for (std::size_t j = 0; j < v; ++j) dot += dy[base + j] * y[base + j];
    for (std::size_t j = 0; j < v; ++j) dx[base + j] = y[base + j] * (dy[base + j] - dot);
  }
  return dx;
}

void softmax_ref(const ops::SoftmaxShape& s, std::span<const float> x, std::span<float> y) {
  ops::check_size("softmax", "y", y.size(), s.size());
  narrow(softmax_fp64(s, widen(x)), y);
}

void softmax_backward_ref(const ops::SoftmaxShape& s, std::span<const float> y, std::span<const float> dy,
                          std::span<float> dx) {
  ops::check_size("softmax_backward", "dx", dx.size(), s.size());
  narrow(softmax_backward_fp64(s, widen(y), widen(dy)), dx);
}

}  // namespace mpverify::refs
