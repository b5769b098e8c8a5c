#include "refs/batch_norm_ref.h"

#include <cmath>
#include <stdexcept>
#include <initializer_list>
#include <string>
#include <utility>

#include "ops/size_check.h"
#include "refs/fp64_copies.h"

namespace mpverify::refs {

using detail::widen;
using detail::narrow;

namespace {

void check_per_channel(const ops::ChannelShape& s, const char* op, std::initializer_list<std::pair<const char*, std::size_t>> spans) {
  for (const auto& [name, size] : spans) ops::check_size(op, name, size, static_cast<std::size_t>(s.c));
}

}  // namespace

BatchNormForward64 batch_norm_fp64(const ops::ChannelShape& s, const ops::BatchNormParams& p, std::span<const double> x,
                                   std::span<const double> gamma, std::span<const double> beta,
                                   std::span<const double> running_mean, std::span<const double> running_var) {
  ops::check_batch_norm_shape(s, "batch_norm");
  ops::check_size("batch_norm", "x", x.size(), s.size());
  check_per_channel(s, "batch_norm",
                    {{"gamma", gamma.size()}, {"beta", beta.size()}, {"running_mean", running_mean.size()},
                     {"running_var", running_var.size()}});
  const std::size_t m = s.channel_elements();
  const double md = static_cast<double>(m);
  BatchNormForward64 out;
  out.y.resize(x.size());
  for (int c = 0; c < s.c; ++c) {
    double sum = 0;
    for (std::size_t i = 0; i < m; ++i) sum += x[s.index(c, i)];
    const double mean = sum / md;
    double sq = 0;  // two passes: no cancellation between E[x^2] and E[x]^2
    for (std::size_t i = 0; i < m; ++i) sq += (x[s.index(c, i)] - mean) * (x[s.index(c, i)] - mean);
    const double invstd = 1.0 / std::sqrt(sq / md + p.eps);
    for (std::size_t i = 0; i < m; ++i) {
      const std::size_t k = s.index(c, i);
      out.y[k] = gamma[c] * ((x[k] - mean) * invstd) + beta[c];
    }
    out.mean.push_back(mean);
    out.invstd.push_back(invstd);
    out.running_mean.push_back((1 - p.momentum) * running_mean[c] + p.momentum * mean);
    out.running_var.push_back((1 - p.momentum) * running_var[c] + p.momentum * sq / (md - 1));
  }
  return out;
}

BatchNormBackward64 batch_norm_backward_fp64(const ops::ChannelShape& s, std::span<const double> x,
                                             std::span<const double> dy, std::span<const double> gamma,
                                             std::span<const double> mean, std::span<const double> invstd) {
  ops::check_batch_norm_shape(s, "batch_norm_backward");
  ops::check_size("batch_norm_backward", "x", x.size(), s.size());
  ops::check_size("batch_norm_backward", "dy", dy.size(), s.size());
  check_per_channel(s, "batch_norm_backward",
                    {{"gamma", gamma.size()}, {"mean", mean.size()}, {"invstd", invstd.size()}});
  const std::size_t m = s.channel_elements();
  const double md = static_cast<double>(m);
  BatchNormBackward64 out;
  out.dx.resize(x.size());
  for (int c = 0; c < s.c; ++c) {
    double dbeta = 0, dgamma = 0;
    for (std::size_t i = 0; i < m; ++i) {
      const std::size_t k = s.index(c, i);
      dbeta += dy[k];
      dgamma += dy[k] * ((x[k] - mean[c]) * invstd[c]);
    }
    const double scale = gamma[c] * invstd[c] / md;
    for (std::size_t i = 0; i < m; ++i) {
      const std::size_t k = s.index(c, i);
      out.dx[k] = scale * (md * dy[k] - dbeta - (x[k] - mean[c]) * invstd[c] * dgamma);
    }
    out.dgamma.push_back(dgamma);
    out.dbeta.push_back(dbeta);
  }
  return out;
}

void batch_norm_ref(const ops::ChannelShape& s, const ops::BatchNormParams& p, std::span<const float> x,
                    std::span<const float> gamma, std::span<const float> beta, std::span<float> y,
                    std::span<float> mean, std::span<float> invstd, std::span<float> running_mean,
                    std::span<float> running_var) {
  ops::check_batch_norm_shape(s, "batch_norm");
  ops::check_size("batch_norm", "y", y.size(), s.size());
  check_per_channel(s, "batch_norm", {{"mean", mean.size()}, {"invstd", invstd.size()}});
  const BatchNormForward64 r = batch_norm_fp64(s, p, widen(x), widen(gamma), widen(beta), widen(running_mean),
                                               widen(running_var));
  narrow(r.y, y);
  narrow(r.mean, mean);
  narrow(r.invstd, invstd);
  narrow(r.running_mean, running_mean);
  narrow(r.running_var, running_var);
}

void batch_norm_backward_ref(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> dy,
                             std::span<const float> gamma, std::span<const float> mean,
                             std::span<const float> invstd, std::span<float> dx, std::span<float> dgamma,
                             std::span<float> dbeta) {
  ops::check_batch_norm_shape(s, "batch_norm_backward");
  ops::check_size("batch_norm_backward", "dx", dx.size(), s.size());
  check_per_channel(s, "batch_norm_backward", {{"dgamma", dgamma.size()}, {"dbeta", dbeta.size()}});
  const BatchNormBackward64 r =
      batch_norm_backward_fp64(s, widen(x), widen(dy), widen(gamma), widen(mean), widen(invstd));
  narrow(r.dx, dx);
  narrow(r.dgamma, dgamma);
  narrow(r.dbeta, dbeta);
}

}  // namespace mpverify::refs
