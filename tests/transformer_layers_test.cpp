// The transformer's layers, each checked on the ref backend (fp32) against
// central differences, and on the emu backend under a bf16 recipe (every
// stored tensor a bf16 value, in the format of its role):
//  - Embedding, PositionalEmbedding, LayerNorm and the GELU activation with
//    the a priori tolerances of tests/nn_layers_test.cpp (support/gradient_check.h);
//  - CausalSelfAttention and TransformerBlock with Richardson's estimate of
//    the truncation and first-order rounding estimates (derived at the
//    checks), and the attention's forward against an independent FP64
//    oracle written here with explicit loops and a -inf mask.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "nn/activation_layer.h"
#include "nn/causal_self_attention.h"
#include "nn/embedding.h"
#include "nn/layer_norm_layer.h"
#include "nn/positional_embedding.h"
#include "nn/transformer_block.h"
#include "ops/gelu_fp64.h"
#include "support/gradient_check.h"
#include "support/transformer_oracle.h"

namespace {

using namespace mpverify;
using namespace mpverify::test_support;
using nn::Tensor;

// --- Embedding and PositionalEmbedding --------------------------------------------

// y = W[id] copies values: no rounding, and L is linear in W: no truncation,
// a large step. dW sums the rows of dy of each id in fp32, at most 3 here:
// gamma32(3) sum |r| per element.
TEST(TransformerLayerGradients, Embedding) {
  RefRun run;
  nn::Embedding layer("emb", 7, 5, 3, 0);
  nn::Parameter& w = *layer.parameters()[0];
  set_parameter(w, grid_normal(w.size(), 1, 1, 4));
  const std::vector<float> ids = {3, 0, 3, 6, 1, 3};  // id 3 three times: the scatter-add
  const Tensor x = make_tensor(6, 1, ids);
  const std::vector<float> r = grid_normal(30, 2, 1, 4), vw = grid_normal(w.size(), 3, 1, 2);
  const Tensor y = layer.forward(run.ctx, x);
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 5; ++j)
      EXPECT_EQ(y.values[i * 5 + j], w.value[static_cast<std::size_t>(ids[i]) * 5 + j]);
  EXPECT_TRUE(layer.backward(run.ctx, make_tensor(6, 5, r), false).values.empty());
  const std::vector<float> grad = w.grad;
  std::vector<double> grad_error(w.size(), 0.0);
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 5; ++j)
      grad_error[static_cast<std::size_t>(ids[i]) * 5 + j] += gamma32(3) * std::fabs(r[i * 5 + j]);
  for (std::size_t row : {2u, 4u, 5u})  // no id selects them
    for (std::size_t j = 0; j < 5; ++j) EXPECT_EQ(grad[row * 5 + j], 0.0f);
  const double h = 0x1p-4;
  const Difference d = parameter_difference(layer, run.ctx, x, w, vw, h, r);
  expect_agree(directional(d, h, r, {}, {}, grad, vw, grad_error, 0), "Embedding dW");
}

TEST(EmbeddingLayer, RefusesWhatIsNotATokenIdAndAnInputGradient) {
  RefRun run;
  nn::Embedding layer("emb", 7, 5, 3, 0);
  nn::cast_weights(*layer.parameters()[0], run.precision);
  for (float bad : {7.0f, -1.0f, 1.5f, NAN}) {
    try {
      layer.forward(run.ctx, make_tensor(2, 1, {0.0f, bad}));
      ADD_FAILURE() << bad << " was taken as a token id";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("row 1"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(layer.forward(run.ctx, Tensor(2, 2)), std::invalid_argument);  // two values per row
  layer.forward(run.ctx, make_tensor(2, 1, {0.0f, 6.0f}));
  EXPECT_THROW(layer.backward(run.ctx, Tensor(2, 5), true), std::invalid_argument);
}

// y = fl32(x + P[t]): affine, one rounding (u32 |y| / (1 - u32) per element);
// dx = dy exactly; dP sums B = 2 rows of dy in fp32: gamma32(2) sum |r|.
TEST(TransformerLayerGradients, PositionalEmbedding) {
  const int B = 2, T = 3, D = 4;
  RefRun run;
  nn::PositionalEmbedding layer("pos", T, D, 3, 0);
  nn::Parameter& p = *layer.parameters()[0];
  set_parameter(p, grid_normal(p.size(), 11, 1, 4));
  const Tensor x = make_tensor(B * T, D, grid_normal(B * T * D, 12, 1, 4));
  const std::vector<float> r = grid_normal(x.size(), 13, 1, 4), vx = grid_normal(x.size(), 14, 1, 2),
                           vp = grid_normal(p.size(), 15, 1, 2);
  layer.forward(run.ctx, x);
  const Tensor dx = layer.backward(run.ctx, make_tensor(B * T, D, r), true);
  EXPECT_EQ(dx.values, r);
  const std::vector<float> gp = p.grad;
  std::vector<double> gp_error(p.size(), 0.0);
  for (std::size_t i = 0; i < r.size(); ++i) gp_error[i % p.size()] += gamma32(B) * std::fabs(r[i]);
  auto once = [](std::span<const float> y) {
    std::vector<double> e(y.size());
    for (std::size_t i = 0; i < y.size(); ++i) e[i] = kOnceU32 * std::fabs(y[i]);
    return e;
  };
  const double h = 0x1p-4;
  {
    const Difference d = input_difference(layer, run.ctx, x, vx, h, r);
    expect_agree(directional(d, h, r, once(d.plus.y), once(d.minus.y), dx.values, vx, {}, 0), "pos dx");
  }
  {
    const Difference d = parameter_difference(layer, run.ctx, x, p, vp, h, r);
    expect_agree(directional(d, h, r, once(d.plus.y), once(d.minus.y), gp, vp, gp_error, 0), "pos dP");
  }
  EXPECT_THROW(layer.forward(run.ctx, Tensor(5, D)), std::invalid_argument);  // 5 rows: not whole sequences
}

// --- LayerNorm ---------------------------------------------------------------------

struct RowStats {
  std::vector<double> mean, rstd, mean_abs;
};

RowStats row_stats(int rows, int F, std::span<const float> x) {
  RowStats s;
  for (int r = 0; r < rows; ++r) {
    double sum = 0, abs_sum = 0, sq = 0;
    for (int j = 0; j < F; ++j) {
      sum += x[static_cast<std::size_t>(r * F + j)];
      abs_sum += std::fabs(x[static_cast<std::size_t>(r * F + j)]);
    }
    const double mean = sum / F;
    for (int j = 0; j < F; ++j) sq += std::pow(x[static_cast<std::size_t>(r * F + j)] - mean, 2);
    s.mean.push_back(mean);
    s.rstd.push_back(1 / std::sqrt(sq / F + 1e-5));
    s.mean_abs.push_back(abs_sum / F);
  }
  return s;
}

// The reference's forward error: one rounding of y, and the FP64 evaluation
// within gamma_{F+10}(2^-53) (|gamma| (|xhat| + mean|x| rstd) + |beta|).
std::vector<double> layer_norm_forward_error(int rows, int F, std::span<const float> x, std::span<const float> y,
                                             std::span<const float> gamma, std::span<const float> beta) {
  const RowStats st = row_stats(rows, F, x);
  const double g64 = gamma64(F + 10);
  std::vector<double> e(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t r = i / static_cast<std::size_t>(F), j = i % static_cast<std::size_t>(F);
    const double xhat = (x[i] - st.mean[r]) * st.rstd[r];
    e[i] = kOnceU32 * std::fabs(y[i]) +
           g64 * (std::fabs(gamma[j]) * (std::fabs(xhat) + st.mean_abs[r] * st.rstd[r]) + std::fabs(beta[j]));
  }
  return e;
}

// Truncation along x, per row: L_row(t) = sum_j r_j gamma_j xhat_j(t) + const
// is batch norm's per-channel form with r' = r gamma (tests/nn_layers_test's
// batch_norm_truncation derives the Cauchy bound h^2 F / (rho - h)^3).
double layer_norm_truncation(int rows, int F, std::span<const float> x, std::span<const float> v,
                             std::span<const float> r, std::span<const float> gamma, double h) {
  const RowStats st = row_stats(rows, F, x);
  double total = 0;
  for (int row = 0; row < rows; ++row) {
    const auto base = static_cast<std::size_t>(row * F);
    double v_mean = 0;
    for (int j = 0; j < F; ++j) v_mean += static_cast<double>(v[base + static_cast<std::size_t>(j)]) / F;
    double a = 0, b = 0, cc = 0, ww = 0;
    for (std::size_t j = 0; j < static_cast<std::size_t>(F); ++j) {
      const double c = x[base + j] - st.mean[static_cast<std::size_t>(row)], w = v[base + j] - v_mean;
      a += r[base + j] * gamma[j] * c;
      b += r[base + j] * gamma[j] * w;
      cc += c * c;
      ww += w * w;
    }
    const double alpha = cc / F + 1e-5, delta = ww / F;
    if (delta == 0) continue;
    const double rho = std::sqrt(alpha / delta) / 4;
    EXPECT_LT(h, rho / 2) << "step too large for the truncation bound in row " << row;
    total += h * h * (std::fabs(a) + std::fabs(b) * rho) * std::sqrt(16 / (7 * alpha)) / std::pow(rho - h, 3);
  }
  return total;
}

// The reference backward runs in FP64 from the float statistics the forward
// saved: mean~ within u32 |mean| + gamma_F(2^-53) mean|x| (e_mu), rstd~ =
// rstd (1 + e_s), |e_s| <= u32 + gamma_{F+8}(2^-53). So xhat~ is within z =
// e_s |xhat| + e_mu rstd (1 + e_s) of xhat; with g = dy gamma, b = sum g xhat,
// b~ within Z = sum |g| z; and dx~_j = rstd~/F (F g_j - a - xhat~_j b~)
// within rstd/F [e_s T_j + z_j (|b| + Z) + |xhat_j| Z], T_j = F |g_j| + |a| +
// (|xhat_j| + z_j)(|b| + Z); then one rounding and the FP64 evaluation
// (gamma_{F+10}(2^-53) rstd/F (1 + e_s) T_j). dgamma_j = sum over rows of dy
// xhat~: sum |dy| z plus its rounding and FP64 sum; dbeta_j: its rounding and
// FP64 sum.
struct LayerNormGradientError {
  std::vector<double> dx, dgamma, dbeta;
};

LayerNormGradientError layer_norm_gradient_error(int rows, int F, std::span<const float> x,
                                                 std::span<const float> dy, std::span<const float> gamma,
                                                 std::span<const float> dx, std::span<const float> dgamma,
                                                 std::span<const float> dbeta) {
  const RowStats st = row_stats(rows, F, x);
  const auto Fs = static_cast<std::size_t>(F);
  const double e_s = kU32 + gamma64(F + 8), g64 = gamma64(std::max(F, rows) + 10), Fd = F;
  LayerNormGradientError e{std::vector<double>(x.size()), std::vector<double>(Fs, 0.0), std::vector<double>(Fs, 0.0)};
  std::vector<double> col_z(Fs, 0.0), col_dy(Fs, 0.0), col_dyx(Fs, 0.0);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    const double e_mu = kU32 * std::fabs(st.mean[r]) + gamma64(F) * st.mean_abs[r];
    std::vector<double> xh(Fs), z(Fs), g(Fs);
    double a = 0, b = 0, Z = 0;
    for (std::size_t j = 0; j < Fs; ++j) {
      const std::size_t k = r * Fs + j;
      xh[j] = (x[k] - st.mean[r]) * st.rstd[r];
      z[j] = e_s * std::fabs(xh[j]) + e_mu * st.rstd[r] * (1 + e_s);
      g[j] = static_cast<double>(dy[k]) * gamma[j];
      a += g[j];
      b += g[j] * xh[j];
      Z += std::fabs(g[j]) * z[j];
      col_z[j] += std::fabs(dy[k]) * z[j];
      col_dy[j] += std::fabs(dy[k]);
      col_dyx[j] += std::fabs(dy[k]) * (std::fabs(xh[j]) + z[j]);
    }
    const double scale = st.rstd[r] / Fd;
    for (std::size_t j = 0; j < Fs; ++j) {
      const double T = Fd * std::fabs(g[j]) + std::fabs(a) + (std::fabs(xh[j]) + z[j]) * (std::fabs(b) + Z);
      e.dx[r * Fs + j] = scale * (e_s * T + z[j] * (std::fabs(b) + Z) + std::fabs(xh[j]) * Z) +
                         kOnceU32 * std::fabs(dx[r * Fs + j]) + g64 * scale * (1 + e_s) * T;
    }
  }
  for (std::size_t j = 0; j < Fs; ++j) {
    e.dgamma[j] = col_z[j] + kOnceU32 * std::fabs(dgamma[j]) + g64 * col_dyx[j];
    e.dbeta[j] = kOnceU32 * std::fabs(dbeta[j]) + g64 * col_dy[j];
  }
  return e;
}

TEST(TransformerLayerGradients, LayerNorm) {
  const int rows = 6, F = 8;
  RefRun run;
  nn::LayerNorm layer("ln", F);
  nn::Parameter& gamma = *layer.parameters()[0];
  nn::Parameter& beta = *layer.parameters()[1];
  EXPECT_EQ(gamma.kind, nn::ParameterKind::norm);
  EXPECT_EQ(beta.kind, nn::ParameterKind::norm);
  std::vector<float> g = grid_normal(F, 21, 0.25, 0.75);
  for (float& v : g) v += 1.0f;
  set_parameter(gamma, g);
  set_parameter(beta, grid_normal(F, 22, 0.5, 2));
  const Tensor x = make_tensor(rows, F, grid_normal(rows * F, 23, 2, 4));
  const std::vector<float> r = grid_normal(x.size(), 24, 1, 4), vx = grid_normal(x.size(), 25, 0.5, 2),
                           vg = grid_normal(F, 26, 1, 2), vb = grid_normal(F, 27, 1, 2);
  layer.forward(run.ctx, x);
  const Tensor dx = layer.backward(run.ctx, make_tensor(rows, F, r), true);
  const std::vector<float> dgamma = gamma.grad, dbeta = beta.grad;
  const auto ge = layer_norm_gradient_error(rows, F, x.values, r, gamma.value, dx.values, dgamma, dbeta);
  {
    const double h = 0x1p-7;
    const Difference d = input_difference(layer, run.ctx, x, vx, h, r);
    const auto ep = layer_norm_forward_error(rows, F, d.p_plus, d.plus.y, gamma.value, beta.value);
    const auto em = layer_norm_forward_error(rows, F, d.p_minus, d.minus.y, gamma.value, beta.value);
    const double t = layer_norm_truncation(rows, F, x.values, vx, r, gamma.value, h);
    expect_agree(directional(d, h, r, ep, em, dx.values, vx, ge.dx, t), "LayerNorm dx");
  }
  const double h = 0x1p-4;  // y is affine in gamma and in beta
  {
    const Difference d = parameter_difference(layer, run.ctx, x, gamma, vg, h, r);
    const auto ep = layer_norm_forward_error(rows, F, x.values, d.plus.y, d.p_plus, beta.value);
    const auto em = layer_norm_forward_error(rows, F, x.values, d.minus.y, d.p_minus, beta.value);
    expect_agree(directional(d, h, r, ep, em, dgamma, vg, ge.dgamma, 0), "LayerNorm dgamma");
  }
  {
    const Difference d = parameter_difference(layer, run.ctx, x, beta, vb, h, r);
    const auto ep = layer_norm_forward_error(rows, F, x.values, d.plus.y, gamma.value, d.p_plus);
    const auto em = layer_norm_forward_error(rows, F, x.values, d.minus.y, gamma.value, d.p_minus);
    expect_agree(directional(d, h, r, ep, em, dbeta, vb, ge.dbeta, 0), "LayerNorm dbeta");
  }
  EXPECT_THROW(layer.forward(run.ctx, Tensor(2, F + 1)), std::invalid_argument);
}

// --- GELU ----------------------------------------------------------------------------

// f and f' dy evaluated in FP64 and rounded once: u32 |value| / (1 - u32),
// plus the FP64 error, at most (16 + 2 (x^2 + 4|x| + 4)) 2^-53 relative
// (tests/gelu_test.cpp), below 128 u64 for |x| <= 4, times |f| <= |x| and
// |f' dy| <= 1.13 |dy|. Truncation: h^2/6 max|f'''| sum |r| |v|^3 (0.7788).
TEST(TransformerLayerGradients, Gelu) {
  const int n = 6, c = 10;
  const std::size_t size = static_cast<std::size_t>(n) * c;
  RefRun run;
  nn::ActivationLayer layer("gelu", ops::ActivationParams{ops::Activation::gelu, 0.0});
  const Tensor x = make_tensor(n, c, grid_normal(size, 31, 1.5, 4));
  const std::vector<float> r = grid_normal(size, 32, 1, 4), v = grid_normal(size, 33, 1, 2);
  const double h = 0x1p-8;
  double truncation = 0;
  for (std::size_t i = 0; i < size; ++i) truncation += std::fabs(r[i]) * std::pow(std::fabs(v[i]), 3);
  truncation *= h * h / 6 * ops::kGeluMaxThirdDerivative;
  layer.forward(run.ctx, x);
  const Tensor dx = layer.backward(run.ctx, make_tensor(n, c, r), true);
  auto forward_error = [&](std::span<const float> xs, std::span<const float> y) {
    std::vector<double> e(y.size());
    for (std::size_t i = 0; i < y.size(); ++i) e[i] = kOnceU32 * std::fabs(y[i]) + 128 * kU64 * std::fabs(xs[i]);
    return e;
  };
  std::vector<double> grad_error(size);
  for (std::size_t i = 0; i < size; ++i)
    grad_error[i] = kOnceU32 * std::fabs(dx.values[i]) + 128 * kU64 * 1.13 * std::fabs(r[i]);
  const Difference d = input_difference(layer, run.ctx, x, v, h, r);
  expect_agree(directional(d, h, r, forward_error(d.p_plus, d.plus.y), forward_error(d.p_minus, d.minus.y), dx.values,
                           v, grad_error, truncation),
               "gelu dx");
}

// --- the composite layers: FP64 oracles (support/transformer_oracle.h) ------------------

constexpr int kB = 2, kT = 4, kD = 8, kH = 2;
constexpr Dims kDims{kB, kT, kD, kH};

std::vector<double> widened(std::span<const float> v) { return {v.begin(), v.end()}; }

double dot64(const std::vector<double>& y, std::span<const float> r) {
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
  return s;
}

// Parameters on the grid (so that perturbed points are floats), scaled so
// that the scores spread over a few units and the softmax is not uniform.
void set_grid_parameters(nn::Layer& layer, std::uint64_t seed) {
  for (nn::Parameter* p : layer.parameters()) {
    if (p->kind == nn::ParameterKind::norm) {
      std::vector<float> g = grid_normal(p->size(), seed++, 0.25, 0.75);
      if (p->name.ends_with("gamma"))
        for (float& v : g) v += 1.0f;
      set_parameter(*p, g);
    } else {
      set_parameter(*p, grid_normal(p->size(), seed++, 0.5, 2));
    }
  }
}

// max |y - oracle| <= tolerance * max |oracle|, and a wrong layer could not pass.
void expect_matches_oracle(std::span<const float> y, const std::vector<double>& oracle, double tolerance,
                           const std::string& what) {
  ASSERT_EQ(y.size(), oracle.size());
  double max_y = 0, max_diff = 0;
  for (std::size_t i = 0; i < oracle.size(); ++i) {
    max_y = std::max(max_y, std::fabs(oracle[i]));
    max_diff = std::max(max_diff, std::fabs(y[i] - oracle[i]));
  }
  EXPECT_LE(max_diff, tolerance * max_y) << what;
  EXPECT_GT(max_y, 0) << what;
}

// The float forward against the FP64 oracle. An attention output passes
// through two fp32 GEMMs of d = 8 terms (q, k), one of hd = 4 (the scores), a
// scale (exact: 1/2), the softmax (FP64, rounded once), a GEMM of T = 4 terms
// and one of d = 8 (o): first order, 38 u32 = 2.3e-6 of the magnitudes |W| |in|
// along the way, which these inputs keep within 10 max|y|: 1e-4 max|y| holds
// that with a factor 4 to spare. A head sliced wrong, the mask missing or a
// product transposed moves y by tens of percent.
TEST(CausalSelfAttentionOracle, ForwardMatchesAnIndependentFp64Attention) {
  RefRun run;
  nn::CausalSelfAttention layer("attn", kD, kH, kT, 5, 0);
  set_grid_parameters(layer, 40);
  const Tensor x = make_tensor(kB * kT, kD, grid_normal(kB * kT * kD, 41, 1, 4));
  const Tensor y = layer.forward(run.ctx, x);
  expect_matches_oracle(y.values, attention_fp64(layer, widened(x.values), kDims), 1e-4, "attention");
  EXPECT_EQ(layer.scale(), 0.5f);
  // The probabilities the layer stored: causal (zero above the diagonal), rows summing to 1.
  const Tensor& p = layer.probs();
  ASSERT_EQ(p.n, kB * kH * kT);
  for (int r = 0; r < p.n; ++r) {
    double sum = 0;
    for (int j = 0; j < kT; ++j) {
      const float v = p.values[static_cast<std::size_t>(r * kT + j)];
      if (j > r % kT) {
        EXPECT_EQ(v, 0.0f) << "row " << r << " sees column " << j;
      }
      sum += v;
    }
    EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << r;
  }
}

// The block adds two layer norms (whose rstd multiplies the errors of their
// inputs' centring by at most 1/std, about 1 here), the MLP's GEMMs (8 and 32
// terms), GELU and the residuals: first order about 100 u32 = 6e-6 of the
// magnitudes; 1e-4 max|y| again holds that with room.
TEST(TransformerBlockOracle, ForwardMatchesAnIndependentFp64Block) {
  RefRun run;
  nn::TransformerBlock layer("h0", kD, kH, kT, 9, 0);
  set_grid_parameters(layer, 45);
  const Tensor x = make_tensor(kB * kT, kD, grid_normal(kB * kT * kD, 46, 1, 4));
  expect_matches_oracle(layer.forward(run.ctx, x).values, block_fp64(layer, widened(x.values), kDims), 1e-4, "block");
}

// The backward of a composite layer against central differences of its FP64
// oracle (Richardson's check, support/gradient_check.h): the oracle's rounding
// is negligible (|fl(L) - L| <= 1000 u64 sum |r| (|y| + mean|y|), generously);
// the analytic side is the float backward, whose error is estimated to first
// order as K u32 sum |g_j v_j|, K the roundings' worth on an output's path
// (38 for the attention, 100 for the block, as above), doubled.
template <typename Oracle>
void check_composite(nn::Layer& layer, const Tensor& x, std::uint64_t seed, double K, const Oracle& oracle,
                     const std::string& what) {
  RefRun run;
  const std::vector<float> r = grid_normal(x.size(), seed, 1, 4);
  layer.forward(run.ctx, x);
  const Tensor dx = layer.backward(run.ctx, make_tensor(x.n, x.c, r), true);
  const std::vector<double> y = oracle(widened(x.values));
  double mean_y = 0, loss_error = 0;
  for (double v : y) mean_y += std::fabs(v) / static_cast<double>(y.size());
  for (std::size_t i = 0; i < r.size(); ++i) loss_error += 1000 * kU64 * std::fabs(r[i]) * (std::fabs(y[i]) + mean_y);
  const double h = 0x1p-5;
  auto check = [&](std::span<const float> grad, std::span<const float> v, const auto& loss, const std::string& name) {
    const double scale = abs_dot(grad, v);
    expect_agree(richardson(loss, h, loss_error, 2 * K * kU32 * scale, what + " " + name), dot(grad, v), scale,
                 what + " " + name);
  };
  const std::vector<float> vx = grid_normal(x.size(), seed + 1, 1, 2);
  check(dx.values, vx, [&](double t) {
    std::vector<double> xt = widened(x.values);
    for (std::size_t i = 0; i < xt.size(); ++i) xt[i] += t * vx[i];
    return dot64(oracle(xt), r);
  }, "dx");
  std::uint64_t s = seed + 2;
  for (nn::Parameter* p : layer.parameters()) {
    // The key bias shifts every score of a row by the same q . b_k, which the
    // softmax ignores: its gradient is zero, up to rounding.
    if (p->name.ends_with("attn.k.b")) {
      for (float g : p->grad) EXPECT_LT(std::fabs(g), 1e-5) << p->name;
      continue;
    }
    const std::vector<float> grad = p->grad, v = grid_normal(p->size(), s++, 1, 2), saved = p->value;
    check(grad, v, [&](double t) {
      p->value = shifted(saved, v, t);
      const double l = dot64(oracle(widened(x.values)), r);
      p->value = saved;
      return l;
    }, "d" + p->name);
  }
}

TEST(TransformerLayerGradients, CausalSelfAttention) {
  nn::CausalSelfAttention layer("attn", kD, kH, kT, 5, 0);
  set_grid_parameters(layer, 50);
  const Tensor x = make_tensor(kB * kT, kD, grid_normal(kB * kT * kD, 51, 1, 4));
  check_composite(layer, x, 52, 38, [&](const std::vector<double>& in) { return attention_fp64(layer, in, kDims); },
                  "attention");
}

TEST(TransformerLayerGradients, TransformerBlock) {
  nn::TransformerBlock layer("h0", kD, kH, kT, 9, 0);
  set_grid_parameters(layer, 60);
  const Tensor x = make_tensor(kB * kT, kD, grid_normal(kB * kT * kD, 61, 1, 4));
  check_composite(layer, x, 62, 100, [&](const std::vector<double>& in) { return block_fp64(layer, in, kDims); },
                  "block");
  EXPECT_EQ(layer.parameters().size(), 2u + 8u + 2u + 4u);  // ln1, q k v o, ln2, fc1 fc2
}

// --- the emu backend under bf16 -------------------------------------------------------

TEST(TransformerLayersOnEmu, StoreBf16ValuesInTheirRolesFormats) {
  {
    EmuRun run;
    nn::Embedding layer("emb", 7, 5, 3, 0);
    nn::cast_weights(*layer.parameters()[0], run.precision);
    const Tensor y = layer.forward(run.ctx, make_tensor(3, 1, {1, 6, 1}));
    layer.backward(run.ctx, make_tensor(3, 5, grid_normal(15, 70, 1, 4)), false);
    expect_stored_bf16(run, {"emb.y", "emb.dw"}, "Embedding");
  }
  {
    EmuRun run;
    nn::PositionalEmbedding layer("pos", kT, kD, 3, 0);
    nn::cast_weights(*layer.parameters()[0], run.precision);
    layer.forward(run.ctx, make_tensor(kB * kT, kD, grid_normal(kB * kT * kD, 71, 1, 4)));
    layer.backward(run.ctx, make_tensor(kB * kT, kD, grid_normal(kB * kT * kD, 72, 1, 4)), true);
    expect_stored_bf16(run, {"pos.y", "pos.dw"}, "PositionalEmbedding");
  }
  {
    EmuRun run;
    nn::LayerNorm layer("ln", kD);
    for (nn::Parameter* p : layer.parameters()) nn::cast_weights(*p, run.precision);
    layer.forward(run.ctx, make_tensor(kB * kT, kD, grid_normal(kB * kT * kD, 73, 1, 4)));
    layer.backward(run.ctx, make_tensor(kB * kT, kD, grid_normal(kB * kT * kD, 74, 1, 4)), true);
    expect_stored_bf16(run, {"ln.y", "ln.dx", "ln.dgamma", "ln.dbeta"}, "LayerNorm");
    EXPECT_NE(run.counters.find("layer_norm.x"), nullptr);  // the emulated op ran
    EXPECT_NE(run.counters.find("layer_norm_backward.dx"), nullptr);
  }
  {
    EmuRun run;
    nn::CausalSelfAttention layer("attn", kD, kH, kT, 5, 0);
    for (nn::Parameter* p : layer.parameters()) nn::cast_weights(*p, run.precision);
    layer.forward(run.ctx, make_tensor(kB * kT, kD, grid_normal(kB * kT * kD, 75, 1, 4)));
    layer.backward(run.ctx, make_tensor(kB * kT, kD, grid_normal(kB * kT * kD, 76, 1, 4)), true);
    std::set<std::string> want = {"attn.scores", "attn.probs", "attn.context", "attn.dprobs", "attn.dv",
                                  "attn.dscores", "attn.dq", "attn.dk", "attn.dx"};
    for (const char* proj : {"q", "k", "v", "o"})
      for (const char* t : {"y", "dx", "dw", "db"}) want.insert(std::string("attn.") + proj + "." + t);
    expect_stored_bf16(run, want, "CausalSelfAttention");
    EXPECT_NE(run.counters.find("softmax.x"), nullptr);
    EXPECT_NE(run.counters.find("softmax_backward.dx"), nullptr);
  }
  {
    EmuRun run;
    nn::TransformerBlock layer("h0", kD, kH, kT, 9, 0);
    for (nn::Parameter* p : layer.parameters()) nn::cast_weights(*p, run.precision);
    layer.forward(run.ctx, make_tensor(kB * kT, kD, grid_normal(kB * kT * kD, 77, 1, 4)));
    layer.backward(run.ctx, make_tensor(kB * kT, kD, grid_normal(kB * kT * kD, 78, 1, 4)), true);
    std::set<std::string> want = {"h0.h", "h0.y", "h0.dh", "h0.dx", "h0.gelu.y", "h0.gelu.dx"};
    for (const char* t : {"scores", "probs", "context", "dprobs", "dv", "dscores", "dq", "dk", "dx"})
      want.insert(std::string("h0.attn.") + t);
    for (const char* linear : {"attn.q", "attn.k", "attn.v", "attn.o", "fc1", "fc2"})
      for (const char* t : {"y", "dx", "dw", "db"}) want.insert(std::string("h0.") + linear + "." + t);
    for (const char* ln : {"ln1", "ln2"})
      for (const char* t : {"y", "dx", "dgamma", "dbeta"}) want.insert(std::string("h0.") + ln + "." + t);
    expect_stored_bf16(run, want, "TransformerBlock");
    EXPECT_NE(run.counters.find("activation.x"), nullptr);  // GELU on the emulator
  }
}

}  // namespace
