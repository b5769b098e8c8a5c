// Reference 2D max pooling over NCHW: window r x s, stride, padding.
//
// Semantics shared by the three sides (ref, emu, gpu):
//  - padding positions are never candidates (-inf that loses every tie), and
//    pad < r, pad < s guarantee every window holds an input element;
//  - candidates are visited in row-major window order; a candidate wins when
//    it is NaN and the best is not, or when it is greater than the best: so a
//    tie keeps the first index and the first NaN propagates;
//  - backward scatters dy of each window to its winner (the argmax), summing
//    where windows overlap (stride < window).
// Forward is exact (it selects an input); backward in FP64, rounded once to float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace mpverify::refs {

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

// For each output element (NCHW over out_h x out_w), the flat index into x of its winner.
std::vector<std::size_t> max_pool_argmax(const PoolShape& p, std::span<const float> x);
std::vector<std::size_t> max_pool_argmax(const PoolShape& p, std::span<const double> x);

// The oracle in double (finite-difference checks perturb its inputs).
std::vector<double> max_pool_fp64(const PoolShape& p, std::span<const double> x);
std::vector<double> max_pool_backward_fp64(const PoolShape& p, std::span<const double> x, std::span<const double> dy);

// Sizes: x, dx: x_size(); y, dy: y_size(). Throws std::invalid_argument naming a wrong one.
void max_pool_ref(const PoolShape& p, std::span<const float> x, std::span<float> y);
void max_pool_backward_ref(const PoolShape& p, std::span<const float> x, std::span<const float> dy,
                           std::span<float> dx);

}  // namespace mpverify::refs
