#include "emu/layer_norm_emu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "emu/accumulate.h"
#include "emu/block_sum.h"
#include "emu/quantize.h"
#include "ops/size_check.h"

namespace mpverify::emu {

namespace {

std::size_t rows_of(const ops::LayerNormShape& s) { return static_cast<std::size_t>(s.rows); }
std::size_t features_of(const ops::LayerNormShape& s) { return static_cast<std::size_t>(s.features); }

// dgamma_j and dbeta_j: per feature, the block sums over the rows of dy*xhat
// (exact products) and dy in S, then rounded to P.
void column_sums(const ops::LayerNormShape& s, std::span<const float> dyr, std::span<const float> xhat,
                 std::span<float> dgamma, std::span<float> dbeta, const LayerNormPolicy& policy,
                 CounterSet* counters) {
  Counters* c_dgamma = site_counters(counters, "layer_norm_backward.dgamma");
  Counters* c_dbeta = site_counters(counters, "layer_norm_backward.dbeta");
  const std::size_t R = rows_of(s), F = features_of(s);
  std::vector<double> dy_terms(R), dyxhat_terms(R);
  for (std::size_t j = 0; j < F; ++j) {
    for (std::size_t r = 0; r < R; ++r) {
      dy_terms[r] = dyr[r * F + j];
      dyxhat_terms[r] = static_cast<double>(dyr[r * F + j]) * xhat[r * F + j];
    }
    const double db = block_sum(dy_terms, policy.statistics, policy.lanes, c_dbeta);
    const double dg = block_sum(dyxhat_terms, policy.statistics, policy.lanes, c_dgamma);
    dbeta[j] = round_value(policy.parameters, db, c_dbeta);
    dgamma[j] = round_value(policy.parameters, dg, c_dgamma);
  }
}

}  // namespace

void layer_norm_emu(const ops::LayerNormShape& s, const ops::LayerNormParams& p, std::span<const float> x,
                    std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                    std::span<float> mean, std::span<float> rstd, const LayerNormPolicy& policy,
                    CounterSet* counters) {
  const char* op = "layer_norm_emu";
  ops::check_layer_norm_shape(s, op);
  const std::size_t R = rows_of(s), F = features_of(s);
  ops::check_size(op, "x", x.size(), s.size());
  ops::check_size(op, "y", y.size(), s.size());
  ops::check_size(op, "gamma", gamma.size(), F);
  ops::check_size(op, "beta", beta.size(), F);
  ops::check_size(op, "mean", mean.size(), R);
  ops::check_size(op, "rstd", rstd.size(), R);
  check_lanes(policy.lanes);
  const formats::Format& S = policy.statistics;
  const std::vector<float> xr = quantized_copy(x, policy.input, site_counters(counters, "layer_norm.x"));
  const std::vector<float> g = quantized_copy(gamma, policy.parameters, site_counters(counters, "layer_norm.gamma"));
  const std::vector<float> b = quantized_copy(beta, policy.parameters, site_counters(counters, "layer_norm.beta"));
  Counters* c_mean = site_counters(counters, "layer_norm.mean");
  Counters* c_centered = site_counters(counters, "layer_norm.centered");
  Counters* c_var = site_counters(counters, "layer_norm.var");
  Counters* c_rstd = site_counters(counters, "layer_norm.rstd");
  Counters* c_xhat = site_counters(counters, "layer_norm.xhat");
  Counters* c_y = site_counters(counters, "layer_norm.y");

  const double fd = static_cast<double>(F);
  const double eps = round_value(S, p.eps, nullptr);
  std::vector<double> terms(F), d(F), shift(F), products(F);
  std::vector<float> xhat(F);
  for (std::size_t r = 0; r < R; ++r) {
    for (std::size_t j = 0; j < F; ++j) terms[j] = xr[r * F + j];
    const double mu = round_value(S, block_sum(terms, S, policy.lanes, c_mean) / fd, c_mean);

    d.assign(terms.begin(), terms.end());
    std::fill(shift.begin(), shift.end(), -mu);
    add_lanes(S, d.data(), shift.data(), F, c_centered);  // d = x - mu, one rounding each
    for (std::size_t j = 0; j < F; ++j) terms[j] = d[j] * d[j];  // exact: d has at most 24 significant bits
    const double var = round_value(S, block_sum(terms, S, policy.lanes, c_var) / fd, c_var);
    const double root = round_value(S, std::sqrt(add_in_format(S, native_format(S), var, eps, c_rstd)), c_rstd);
    const double inv = round_value(S, 1.0 / root, c_rstd);

    for (std::size_t j = 0; j < F; ++j) products[j] = d[j] * inv;  // exact (<= 48 bits)
    round_values(products, xhat, S, c_xhat);
    // gamma * xhat is exact (<= 48 bits); the sum with beta is rounded once.
    for (std::size_t j = 0; j < F; ++j) {
      products[j] = static_cast<double>(g[j]) * xhat[j];
      shift[j] = b[j];
    }
    add_lanes(policy.output, products.data(), shift.data(), F, c_y);
    for (std::size_t j = 0; j < F; ++j) y[r * F + j] = static_cast<float>(products[j]);
    mean[r] = static_cast<float>(mu);
    rstd[r] = static_cast<float>(inv);
  }
}

void layer_norm_backward_emu(const ops::LayerNormShape& s, std::span<const float> x, std::span<const float> dy,
                             std::span<const float> gamma, std::span<const float> mean, std::span<const float> rstd,
                             std::span<float> dx, std::span<float> dgamma, std::span<float> dbeta,
                             const LayerNormPolicy& policy, CounterSet* counters) {
  const char* op = "layer_norm_backward_emu";
  ops::check_layer_norm_shape(s, op);
  const std::size_t R = rows_of(s), F = features_of(s);
  ops::check_size(op, "x", x.size(), s.size());
  ops::check_size(op, "dy", dy.size(), s.size());
  ops::check_size(op, "dx", dx.size(), s.size());
  ops::check_size(op, "gamma", gamma.size(), F);
  ops::check_size(op, "mean", mean.size(), R);
  ops::check_size(op, "rstd", rstd.size(), R);
  ops::check_size(op, "dgamma", dgamma.size(), F);
  ops::check_size(op, "dbeta", dbeta.size(), F);
  check_lanes(policy.lanes);
  const formats::Format& S = policy.statistics;
  const std::vector<float> xr = quantized_copy(x, policy.input, site_counters(counters, "layer_norm_backward.x"));
  const std::vector<float> dyr = quantized_copy(dy, policy.input, site_counters(counters, "layer_norm_backward.dy"));
  const std::vector<float> g =
      quantized_copy(gamma, policy.parameters, site_counters(counters, "layer_norm_backward.gamma"));
  Counters* c_saved = site_counters(counters, "layer_norm_backward.saved");
  const std::vector<float> mu = quantized_copy(mean, S, c_saved);
  const std::vector<float> inv = quantized_copy(rstd, S, c_saved);
  Counters* c_centered = site_counters(counters, "layer_norm_backward.centered");
  Counters* c_xhat = site_counters(counters, "layer_norm_backward.xhat");
  Counters* c_g = site_counters(counters, "layer_norm_backward.dy_gamma");
  Counters* c_sums = site_counters(counters, "layer_norm_backward.row_sums");
  Counters* c_dx = site_counters(counters, "layer_norm_backward.dx");

  const double fd = static_cast<double>(F);
  std::vector<float> xhat(s.size()), gd(F);
  std::vector<double> centered(F), shift(F), exact(F), b_terms(F), a_terms(F);
  for (std::size_t r = 0; r < R; ++r) {
    const auto row_xhat = std::span<float>(xhat).subspan(r * F, F);
    for (std::size_t j = 0; j < F; ++j) centered[j] = xr[r * F + j];
    std::fill(shift.begin(), shift.end(), -static_cast<double>(mu[r]));
    add_lanes(S, centered.data(), shift.data(), F, c_centered);  // x - mu, one rounding each
    for (std::size_t j = 0; j < F; ++j) exact[j] = centered[j] * inv[r];
    round_values(exact, row_xhat, S, c_xhat);
    for (std::size_t j = 0; j < F; ++j) exact[j] = static_cast<double>(dyr[r * F + j]) * g[j];
    round_values(exact, gd, S, c_g);
    for (std::size_t j = 0; j < F; ++j) {
      a_terms[j] = gd[j];
      b_terms[j] = static_cast<double>(gd[j]) * row_xhat[j];  // exact: at most 24 + 24 bits
    }
    const double a = block_sum(a_terms, S, policy.lanes, c_sums);
    const double b = block_sum(b_terms, S, policy.lanes, c_sums);
    const double scale = static_cast<double>(inv[r]) / fd;
    for (std::size_t j = 0; j < F; ++j) exact[j] = scale * (fd * gd[j] - a - row_xhat[j] * b);
    round_values(exact, dx.subspan(r * F, F), policy.output, c_dx);
  }
  column_sums(s, dyr, xhat, dgamma, dbeta, policy, counters);
}

}  // namespace mpverify::emu
