#include "nn/conv_lowering.h"

#include <algorithm>
#include <cstddef>

namespace mpverify::nn {

namespace {

// The input element patch column (ci, ri, si) of output position (image, oh, ow) reads, or -1 in the padding.
std::ptrdiff_t source(const ops::Conv2dShape& s, int image, int oh, int ow, int ci, int ri, int si) {
  const int ih = oh * s.stride - s.pad + ri, iw = ow * s.stride - s.pad + si;
  if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) return -1;
  return ((static_cast<std::ptrdiff_t>(image) * s.c + ci) * s.h + ih) * s.w + iw;
}

// Calls f(patch index, source index) for every patch element, in P's row-major order.
template <typename F>
void for_each_patch_element(const ops::Conv2dShape& s, F&& f) {
  std::size_t at = 0;
  for (int image = 0; image < s.n; ++image)
    for (int oh = 0; oh < s.p(); ++oh)
      for (int ow = 0; ow < s.q(); ++ow)
        for (int ci = 0; ci < s.c; ++ci)
          for (int ri = 0; ri < s.r; ++ri)
            for (int si = 0; si < s.s; ++si) f(at++, source(s, image, oh, ow, ci, ri, si));
}

}  // namespace

std::vector<float> im2col_rows(const ops::Conv2dShape& s, std::span<const float> x) {
  s.check(x.size(), s.weight_size(), s.y_size());
  std::vector<float> patches(static_cast<std::size_t>(s.n) * s.p() * s.q() * s.c * s.r * s.s, 0.0f);
  for_each_patch_element(s, [&](std::size_t at, std::ptrdiff_t from) {
    if (from >= 0) patches[at] = x[static_cast<std::size_t>(from)];
  });
  return patches;
}

void col2im_rows(const ops::Conv2dShape& s, std::span<const float> patches, std::span<float> dx) {
  s.check(dx.size(), s.weight_size(), s.y_size(), "dx");
  std::fill(dx.begin(), dx.end(), 0.0f);
  for_each_patch_element(s, [&](std::size_t at, std::ptrdiff_t to) {
    if (to >= 0) dx[static_cast<std::size_t>(to)] += patches[at];
  });
}

void positions_to_nchw(const ops::Conv2dShape& s, std::span<const float> rows, std::span<float> y) {
  const std::size_t pq = static_cast<std::size_t>(s.p()) * s.q(), k = static_cast<std::size_t>(s.k);
  for (std::size_t image = 0; image < static_cast<std::size_t>(s.n); ++image)
    for (std::size_t channel = 0; channel < k; ++channel)
      for (std::size_t position = 0; position < pq; ++position)
        y[(image * k + channel) * pq + position] = rows[(image * pq + position) * k + channel];
}

std::vector<float> nchw_to_positions(const ops::Conv2dShape& s, std::span<const float> y) {
  const std::size_t pq = static_cast<std::size_t>(s.p()) * s.q(), k = static_cast<std::size_t>(s.k);
  std::vector<float> rows(y.size());
  for (std::size_t image = 0; image < static_cast<std::size_t>(s.n); ++image)
    for (std::size_t channel = 0; channel < k; ++channel)
      for (std::size_t position = 0; position < pq; ++position)
        rows[(image * pq + position) * k + channel] = y[(image * k + channel) * pq + position];
  return rows;
}

}  // namespace mpverify::nn
