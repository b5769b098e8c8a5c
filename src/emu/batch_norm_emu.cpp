#include "emu/batch_norm_emu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "emu/accumulate.h"
#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "ops/size_check.h"

namespace mpverify::emu {

namespace {

// One rounding of the exact a + b to f (sum_to_format takes the exact sum of
// any two doubles), counted as an addition.
double add_rounded(const formats::Format& f, double a, double b, Counters* counters) {
  return add_in_format(f, native_format(f), a, b, counters);
}

void check_per_channel(const ops::ChannelShape& s, const char* op, const char* what, std::size_t size) {
  ops::check_size(op, what, size, static_cast<std::size_t>(s.c));
}

}  // namespace

void batch_norm_emu(const ops::ChannelShape& s, const ops::BatchNormParams& p, std::span<const float> x,
                    std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                    std::span<float> mean, std::span<float> invstd, std::span<float> running_mean,
                    std::span<float> running_var, const BatchNormPolicy& policy, CounterSet* counters) {
  const char* op = "batch_norm_emu";
  ops::check_batch_norm_shape(s, op);
  ops::check_size(op, "x", x.size(), s.size());
  ops::check_size(op, "y", y.size(), s.size());
  check_per_channel(s, op, "gamma", gamma.size());
  check_per_channel(s, op, "beta", beta.size());
  check_per_channel(s, op, "mean", mean.size());
  check_per_channel(s, op, "invstd", invstd.size());
  check_per_channel(s, op, "running_mean", running_mean.size());
  check_per_channel(s, op, "running_var", running_var.size());
  check_lanes(policy.lanes);
  const formats::Format& S = policy.statistics;
  const std::vector<float> xr = quantized_copy(x, policy.input, site_counters(counters, "batch_norm.x"));
  const std::vector<float> g = quantized_copy(gamma, policy.parameters, site_counters(counters, "batch_norm.gamma"));
  const std::vector<float> b = quantized_copy(beta, policy.parameters, site_counters(counters, "batch_norm.beta"));
  const std::vector<float> rm = quantized_copy(running_mean, policy.parameters, nullptr);
  const std::vector<float> rv = quantized_copy(running_var, policy.parameters, nullptr);
  Counters* c_mean = site_counters(counters, "batch_norm.mean");
  Counters* c_centered = site_counters(counters, "batch_norm.centered");
  Counters* c_var = site_counters(counters, "batch_norm.var");
  Counters* c_invstd = site_counters(counters, "batch_norm.invstd");
  Counters* c_xhat = site_counters(counters, "batch_norm.xhat");
  Counters* c_y = site_counters(counters, "batch_norm.y");
  Counters* c_rm = site_counters(counters, "batch_norm.running_mean");
  Counters* c_rv = site_counters(counters, "batch_norm.running_var");

  const std::size_t m = s.channel_elements();
  const double md = static_cast<double>(m);
  const double eps = round_value(S, p.eps, nullptr);
  // Per channel, each step over all m elements at once (add_lanes, round_values):
  // element by element the same roundings as one add_rounded / round_value each.
  std::vector<double> terms(m), d(m), shift(m), products(m);
  std::vector<float> rounded(m);
  for (int c = 0; c < s.c; ++c) {
    for (std::size_t i = 0; i < m; ++i) terms[i] = xr[s.index(c, i)];
    const double mu = round_value(S, block_sum(terms, S, policy.lanes, c_mean) / md, c_mean);

    d.assign(terms.begin(), terms.end());
    std::fill(shift.begin(), shift.end(), -mu);
    add_lanes(S, d.data(), shift.data(), m, c_centered);  // d = x - mu, one rounding each
    for (std::size_t i = 0; i < m; ++i) terms[i] = d[i] * d[i];  // exact: d has at most 24 significant bits
    const double sq = block_sum(terms, S, policy.lanes, c_var);
    const double var = round_value(S, sq / md, c_var);
    const double root = round_value(S, std::sqrt(add_rounded(S, var, eps, c_invstd)), c_invstd);
    const double inv = round_value(S, 1.0 / root, c_invstd);

    for (std::size_t i = 0; i < m; ++i) products[i] = d[i] * inv;  // exact (<= 48 bits)
    round_values(products, rounded, S, c_xhat);                     // xhat
    // gamma * xhat is exact (<= 48 bits); the sum with beta is rounded once.
    for (std::size_t i = 0; i < m; ++i) products[i] = g[c] * static_cast<double>(rounded[i]);
    std::fill(shift.begin(), shift.end(), static_cast<double>(b[c]));
    add_lanes(policy.output, products.data(), shift.data(), m, c_y);
    for (std::size_t i = 0; i < m; ++i) y[s.index(c, i)] = static_cast<float>(products[i]);
    mean[c] = static_cast<float>(mu);
    invstd[c] = static_cast<float>(inv);
    const double keep = 1.0 - p.momentum;
    running_mean[c] = static_cast<float>(round_value(policy.parameters, keep * rm[c] + p.momentum * mu, c_rm));
    const double unbiased = sq / (md - 1.0);
    running_var[c] = static_cast<float>(round_value(policy.parameters, keep * rv[c] + p.momentum * unbiased, c_rv));
  }
}

void batch_norm_backward_emu(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> dy,
                             std::span<const float> gamma, std::span<const float> mean,
                             std::span<const float> invstd, std::span<float> dx, std::span<float> dgamma,
                             std::span<float> dbeta, const BatchNormPolicy& policy, CounterSet* counters) {
  const char* op = "batch_norm_backward_emu";
  ops::check_batch_norm_shape(s, op);
  ops::check_size(op, "x", x.size(), s.size());
  ops::check_size(op, "dy", dy.size(), s.size());
  ops::check_size(op, "dx", dx.size(), s.size());
  check_per_channel(s, op, "gamma", gamma.size());
  check_per_channel(s, op, "mean", mean.size());
  check_per_channel(s, op, "invstd", invstd.size());
  check_per_channel(s, op, "dgamma", dgamma.size());
  check_per_channel(s, op, "dbeta", dbeta.size());
  check_lanes(policy.lanes);
  const formats::Format& S = policy.statistics;
  const std::vector<float> xr = quantized_copy(x, policy.input, site_counters(counters, "batch_norm_backward.x"));
  const std::vector<float> dyr = quantized_copy(dy, policy.input, site_counters(counters, "batch_norm_backward.dy"));
  const std::vector<float> g = quantized_copy(gamma, policy.parameters, site_counters(counters, "batch_norm_backward.gamma"));
  Counters* c_saved = site_counters(counters, "batch_norm_backward.saved");
  const std::vector<float> mu = quantized_copy(mean, S, c_saved);
  const std::vector<float> inv = quantized_copy(invstd, S, c_saved);
  Counters* c_centered = site_counters(counters, "batch_norm_backward.centered");
  Counters* c_xhat = site_counters(counters, "batch_norm_backward.xhat");
  Counters* c_dbeta = site_counters(counters, "batch_norm_backward.dbeta");
  Counters* c_dgamma = site_counters(counters, "batch_norm_backward.dgamma");
  Counters* c_dx = site_counters(counters, "batch_norm_backward.dx");

  const std::size_t m = s.channel_elements();
  const double md = static_cast<double>(m);
  std::vector<double> xhat(m), dy_terms(m), dyxhat_terms(m), centered(m), shift(m), exact(m);
  std::vector<float> rounded(m);
  for (int c = 0; c < s.c; ++c) {
    for (std::size_t i = 0; i < m; ++i) centered[i] = xr[s.index(c, i)];
    std::fill(shift.begin(), shift.end(), -static_cast<double>(mu[c]));
    add_lanes(S, centered.data(), shift.data(), m, c_centered);  // x - mu, one rounding each
    for (std::size_t i = 0; i < m; ++i) exact[i] = centered[i] * inv[c];
    round_values(exact, rounded, S, c_xhat);
    for (std::size_t i = 0; i < m; ++i) {
      const std::size_t k = s.index(c, i);
      xhat[i] = rounded[i];
      dy_terms[i] = dyr[k];
      dyxhat_terms[i] = dyr[k] * xhat[i];  // exact: at most 24 + 24 bits
    }
    const double db = block_sum(dy_terms, S, policy.lanes, c_dbeta);
    const double dg = block_sum(dyxhat_terms, S, policy.lanes, c_dgamma);
    const double scale = static_cast<double>(g[c]) * inv[c] / md;
    for (std::size_t i = 0; i < m; ++i) exact[i] = scale * (md * dyr[s.index(c, i)] - db - xhat[i] * dg);
    round_values(exact, rounded, policy.output, c_dx);
    for (std::size_t i = 0; i < m; ++i) dx[s.index(c, i)] = rounded[i];
    dbeta[c] = static_cast<float>(round_value(policy.parameters, db, c_dbeta));
    dgamma[c] = static_cast<float>(round_value(policy.parameters, dg, c_dgamma));
  }
}

}  // namespace mpverify::emu
