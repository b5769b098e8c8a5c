#include "refs/max_pool_ref.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "refs/size_check.h"

namespace mpverify::refs {

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

namespace {

template <typename T>
std::vector<std::size_t> argmax(const PoolShape& p, std::span<const T> x) {
  p.check_dims("max_pool");
  check_size("max_pool", "x", x.size(), p.x_size());
  std::vector<std::size_t> win;
  win.reserve(p.y_size());
  const std::size_t plane = static_cast<std::size_t>(p.h) * static_cast<std::size_t>(p.w);
  for (std::size_t nc = 0; nc < static_cast<std::size_t>(p.n) * static_cast<std::size_t>(p.c); ++nc)
    for (int oh = 0; oh < p.out_h(); ++oh)
      for (int ow = 0; ow < p.out_w(); ++ow) {
        bool found = false;
        std::size_t best = 0;
        for (int i = 0; i < p.r; ++i)
          for (int j = 0; j < p.s; ++j) {
            const int ih = oh * p.stride - p.pad + i, iw = ow * p.stride - p.pad + j;
            if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
            const std::size_t k = nc * plane + static_cast<std::size_t>(ih) * static_cast<std::size_t>(p.w) +
                                  static_cast<std::size_t>(iw);
            if (!found || (!std::isnan(x[best]) && (std::isnan(x[k]) || x[k] > x[best]))) best = k;
            found = true;
          }
        win.push_back(best);
      }
  return win;
}

}  // namespace

std::vector<std::size_t> max_pool_argmax(const PoolShape& p, std::span<const float> x) { return argmax(p, x); }
std::vector<std::size_t> max_pool_argmax(const PoolShape& p, std::span<const double> x) { return argmax(p, x); }

std::vector<double> max_pool_fp64(const PoolShape& p, std::span<const double> x) {
  const std::vector<std::size_t> win = max_pool_argmax(p, x);
  std::vector<double> y(win.size());
  for (std::size_t o = 0; o < win.size(); ++o) y[o] = x[win[o]];
  return y;
}

std::vector<double> max_pool_backward_fp64(const PoolShape& p, std::span<const double> x,
                                           std::span<const double> dy) {
  const std::vector<std::size_t> win = max_pool_argmax(p, x);
  check_size("max_pool_backward", "dy", dy.size(), p.y_size());
  std::vector<double> dx(x.size(), 0.0);
  for (std::size_t o = 0; o < win.size(); ++o) dx[win[o]] += dy[o];
  return dx;
}

void max_pool_ref(const PoolShape& p, std::span<const float> x, std::span<float> y) {
  const std::vector<std::size_t> win = max_pool_argmax(p, x);
  check_size("max_pool", "y", y.size(), p.y_size());
  for (std::size_t o = 0; o < win.size(); ++o) y[o] = x[win[o]];
}

void max_pool_backward_ref(const PoolShape& p, std::span<const float> x, std::span<const float> dy,
                           std::span<float> dx) {
  p.check_dims("max_pool_backward");
  check_size("max_pool_backward", "x", x.size(), p.x_size());
  check_size("max_pool_backward", "dy", dy.size(), p.y_size());
  check_size("max_pool_backward", "dx", dx.size(), p.x_size());
  const std::vector<double> dx64 = max_pool_backward_fp64(p, std::vector<double>(x.begin(), x.end()),
                                                          std::vector<double>(dy.begin(), dy.end()));
  for (std::size_t i = 0; i < dx.size(); ++i) dx[i] = static_cast<float>(dx64[i]);
}

}  // namespace mpverify::refs
