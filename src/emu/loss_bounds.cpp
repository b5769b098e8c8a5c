#include "emu/loss_bounds.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "ops/fp64_math.h"

namespace mpverify::emu {

namespace {

constexpr double kU32 = 0x1p-24, kEta32 = 0x1p-149;  // fp32: unit roundoff, smallest subnormal
constexpr double kU16 = 0x1p-11, kEta16 = 0x1p-24;   // fp16: the GPU's input and gradient format
// The FP64 evaluations (the reference, and the emulator's "exact" math):
// each exp, log, log1p or arithmetic step errs by at most a few 2^-53
// relative; we charge 2^-50 per step (per term of a sum), well above that.
constexpr double kFp64 = 0x1p-50;
// CUDA's expf is within 2 ulps (2^-22 relative for normal results, 2^-148
// absolute below); logf and log1pf within 1 ulp (2^-23 relative).
constexpr double kExpf = 0x1p-22, kExpfFloor = 0x1p-148, kLogf = 0x1p-23;

double gamma_or_infinity(double k, double u) {
  const double ku = k * u;
  return ku < 1 ? ku / (1 - ku) : INFINITY;
}

// Rounding x into f errs by at most u_f |x| + eta_f: relative in the normal
// range, at most the subnormal spacing (or, without subnormals, the flush)
// below it. Past the largest finite value there is no bound.
double rounding_error(const formats::Format& f, double x) {
  if (std::fabs(x) > f.max_finite()) return INFINITY;
  return f.unit_roundoff() * std::fabs(x) + f.min_subnormal();
}

// A sum of k non-negative terms totalling `total`, accumulated in f in any
// order (a running sum, or a GPU tree): each addition errs by at most
// u |partial| + eta, so |computed - exact| <= gamma_k(u) total (Higham 4.2)
// plus k etas, each carried through at most k later factors (1 + delta).
double sum_error(double k, double total, const formats::Format& f) {
  const double g = gamma_or_infinity(k, f.unit_roundoff());
  return g * total + (1 + g) * k * f.min_subnormal();
}

// |log(S (1 + theta)) - log S| for |theta| <= rho.
double log_error(double rho) { return rho < 1 ? -std::log1p(-rho) : INFINITY; }

}  // namespace

const std::vector<double>& LossErrorBounds::side(std::string_view name) const {
  if (name == "ref") return ref;
  if (name == "emu") return emu;
  if (name == "gpu") return gpu;
  throw std::invalid_argument("LossErrorBounds: unknown side '" + std::string(name) + "'");
}

std::vector<double> LossErrorBounds::pair_bound(std::string_view a, std::string_view b) const {
  const bool views_differ = (a == "ref") != (b == "ref");
  const auto &ea = side(a), &eb = side(b);
  std::vector<double> out(exact.size());
  for (std::size_t k = 0; k < out.size(); ++k) out[k] = ea[k] + eb[k] + (views_differ ? input[k] : 0.0);
  return out;
}

compare::Tolerance LossErrorBounds::tolerance(std::string_view a, std::string_view b) const {
  const auto e = pair_bound(a, b);
  const auto& ea = side(a);
  double e2 = 0, x2 = 0, a_err2 = 0;
  for (std::size_t k = 0; k < e.size(); ++k) {
    e2 += e[k] * e[k];
    x2 += exact[k] * exact[k];
    a_err2 += (ea[k] + input[k]) * (ea[k] + input[k]);
  }
  // compare() divides by the norm of side a's output, which is at least
  // ||exact|| - ||a - exact|| >= ||exact|| - ||E_a + input||.
  const double floor_of_a = std::sqrt(x2) - std::sqrt(a_err2);
  const double bound = std::isfinite(e2) && floor_of_a > 0 ? std::sqrt(e2) / floor_of_a : INFINITY;
  return compare::Tolerance::normwise(
      bound,
      "both sides' a priori bounds element by element (input rounding when the views differ, gamma_k of each "
      "sum, exp/log errors, output rounding; emu/loss_bounds.cpp), in norm over a lower bound on ||a||");
}

// --- softmax with cross-entropy ----------------------------------------------

LossErrorBounds softmax_cross_entropy_bounds(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                             std::span<const std::int32_t> labels, const LossPolicy& policy,
                                             bool backward) {
  s.check(logits.size(), labels);
  const auto b = static_cast<std::size_t>(s.batch), m = static_cast<std::size_t>(s.classes);
  const double db = static_cast<double>(b), dm = static_cast<double>(m), log_m = std::log(dm);
  const std::vector<double> z(logits.begin(), logits.end());
  const formats::Format& acc = policy.accumulate;

  // Each row's sum S of exp(z - max) has m terms in [0, 1], one of them 1:
  // 1 <= S <= m, and so is the accumulated sum (rounding is monotone and 1
  // is representable), so every error below can be taken relative to S.
  // Emulator: the exact terms (FP64) added in the accumulation format.
  const double rho_emu = sum_error(dm, 1.0, acc) + kFp64;
  // GPU: d = fl(z - max) errs by u32 |d|, so expf(d) errs relatively by
  // expm1(u32 |d|)(1 + 2^-22) + 2^-22; summed, the first part is at most
  // (1 + 2^-22) sum_j e^-|d_j| u32 |d_j| e^(u32 |d_j|) <= m u32 (1/e) e^(u32 dmax)
  // (x e^-x <= 1/e), relative to S >= 1; then the fp32 sum (any order).
  double max_abs = 0;
  for (double v : z) max_abs = std::max(max_abs, std::fabs(v) + rounding_error(policy.input, v));
  const double dmax = 2 * max_abs;
  const double rho_exp = dm * kU32 * 0.3679 * std::exp(kU32 * dmax) * (1 + kExpf) + kExpf + dm * kExpfFloor;
  const double rho_gpu = (1 + rho_exp) * (1 + gamma_or_infinity(dm, kU32)) - 1 + sum_error(dm, 0.0, formats::fp32());

  LossErrorBounds r;
  double sum_input = 0, sum_emu_rows = 0, sum_gpu_rows = 0, max_c = 0;
  for (std::size_t i = 0; i < b; ++i) {
    const auto row = std::span<const double>(z).subspan(i * m, m);
    const double row_max = *std::max_element(row.begin(), row.end());
    const auto label = static_cast<std::size_t>(labels[i]);
    // Rounding the inputs moves each logit by delta_j; logsumexp is
    // 1-Lipschitz in the max norm, so the row loss moves by at most
    // max_j delta_j + delta_label, and every softmax probability by a factor
    // within e^(+-2 max_j delta_j) (log p_j = z_j - logsumexp(z)).
    double delta_max = 0;
    for (double v : row) delta_max = std::max(delta_max, rounding_error(policy.input, v));
    const double delta_label = rounding_error(policy.input, row[label]);
    // max - z[label] on the rounded view (the GPU rounds it to fp32).
    const double c = row_max - row[label] + delta_max + delta_label;
    max_c = std::max(max_c, c);
    if (!backward) {
      sum_input += delta_max + delta_label;
      sum_emu_rows += log_error(rho_emu) + kFp64 * (log_m + c);
      // logf(S^) within 1 ulp; fl(max - z[label]); the final fp32 addition.
      const double lse = log_error(rho_gpu);
      const double before_add = lse + kLogf * (log_m + lse) + kU32 * c + 2 * kEta32;
      sum_gpu_rows += before_add + kU32 * (log_m + c + before_add);
      continue;
    }
    double sum_exp = 0;
    for (double v : row) sum_exp += std::exp(v - row_max);
    for (std::size_t j = 0; j < m; ++j) {
      const double p = std::exp(row[j] - row_max) / sum_exp;
      const double v = (p - (j == label ? 1.0 : 0.0)) / db;
      const double input = p * std::expm1(2 * delta_max) / db;
      const double p_r = p * std::exp(2 * delta_max), v_r = std::fabs(v) + input;
      r.input.push_back(input);
      r.ref.push_back(kFp64 * (dm + 1) * (p / db + std::fabs(v)) + kU32 * std::fabs(v) + kEta32);
      // Emulator: p^ = e_j / S^ with S^ = S (1 + theta), |theta| <= rho_emu;
      // (p^ - onehot) / b in FP64, rounded once to the output format.
      const double p_emu = p_r * rho_emu / (1 - rho_emu) + p_r * kFp64;
      const double pre_emu = p_emu / db + kFp64 * (v_r + p_emu / db);
      r.emu.push_back(pre_emu + policy.output.unit_roundoff() * (v_r + pre_emu) + policy.output.min_subnormal());
      // GPU: expf of fl(z_j - max), its fp32 division by S^, then
      // fl(p - onehot) and fl(/ b) (b exact in fp32 up to 2^24, one more
      // rounding past it), and the fp16 output.
      const double d_r = row_max - row[j] + 2 * delta_max;
      const double eps = std::expm1(kU32 * d_r) * (1 + kExpf) + kExpf;
      const double p_gpu = p_r * ((1 + eps) * (1 + kU32) / (1 - rho_gpu) - 1) +
                           kExpfFloor * (1 + kU32) / (1 - rho_gpu) + kEta32;
      const double pre_gpu = p_gpu / db + 3.0001 * kU32 * (v_r + p_gpu / db) + kEta32;
      r.gpu.push_back(pre_gpu + kU16 * (v_r + pre_gpu) + kEta16);
    }
  }
  if (backward) {
    r.exact = ops::softmax_cross_entropy_backward_fp64(s, z, labels);
    return r;
  }

  const double loss = ops::softmax_cross_entropy_fp64(s, z, labels);
  const double input = sum_input / db;
  // Sum over the rows of the rounded view: at most b (loss + input), every
  // row value >= 0 (S^ >= 1 and max >= z[label]).
  const double rows = db * (loss + input);
  const double emu_sum = sum_emu_rows + sum_error(db, rows + sum_emu_rows, acc);
  const double gpu_sum = sum_gpu_rows + sum_error(db, rows + sum_gpu_rows, formats::fp32());
  r.exact = {loss};
  r.input = {input};
  // Reference: m + b FP64 steps per result; one rounding to float.
  r.ref = {kFp64 * (dm + db) * (1 + log_m + max_c + loss) + kU32 * loss + kEta32};
  // Emulator: the batch sum / b in FP64, rounded once to fp32.
  r.emu = {emu_sum / db + (kU32 + kFp64) * (loss + input + emu_sum / db) + kEta32};
  // GPU: the fp32 sum / (float)b: two roundings at most.
  r.gpu = {gpu_sum / db + 2 * kU32 * (1 + kU32) * (loss + input + gpu_sum / db) + kEta32};
  return r;
}

// --- mean squared error --------------------------------------------------------

LossErrorBounds mse_bounds(std::span<const float> y, std::span<const float> t, const LossPolicy& policy,
                           bool backward) {
  ops::check_same_size("mse", "y", y.size(), "t", t.size());
  ops::check_not_empty("mse", "y", y.size());
  const double n = static_cast<double>(y.size());
  LossErrorBounds r;
  double sum_input = 0, max_d = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double d = static_cast<double>(y[i]) - t[i];
    const double delta = rounding_error(policy.input, y[i]);
    max_d = std::max(max_d, std::fabs(d) + delta);
    if (!backward) {
      // (d + delta)^2 - d^2 = 2 d delta + delta^2.
      sum_input += 2 * std::fabs(d) * delta + delta * delta;
      continue;
    }
    const double v = 2 * d / n, input = 2 * delta / n, v_r = std::fabs(v) + input;
    r.exact.push_back(v);
    r.input.push_back(input);
    r.ref.push_back(kFp64 * std::fabs(v) + kU32 * std::fabs(v) + kEta32);
    // Emulator: 2 (y - t) / n in FP64 (two roundings), rounded once.
    const double pre_emu = kFp64 * v_r;
    r.emu.push_back(pre_emu + policy.output.unit_roundoff() * (v_r + pre_emu) + policy.output.min_subnormal());
    // GPU: fl(y - t), 2 * d exact, fl(/ (float)n): three roundings at most.
    const double pre_gpu = 3.0001 * kU32 * v_r + 2 * kEta32;
    r.gpu.push_back(pre_gpu + kU16 * (v_r + pre_gpu) + kEta16);
  }
  if (backward) return r;

  const double loss = ops::mse_fp64(std::vector<double>(y.begin(), y.end()), std::vector<double>(t.begin(), t.end()));
  const double input = sum_input / n;
  const double squares = n * (loss + input);  // sum of (y_r - t)^2 on the rounded view
  // Emulator: each square in FP64 (three roundings), then the running sum.
  const double emu_sum = kFp64 * squares + sum_error(n, squares * (1 + kFp64), policy.accumulate);
  // GPU: fl(fl(y - t)^2) errs by 3.0001 u32 relative (+ eta per step), then
  // the fp32 tree sum (a fused multiply-add only removes roundings).
  const double gpu_terms = 3.0001 * kU32 * squares + n * (3 + 2 * max_d) * kEta32;
  const double gpu_sum = gpu_terms + sum_error(n, squares + gpu_terms, formats::fp32());
  r.exact = {loss};
  r.input = {input};
  r.ref = {kFp64 * (n + 1) * loss + kU32 * loss + kEta32};
  r.emu = {emu_sum / n + (kU32 + kFp64) * (loss + input + emu_sum / n) + kEta32};
  r.gpu = {gpu_sum / n + 2 * kU32 * (1 + kU32) * (loss + input + gpu_sum / n) + kEta32};
  return r;
}

// --- binary cross-entropy with logits ---------------------------------------------

LossErrorBounds bce_with_logits_bounds(std::span<const float> x, std::span<const float> t, const LossPolicy& policy,
                                       bool backward) {
  ops::check_same_size("bce_with_logits", "x", x.size(), "t", t.size());
  ops::check_not_empty("bce_with_logits", "x", x.size());
  ops::check_probability_targets("bce_with_logits", t);
  const double n = static_cast<double>(x.size());
  LossErrorBounds r;
  double sum_input = 0, sum_terms_r = 0, emu_terms = 0, gpu_terms = 0, sum_abs_x = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double xi = x[i], ti = t[i];
    const double delta = rounding_error(policy.input, xi);
    const double x_r = std::fabs(xi) + delta;
    if (!backward) {
      // The term's derivative sigmoid(x) - t lies in [-1, 1].
      const double term_r = ops::bce_with_logits_term_fp64(xi, ti) + delta;
      sum_input += delta;
      sum_terms_r += term_r;
      sum_abs_x += std::fabs(xi) + 1;
      // FP64: x t, the subtraction (|max(x,0) - x t| <= |x| for t in [0,1]),
      // exp, log1p and the final addition.
      emu_terms += kFp64 * (x_r + 1 + term_r);
      // GPU: fl(x t) and fl(max - x t), each u32 |x|; log1pf(expf(-|x|)):
      // expf's 2^-22 relative moves log1p(a) by at most 2 * 2^-22 log1p(a)
      // (a <= 2 log1p(a) on [0, 1]) and log1pf adds 2^-23 of it, with
      // log1p(a) <= log 2: under 2^-21 in all (+ the subnormal floor);
      // the final addition u32 of the term.
      gpu_terms += (2 * kU32 * x_r + 0x1p-21 + kU32 * term_r) * (1 + 0x1p-20) + 2 * kExpfFloor;
      continue;
    }
    const double sigma = ops::bce_with_logits_derivative_fp64(xi, 0.0);  // sigmoid(x)
    const double v = (sigma - ti) / n, input = delta / 4 / n, v_r = std::fabs(v) + input;  // |sigmoid'| <= 1/4
    const double sigma_r = sigma + delta / 4;
    r.exact.push_back(v);
    r.input.push_back(input);
    r.ref.push_back(kFp64 * (sigma + ti) / n + kU32 * std::fabs(v) + kEta32);
    const double pre_emu = kFp64 * (sigma_r + ti) / n;
    r.emu.push_back(pre_emu + policy.output.unit_roundoff() * (v_r + pre_emu) + policy.output.min_subnormal());
    // GPU sigmoid: expf (2^-22), 1 + e and the division (u32 each): within
    // 2^-20 relative (+ expf's subnormal floor), then fl(s - t) and
    // fl(/ (float)n).
    const double sigma_gpu = 0x1p-20 * sigma_r + 2 * kExpfFloor;
    const double pre_gpu = sigma_gpu / n + 3.0001 * kU32 * (v_r + sigma_gpu / n) + kEta32;
    r.gpu.push_back(pre_gpu + kU16 * (v_r + pre_gpu) + kEta16);
  }
  if (backward) return r;

  const double loss =
      ops::bce_with_logits_fp64(std::vector<double>(x.begin(), x.end()), std::vector<double>(t.begin(), t.end()));
  const double input = sum_input / n;
  const double emu_sum = emu_terms + sum_error(n, sum_terms_r + emu_terms, policy.accumulate);
  const double gpu_sum = gpu_terms + sum_error(n, sum_terms_r + gpu_terms, formats::fp32());
  r.exact = {loss};
  r.input = {input};
  r.ref = {kFp64 * (sum_abs_x / n + n * loss) + kU32 * loss + kEta32};
  r.emu = {emu_sum / n + (kU32 + kFp64) * (loss + input + emu_sum / n) + kEta32};
  r.gpu = {gpu_sum / n + 2 * kU32 * (1 + kU32) * (loss + input + gpu_sum / n) + kEta32};
  return r;
}

}  // namespace mpverify::emu
