#include "ops/max_pool_argmax.h"

#include <cmath>

#include "ops/size_check.h"

namespace mpverify::ops {

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

}  // namespace mpverify::ops
