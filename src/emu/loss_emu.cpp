#include "emu/loss_emu.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "emu/accumulate.h"
#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "ops/fp64_math.h"

namespace mpverify::emu {

namespace {

// The loss is a float: sum / count rounded once to fp32.
float mean_to_fp32(double sum, std::size_t count, Counters* counters) {
  static const formats::Format fp32 = formats::parse_format("fp32");
  return round_value(fp32, sum / static_cast<double>(count), counters);
}

std::string site(std::string_view op, const char* tensor) {
  std::string s(op);
  s += '.';
  s += tensor;
  return s;
}

// The rows of the softmax: the max of each row (exact: a comparison) and its
// sum of exp(z - max) accumulated in the policy's format.
struct RowSoftmax {
  double max, sum_exp;
};

RowSoftmax row_softmax(std::span<const float> z, const formats::Format& accumulate, Counters* counters) {
  const double max = *std::max_element(z.begin(), z.end());
  Accumulator acc(accumulate, counters);
  for (float v : z) acc.add(std::exp(static_cast<double>(v) - max));
  return {max, acc.value()};
}

}  // namespace

float softmax_cross_entropy_emu(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                std::span<const std::int32_t> labels, const LossPolicy& policy, CounterSet* counters) {
  s.check(logits.size(), labels);
  constexpr std::string_view op = "softmax_cross_entropy";
  const auto z = quantized_copy(logits, policy.input, site_counters(counters, site(op, "logits")));
  Counters* sum_exp = site_counters(counters, site(op, "sum_exp"));
  Accumulator batch(policy.accumulate, site_counters(counters, site(op, "batch_sum")));
  const auto m = static_cast<std::size_t>(s.classes);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const auto row = std::span<const float>(z).subspan(i * m, m);
    const RowSoftmax r = row_softmax(row, policy.accumulate, sum_exp);
    batch.add(std::log(r.sum_exp) + (r.max - row[static_cast<std::size_t>(labels[i])]));
  }
  return mean_to_fp32(batch.value(), labels.size(), site_counters(counters, site(op, "loss")));
}

void softmax_cross_entropy_backward_emu(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                        std::span<const std::int32_t> labels, std::span<float> dlogits,
                                        const LossPolicy& policy, CounterSet* counters) {
  s.check(logits.size(), labels);
  ops::check_same_size("softmax_cross_entropy_backward", "dlogits", dlogits.size(), "logits", logits.size());
  constexpr std::string_view op = "softmax_cross_entropy_backward";
  const auto z = quantized_copy(logits, policy.input, site_counters(counters, site(op, "logits")));
  Counters* sum_exp = site_counters(counters, site(op, "sum_exp"));
  const auto m = static_cast<std::size_t>(s.classes);
  std::vector<double> exact(z.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const auto row = std::span<const float>(z).subspan(i * m, m);
    const RowSoftmax r = row_softmax(row, policy.accumulate, sum_exp);
    for (std::size_t j = 0; j < m; ++j) {
      const double p = std::exp(static_cast<double>(row[j]) - r.max) / r.sum_exp;
      exact[i * m + j] = (p - (static_cast<std::int32_t>(j) == labels[i] ? 1.0 : 0.0)) / s.batch;
    }
  }
  round_values(exact, dlogits, policy.output, site_counters(counters, site(op, "dlogits")));
}

float mse_emu(std::span<const float> y, std::span<const float> t, const LossPolicy& policy, CounterSet* counters) {
  ops::check_same_size("mse", "y", y.size(), "t", t.size());
  ops::check_not_empty("mse", "y", y.size());
  const auto yr = quantized_copy(y, policy.input, site_counters(counters, "mse.y"));
  Accumulator sum(policy.accumulate, site_counters(counters, "mse.sum"));
  for (std::size_t i = 0; i < yr.size(); ++i) {
    const double d = static_cast<double>(yr[i]) - t[i];
    sum.add(d * d);
  }
  return mean_to_fp32(sum.value(), yr.size(), site_counters(counters, "mse.loss"));
}

void mse_backward_emu(std::span<const float> y, std::span<const float> t, std::span<float> dy,
                      const LossPolicy& policy, CounterSet* counters) {
  ops::check_same_size("mse_backward", "y", y.size(), "t", t.size());
  ops::check_same_size("mse_backward", "dy", dy.size(), "y", y.size());
  ops::check_not_empty("mse_backward", "y", y.size());
  const auto yr = quantized_copy(y, policy.input, site_counters(counters, "mse_backward.y"));
  const auto n = static_cast<double>(yr.size());
  std::vector<double> exact(yr.size());
  for (std::size_t i = 0; i < yr.size(); ++i) exact[i] = 2 * (static_cast<double>(yr[i]) - t[i]) / n;
  round_values(exact, dy, policy.output, site_counters(counters, "mse_backward.dy"));
}

float bce_with_logits_emu(std::span<const float> x, std::span<const float> t, const LossPolicy& policy,
                          CounterSet* counters) {
  ops::check_same_size("bce_with_logits", "x", x.size(), "t", t.size());
  ops::check_not_empty("bce_with_logits", "x", x.size());
  ops::check_probability_targets("bce_with_logits", t);
  const auto xr = quantized_copy(x, policy.input, site_counters(counters, "bce_with_logits.x"));
  Accumulator sum(policy.accumulate, site_counters(counters, "bce_with_logits.sum"));
  for (std::size_t i = 0; i < xr.size(); ++i) sum.add(ops::bce_with_logits_term_fp64(xr[i], t[i]));
  return mean_to_fp32(sum.value(), xr.size(), site_counters(counters, "bce_with_logits.loss"));
}

void bce_with_logits_backward_emu(std::span<const float> x, std::span<const float> t, std::span<float> dx,
                                  const LossPolicy& policy, CounterSet* counters) {
  ops::check_same_size("bce_with_logits_backward", "x", x.size(), "t", t.size());
  ops::check_same_size("bce_with_logits_backward", "dx", dx.size(), "x", x.size());
  ops::check_not_empty("bce_with_logits_backward", "x", x.size());
  ops::check_probability_targets("bce_with_logits_backward", t);
  const auto xr = quantized_copy(x, policy.input, site_counters(counters, "bce_with_logits_backward.x"));
  const auto n = static_cast<double>(xr.size());
  std::vector<double> exact(xr.size());
  for (std::size_t i = 0; i < xr.size(); ++i) exact[i] = ops::bce_with_logits_derivative_fp64(xr[i], t[i]) / n;
  round_values(exact, dx, policy.output, site_counters(counters, "bce_with_logits_backward.dx"));
}

}  // namespace mpverify::emu
