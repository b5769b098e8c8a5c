#include "emu/batch_norm_bounds.h"

#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "emu/quantize.h"
#include "ops/size_check.h"

namespace mpverify::emu {

namespace {

void require_values(std::span<const float> v, const formats::Format& f, const char* what) {
  std::vector<float> r(v.begin(), v.end());
  quantize(r, r, QuantizeSpec{f});
  for (std::size_t i = 0; i < v.size(); ++i)
    if (std::bit_cast<std::uint32_t>(r[i]) != std::bit_cast<std::uint32_t>(v[i]) && !std::isnan(v[i])) {
      std::string message = "batch_norm bounds: ";
      message += what;
      message += " must hold values of ";
      message += f.name;
      throw std::invalid_argument(message);
    }
}

// Half the smallest subnormal: the absolute part of a round-to-nearest error
// (with subnormals flushed, the whole smallest normal).
double absolute_rounding(const formats::Format& f) { return f.subnormals ? f.min_subnormal() / 2 : f.min_normal(); }

// The bound of compare.h's normwise tier: ||emu_err + ref_err|| / (||exact|| - ||ref_err||).
// The FP64 quantities the bounds are evaluated from are good to about 2^-28
// relatively; the factor 1 + 2^-20 covers that.
class Normwise {
 public:
  void add(double emu_err, double ref_err, double exact) {
    if (std::isnan(emu_err)) emu_err = INFINITY;  // 0 * infinity inside an unbounded term
    num_ += (emu_err + ref_err) * (emu_err + ref_err);
    ref_ += ref_err * ref_err;
    exact_ += exact * exact;
  }
  double bound() const {
    const double denominator = std::sqrt(exact_) - std::sqrt(ref_);
    return denominator > 0 ? std::sqrt(num_) / denominator * (1 + 0x1p-20) : INFINITY;
  }

 private:
  double num_ = 0, ref_ = 0, exact_ = 0;
};

double gamma_or_infinity(std::size_t k, double u) {
  return static_cast<double>(k) * u < 1 ? compare::gamma(static_cast<std::int64_t>(k), u) : INFINITY;
}

}  // namespace

BatchNormForwardBounds batch_norm_forward_bounds(const ops::ChannelShape& s, const ops::BatchNormParams& p,
                                                 std::span<const float> x, std::span<const float> gamma,
                                                 std::span<const float> beta, const BatchNormPolicy& policy) {
  const char* op = "batch_norm_forward_bounds";
  ops::check_batch_norm_shape(s, op);
  ops::check_size(op, "x", x.size(), s.size());
  ops::check_size(op, "gamma", gamma.size(), static_cast<std::size_t>(s.c));
  ops::check_size(op, "beta", beta.size(), static_cast<std::size_t>(s.c));
  require_values(x, policy.input, "x");
  require_values(gamma, policy.parameters, "gamma");
  require_values(beta, policy.parameters, "beta");
  const std::size_t m = s.channel_elements();
  const double md = static_cast<double>(m);
  const double uS = policy.statistics.unit_roundoff(), uo = policy.output.unit_roundoff();
  const double tiny_out = absolute_rounding(policy.output);
  const double gD = gamma_or_infinity(block_sum_depth(m, policy.lanes), uS);
  const double r64 = compare::gamma(static_cast<std::int64_t>(m) + 5, 0x1p-53);
  if (!std::isfinite(gD)) return {INFINITY, INFINITY, INFINITY};
  const double eta = std::pow(1 + uS, 3) * (1 + gD) - 1;
  Normwise mean_b, invstd_b, y_b;
  for (int c = 0; c < s.c; ++c) {
    double sum = 0, abs_sum = 0;
    for (std::size_t i = 0; i < m; ++i) {
      sum += x[s.index(c, i)];
      abs_sum += std::fabs(x[s.index(c, i)]);
    }
    const double mu = sum / md, a_mean = abs_sum / md;
    double sq = 0;
    for (std::size_t i = 0; i < m; ++i) sq += (x[s.index(c, i)] - mu) * (x[s.index(c, i)] - mu);
    const double var = sq / md, big_v = var + p.eps, inv = 1 / std::sqrt(big_v);

    const double eps_mu = gD * a_mean + uS * (std::fabs(mu) + gD * a_mean);
    mean_b.add(eps_mu, 0x1p-24 * std::fabs(mu) + r64 * a_mean, mu);

    const double rho = (var * eta + eps_mu * eps_mu * (1 + eta) + p.eps * uS) / big_v;
    const double beta_c = rho < 1 ? (1 + uS) / ((1 - uS) * std::sqrt((1 - rho) * (1 - uS))) - 1 : INFINITY;
    // The reference's invstd: its variance errs by gamma_{M+2}(2^-53) relatively
    // and by its mean's error squared, (r64 A)^2, over var + eps.
    const double ref_inv_rel = r64 + (r64 * a_mean) * (r64 * a_mean) / big_v;
    invstd_b.add(beta_c * inv, (0x1p-24 + ref_inv_rel) * inv, inv);

    const double g = std::fabs(gamma[c]);
    const double fac = (1 + beta_c) * (1 + uS);
    for (std::size_t i = 0; i < m; ++i) {
      const double a = x[s.index(c, i)] - mu;
      const double y = gamma[c] * a * inv + beta[c];
      const double d_err = eps_mu * (1 + uS) + uS * std::fabs(a);
      const double xhat_err = inv * (d_err * fac + std::fabs(a) * (fac - 1));
      const double emu_err = g * xhat_err + uo * (std::fabs(y) + g * xhat_err) + tiny_out;
      const double ref_err = 0x1p-24 * std::fabs(y) + 0x1p-150 +
                             g * inv * (std::fabs(a) * ref_inv_rel + r64 * a_mean * (1 + ref_inv_rel)) +
                             0x1p-52 * (g * std::fabs(a) * inv + std::fabs(beta[c]));
      y_b.add(emu_err, ref_err, y);
    }
  }
  return {y_b.bound(), mean_b.bound(), invstd_b.bound()};
}

BatchNormBackwardBounds batch_norm_backward_bounds(const ops::ChannelShape& s, std::span<const float> x,
                                                   std::span<const float> dy, std::span<const float> gamma,
                                                   std::span<const float> mean, std::span<const float> invstd,
                                                   const BatchNormPolicy& policy) {
  const char* op = "batch_norm_backward_bounds";
  ops::check_batch_norm_shape(s, op);
  ops::check_size(op, "x", x.size(), s.size());
  ops::check_size(op, "dy", dy.size(), s.size());
  for (auto [what, v] : {std::pair{"gamma", gamma}, std::pair{"mean", mean}, std::pair{"invstd", invstd}})
    ops::check_size(op, what, v.size(), static_cast<std::size_t>(s.c));
  require_values(x, policy.input, "x");
  require_values(dy, policy.input, "dy");
  require_values(gamma, policy.parameters, "gamma");
  require_values(mean, policy.statistics, "mean");
  require_values(invstd, policy.statistics, "invstd");
  const std::size_t m = s.channel_elements();
  const double md = static_cast<double>(m);
  const double uS = policy.statistics.unit_roundoff(), uo = policy.output.unit_roundoff();
  const double uP = policy.parameters.unit_roundoff();
  const double tiny_out = absolute_rounding(policy.output), tiny_p = absolute_rounding(policy.parameters);
  const double gD = gamma_or_infinity(block_sum_depth(m, policy.lanes), uS);
  if (!std::isfinite(gD)) return {INFINITY, INFINITY, INFINITY};
  const double g2 = compare::gamma(2, uS), g5 = compare::gamma(5, 0x1p-53);
  const double r64 = compare::gamma(static_cast<std::int64_t>(m) + 5, 0x1p-53);
  Normwise dx_b, dgamma_b, dbeta_b;
  std::vector<double> xhat(m);
  for (int c = 0; c < s.c; ++c) {
    double abs_dy = 0, abs_dyxhat = 0, dbeta = 0, dgamma = 0;
    for (std::size_t i = 0; i < m; ++i) {
      const std::size_t k = s.index(c, i);
      xhat[i] = (x[k] - static_cast<double>(mean[c])) * invstd[c];
      abs_dy += std::fabs(dy[k]);
      abs_dyxhat += std::fabs(dy[k] * xhat[i]);
      dbeta += dy[k];
      dgamma += dy[k] * xhat[i];
    }
    const double e_beta = gD * abs_dy;
    const double e_gamma = g2 * abs_dyxhat + gD * (1 + g2) * abs_dyxhat;
    dbeta_b.add(e_beta + uP * (std::fabs(dbeta) + e_beta) + tiny_p, 0x1p-24 * std::fabs(dbeta) + 0x1p-150 + r64 * abs_dy,
                dbeta);
    dgamma_b.add(e_gamma + uP * (std::fabs(dgamma) + e_gamma) + tiny_p,
                 0x1p-24 * std::fabs(dgamma) + 0x1p-150 + r64 * abs_dyxhat, dgamma);
    const double scale = std::fabs(static_cast<double>(gamma[c]) * invstd[c] / md);
    for (std::size_t i = 0; i < m; ++i) {
      const std::size_t k = s.index(c, i);
      const double dx = static_cast<double>(gamma[c]) * invstd[c] / md * (md * dy[k] - dbeta - xhat[i] * dgamma);
      const double ax = std::fabs(xhat[i]);
      const double terms = md * std::fabs(dy[k]) + std::fabs(dbeta) + ax * std::fabs(dgamma);
      const double bracket_err = e_beta + g2 * ax * (std::fabs(dgamma) + e_gamma) + ax * e_gamma;
      const double v_err = scale * (bracket_err + g5 * (terms + bracket_err));
      dx_b.add(v_err + uo * (std::fabs(dx) + v_err) + tiny_out,
               0x1p-24 * std::fabs(dx) + 0x1p-150 + scale * r64 * (terms + abs_dy + ax * abs_dyxhat), dx);
    }
  }
  return {dx_b.bound(), dgamma_b.bound(), dbeta_b.bound()};
}

double batch_norm_gpu_dx_bound(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> dy,
                               std::span<const float> gamma, std::span<const float> mean,
                               std::span<const float> invstd, std::span<const float> emu_dx,
                               std::span<const float> emu_dgamma, std::span<const float> emu_dbeta) {
  const char* op = "batch_norm_gpu_dx_bound";
  ops::check_batch_norm_shape(s, op);
  for (auto [what, v] : {std::pair{"x", x}, std::pair{"dy", dy}, std::pair{"emu_dx", emu_dx}})
    ops::check_size(op, what, v.size(), s.size());
  for (auto [what, v] : {std::pair{"gamma", gamma}, std::pair{"mean", mean}, std::pair{"invstd", invstd},
                         std::pair{"emu_dgamma", emu_dgamma}, std::pair{"emu_dbeta", emu_dbeta}})
    ops::check_size(op, what, v.size(), static_cast<std::size_t>(s.c));
  const formats::Format fp16 = formats::parse_format("fp16");
  const double u = fp16.unit_roundoff(), tiny = absolute_rounding(fp16);
  const double g_path = compare::gamma(6, 0x1p-24) + compare::gamma(5, 0x1p-53);
  const std::size_t m = s.channel_elements();
  const double md = static_cast<double>(m);
  std::vector<float> xh(x.begin(), x.end()), dyh(dy.begin(), dy.end());
  quantize(xh, xh, QuantizeSpec{fp16});
  quantize(dyh, dyh, QuantizeSpec{fp16});
  double num = 0, den = 0;
  for (int c = 0; c < s.c; ++c) {
    const double scale = std::fabs(static_cast<double>(gamma[c]) * invstd[c] / md);
    for (std::size_t i = 0; i < m; ++i) {
      const std::size_t k = s.index(c, i);
      const float xhat = (xh[k] - mean[c]) * invstd[c];  // fp32, as both sides compute it (no contraction)
      const double terms = md * std::fabs(dyh[k]) + std::fabs(emu_dbeta[c]) + std::fabs(xhat * static_cast<double>(emu_dgamma[c]));
      const double delta = g_path * scale * terms;
      const double e = delta * (1 + u) + 2 * u * (std::fabs(emu_dx[k]) + tiny) / (1 - u) + 2 * tiny;
      num += e * e;
      den += static_cast<double>(emu_dx[k]) * emu_dx[k];
    }
  }
  return den > 0 ? std::sqrt(num / den) : INFINITY;
}

}  // namespace mpverify::emu
