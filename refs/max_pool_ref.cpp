#include "refs/max_pool_ref.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "ops/max_pool_argmax.h"
#include "ops/size_check.h"

namespace mpverify::refs {

std::vector<double> max_pool_fp64(const ops::PoolShape& p, std::span<const double> x) {
  const std::vector<std::size_t> win = ops::max_pool_argmax(p, x);
  std::vector<double> y(win.size());
  for (std::size_t o = 0; o < win.size(); ++o) y[o] = x[win[o]];
  return y;
}

std::vector<double> max_pool_backward_fp64(const ops::PoolShape& p, std::span<const double> x,
                                           std::span<const double> dy) {
  const std::vector<std::size_t> win = ops::max_pool_argmax(p, x);
  ops::check_size("max_pool_backward", "dy", dy.size(), p.y_size());
  std::vector<double> dx(x.size(), 0.0);
  for (std::size_t o = 0; o < win.size(); ++o) dx[win[o]] += dy[o];
  return dx;
}

void max_pool_ref(const ops::PoolShape& p, std::span<const float> x, std::span<float> y) {
  const std::vector<std::size_t> win = ops::max_pool_argmax(p, x);
  ops::check_size("max_pool", "y", y.size(), p.y_size());
  for (std::size_t o = 0; o < win.size(); ++o) y[o] = x[win[o]];
}

void max_pool_backward_ref(const ops::PoolShape& p, std::span<const float> x, std::span<const float> dy,
                           std::span<float> dx) {
  p.check_dims("max_pool_backward");
  ops::check_size("max_pool_backward", "x", x.size(), p.x_size());
  ops::check_size("max_pool_backward", "dy", dy.size(), p.y_size());
  ops::check_size("max_pool_backward", "dx", dx.size(), p.x_size());
  const std::vector<double> dx64 = max_pool_backward_fp64(p, std::vector<double>(x.begin(), x.end()),
                                                          std::vector<double>(dy.begin(), dy.end()));
  for (std::size_t i = 0; i < dx.size(); ++i) dx[i] = static_cast<float>(dx64[i]);
}

}  // namespace mpverify::refs
