#include "refs/layer_norm_ref.h"

#include <cmath>

#include "ops/size_check.h"
#include "refs/fp64_copies.h"

namespace mpverify::refs {

using detail::widen;
using detail::narrow;

LayerNormForward64 layer_norm_fp64(const ops::LayerNormShape& s, const ops::LayerNormParams& p,
                                   std::span<const double> x, std::span<const double> gamma,
                                   std::span<const double> beta) {
  const char* op = "layer_norm";
  ops::check_layer_norm_shape(s, op);
  const auto F = static_cast<std::size_t>(s.features);
  ops::check_size(op, "x", x.size(), s.size());
  ops::check_size(op, "gamma", gamma.size(), F);
  ops::check_size(op, "beta", beta.size(), F);
  const double fd = static_cast<double>(F);
  LayerNormForward64 out;
  out.y.resize(x.size());
  for (std::size_t r = 0; r < static_cast<std::size_t>(s.rows); ++r) {
    const auto row = x.subspan(r * F, F);
    double sum = 0;
    for (double v : row) sum += v;
    const double mean = sum / fd;
    double sq = 0;  // two passes: no cancellation between E[x^2] and E[x]^2
    for (double v : row) sq += (v - mean) * (v - mean);
    const double rstd = 1.0 / std::sqrt(sq / fd + p.eps);
    for (std::size_t j = 0; j < F; ++j) out.y[r * F + j] = gamma[j] * ((row[j] - mean) * rstd) + beta[j];
    out.mean.push_back(mean);
    out.rstd.push_back(rstd);
  }
  return out;
}

LayerNormBackward64 layer_norm_backward_fp64(const ops::LayerNormShape& s, std::span<const double> x,
                                             std::span<const double> dy, std::span<const double> gamma,
                                             std::span<const double> mean, std::span<const double> rstd) {
  const char* op = "layer_norm_backward";
  ops::check_layer_norm_shape(s, op);
  const auto F = static_cast<std::size_t>(s.features), R = static_cast<std::size_t>(s.rows);
  ops::check_size(op, "x", x.size(), s.size());
  ops::check_size(op, "dy", dy.size(), s.size());
  ops::check_size(op, "gamma", gamma.size(), F);
  ops::check_size(op, "mean", mean.size(), R);
  ops::check_size(op, "rstd", rstd.size(), R);
  const double fd = static_cast<double>(F);
  LayerNormBackward64 out{std::vector<double>(x.size()), std::vector<double>(F, 0.0), std::vector<double>(F, 0.0)};
  std::vector<double> xhat(F);
  for (std::size_t r = 0; r < R; ++r) {
    double a = 0, b = 0;  // sum g, sum g xhat
    for (std::size_t j = 0; j < F; ++j) {
      const std::size_t k = r * F + j;
      xhat[j] = (x[k] - mean[r]) * rstd[r];
      const double g = dy[k] * gamma[j];
      a += g;
      b += g * xhat[j];
      out.dgamma[j] += dy[k] * xhat[j];
      out.dbeta[j] += dy[k];
    }
    for (std::size_t j = 0; j < F; ++j) {
      const std::size_t k = r * F + j;
      out.dx[k] = rstd[r] / fd * (fd * dy[k] * gamma[j] - a - xhat[j] * b);
    }
  }
  return out;
}

void layer_norm_ref(const ops::LayerNormShape& s, const ops::LayerNormParams& p, std::span<const float> x,
                    std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                    std::span<float> mean, std::span<float> rstd) {
  const char* op = "layer_norm";
  ops::check_layer_norm_shape(s, op);
  ops::check_size(op, "y", y.size(), s.size());
  ops::check_size(op, "mean", mean.size(), static_cast<std::size_t>(s.rows));
  ops::check_size(op, "rstd", rstd.size(), static_cast<std::size_t>(s.rows));
  const LayerNormForward64 r = layer_norm_fp64(s, p, widen(x), widen(gamma), widen(beta));
  narrow(r.y, y);
  narrow(r.mean, mean);
  narrow(r.rstd, rstd);
}

void layer_norm_backward_ref(const ops::LayerNormShape& s, std::span<const float> x, std::span<const float> dy,
                             std::span<const float> gamma, std::span<const float> mean, std::span<const float> rstd,
                             std::span<float> dx, std::span<float> dgamma, std::span<float> dbeta) {
  const char* op = "layer_norm_backward";
  ops::check_layer_norm_shape(s, op);
  ops::check_size(op, "dx", dx.size(), s.size());
  ops::check_size(op, "dgamma", dgamma.size(), static_cast<std::size_t>(s.features));
  ops::check_size(op, "dbeta", dbeta.size(), static_cast<std::size_t>(s.features));
  const LayerNormBackward64 r =
      layer_norm_backward_fp64(s, widen(x), widen(dy), widen(gamma), widen(mean), widen(rstd));
  narrow(r.dx, dx);
  narrow(r.dgamma, dgamma);
  narrow(r.dbeta, dbeta);
}

}  // namespace mpverify::refs
