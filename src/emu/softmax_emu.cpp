#include "emu/softmax_emu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "emu/accumulate.h"
#include "emu/block_sum.h"
#include "emu/quantize.h"
#include "ops/size_check.h"

namespace mpverify::emu {

namespace {

// The row's max, NaN when any value is NaN (as torch.max propagates it).
double row_max(std::span<const float> row) {
  double m = -std::numeric_limits<double>::infinity();
  for (float v : row) {
    if (std::isnan(v)) return v;
    m = std::max(m, static_cast<double>(v));
  }
  return m;
}

}  // namespace

void softmax_emu(const ops::SoftmaxShape& s, std::span<const float> x, std::span<float> y,
                 const SoftmaxPolicy& policy, CounterSet* counters) {
  const char* op = "softmax_emu";
  ops::check_softmax_shape(s, op);
  ops::check_size(op, "x", x.size(), s.size());
  ops::check_size(op, "y", y.size(), s.size());
  check_lanes(policy.lanes);
  const formats::Format& A = policy.accumulate;
  const std::vector<float> xr = quantized_copy(x, policy.input, site_counters(counters, "softmax.x"));
  Counters* c_shifted = site_counters(counters, "softmax.shifted");
  Counters* c_exp = site_counters(counters, "softmax.exp");
  Counters* c_sum = site_counters(counters, "softmax.sum");
  Counters* c_y = site_counters(counters, "softmax.y");
  const auto C = static_cast<std::size_t>(s.cols);
  std::vector<double> d(C), shift(C), exact(C);
  std::vector<float> e(C);
  std::fill(y.begin(), y.end(), 0.0f);  // the masked columns
  for (std::size_t r = 0; r < static_cast<std::size_t>(s.rows); ++r) {
    const std::size_t v = s.visible(r), base = r * C;
    const std::span<const float> row(xr.data() + base, v);
    const double m = row_max(row);
    for (std::size_t j = 0; j < v; ++j) {
      d[j] = row[j];
      shift[j] = -m;
    }
    add_lanes(A, d.data(), shift.data(), v, c_shifted);  // x - m, one rounding each
    for (std::size_t j = 0; j < v; ++j) exact[j] = std::exp(d[j]);
    round_values(std::span<const double>(exact.data(), v), std::span<float>(e.data(), v), A, c_exp);
    for (std::size_t j = 0; j < v; ++j) exact[j] = e[j];
    const double sum = block_sum(std::span<const double>(exact.data(), v), A, policy.lanes, c_sum);
    for (std::size_t j = 0; j < v; ++j) exact[j] = e[j] / sum;
    round_values(std::span<const double>(exact.data(), v), y.subspan(base, v), policy.output, c_y);
  }
}

void softmax_backward_emu(const ops::SoftmaxShape& s, std::span<const float> y, std::span<const float> dy,
                          std::span<float> dx, const SoftmaxPolicy& policy, CounterSet* counters) {
  const char* op = "softmax_backward_emu";
  ops::check_softmax_shape(s, op);
  ops::check_size(op, "y", y.size(), s.size());
  ops::check_size(op, "dy", dy.size(), s.size());
  ops::check_size(op, "dx", dx.size(), s.size());
  check_lanes(policy.lanes);
  const std::vector<float> yr = quantized_copy(y, policy.input, site_counters(counters, "softmax_backward.y"));
  const std::vector<float> dyr = quantized_copy(dy, policy.input, site_counters(counters, "softmax_backward.dy"));
  Counters* c_dot = site_counters(counters, "softmax_backward.dot");
  Counters* c_dx = site_counters(counters, "softmax_backward.dx");
  const auto C = static_cast<std::size_t>(s.cols);
  std::vector<double> terms(C), exact(C);
  std::fill(dx.begin(), dx.end(), 0.0f);  // the masked columns
  for (std::size_t r = 0; r < static_cast<std::size_t>(s.rows); ++r) {
    const std::size_t v = s.visible(r), base = r * C;
    for (std::size_t j = 0; j < v; ++j) terms[j] = static_cast<double>(dyr[base + j]) * yr[base + j];  // exact
    const double dot = block_sum(std::span<const double>(terms.data(), v), policy.accumulate, policy.lanes, c_dot);
    for (std::size_t j = 0; j < v; ++j)
      exact[j] = static_cast<double>(yr[base + j]) * (static_cast<double>(dyr[base + j]) - dot);
    round_values(std::span<const double>(exact.data(), v), dx.subspan(base, v), policy.output, c_dx);
  }
}

}  // namespace mpverify::emu
