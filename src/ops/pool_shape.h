// The shape of a 2-D max pooling over NCHW (window r x s, stride, padding),
// shared by the three sides (refs::max_pool_ref, emu::max_pool_emu,
// gpu::max_pool_gpu).
#pragma once

#include <cstddef>

namespace mpverify::ops {

struct PoolShape {
  int n = 1, c = 1, h = 1, w = 1;  // input
  int r = 2, s = 2;                // window height, width
  int stride = 2, pad = 0;

  int out_h() const { return (h + 2 * pad - r) / stride + 1; }
  int out_w() const { return (w + 2 * pad - s) / stride + 1; }
  std::size_t x_size() const;
  std::size_t y_size() const;
  // The most windows one input element can belong to: ceil(r/stride) * ceil(s/stride).
  int max_windows_per_element() const;
  // Throws std::invalid_argument unless n, c, h, w, r, s, stride >= 1,
  // 0 <= pad < min(r, s) and the padded input holds one window.
  void check_dims(const char* op) const;
};

}  // namespace mpverify::ops
