// The layers of src/nn, each checked three ways:
//  - on the ref backend (fp32): the analytic directional derivatives the
//    backward gives (<dx, v>, <dW, v_W>, <db, v_b>, ...) against central
//    differences of L = <y, r> taken in double from the layer's own float
//    forward, within a tolerance derived per layer (below);
//  - ConvTranspose2d also against a direct scatter definition of the
//    transposed convolution in double, an oracle independent of the
//    convolution ops it is built from;
//  - on the emu backend with an fp16 recipe: every tensor the layer stores
//    is a value of its format, and each result is within a derived bound of
//    the ref backend's.
//
// The tolerance of a central difference D(h) = (L(+h) - L(-h)) / 2h, with
// L(t) = <y(p + t v), r> for one input or parameter p of the layer:
//  - truncation: D(h) - L'(0) = h^2/6 L'''(xi) for some |xi| <= h (Taylor).
//    It is zero where L is linear in p along the segment: x and W of Linear,
//    Conv2d and ConvTranspose2d (bilinear), every bias, gamma and beta,
//    Reshape; ReLU and leaky ReLU when no x_i +- h v_i crosses 0, max-pool
//    when no window changes its winner (both asserted). For tanh and sigmoid
//    |L'''| <= max|f'''| sum |r_i| |v_i|^3, max|tanh'''| = 2 (tanh''' =
//    -2 (1 - T)(1 - 3T), T = tanh^2 in [0, 1)) and max|sigmoid'''| = 1/8
//    (sigmoid''' = q (1 - 6 q), q = s (1 - s) in (0, 1/4]). Batch norm's
//    bound is derived at batch_norm_truncation.
//  - rounding: y is computed in float; if |fl(y_i) - y_i| <= e_i at both
//    points, D errs by sum_i |r_i| (e_i(+) + e_i(-)) / 2h, plus the double
//    dot products (gamma_N(2^-53) sum |r_i y_i| each) and the subtraction
//    (2^-53 |D|; 2h is a power of two). e_i is gamma_{K+1}(2^-24) (|W||x| +
//    |b|)_i for the affine layers (an fp32 dot product of K terms in any
//    order, Higham 3.1, then the bias added in FP64 and rounded once);
//    u32 |y_i| / (1 - u32) plus the FP64 evaluation's error for the ops
//    evaluated in FP64 and rounded once (activations, batch norm); 0 for
//    max-pool and Reshape, which select or move values exactly.
//  - the analytic side is itself computed in float: it errs by
//    sum_j |v_j| g_j, g_j the error bound of the gradient's element j,
//    derived the same way per op, plus its double dot product.
// The points p +- h v are floats exactly: p and v lie on the grid 2^-10
// within +-4 and h = 2^-k, k <= 10, so p +- h v lies on the grid 2^-20
// within +-8 (23 significant bits; asserted by shifted()).
// Each check also asserts that its tolerance is below 1% of
// sum_j |grad_j v_j|, the size by which a wrong gradient (a transposed
// weight, a dropped term) would miss: the check can fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "emu/batch_norm_bounds.h"
#include "emu/quantize.h"
#include "nn/activation_layer.h"
#include "nn/batch_norm_layer.h"
#include "nn/conv2d_layer.h"
#include "nn/conv_transpose2d.h"
#include "nn/emu_backend.h"
#include "nn/linear.h"
#include "nn/max_pool_layer.h"
#include "nn/policies.h"
#include "nn/ref_backend.h"
#include "nn/reshape.h"
#include "ops/max_pool_argmax.h"
#include "refs/batch_norm_ref.h"
#include "refs/conv2d_ref.h"
#include "refs/max_pool_ref.h"
#include "support/tensors.h"

namespace {

using namespace mpverify;
using nn::Tensor;

constexpr double kU32 = 0x1p-24, kU16 = 0x1p-11, kU64 = 0x1p-53;
// One rounding to float of a value v gives f with |f - v| <= u |v| <= u |f| / (1 - u).
constexpr double kOnceU32 = kU32 / (1 - kU32);
// An fp16 rounding in the subnormal range errs by at most half the smallest subnormal, 2^-25.
constexpr double kFp16HalfSubnormal = 0x1p-25;
constexpr double kGrid = 0x1p-10;
// The largest share of sum |grad_j v_j| a tolerance may take (see the top).
constexpr double kDiscrimination = 1e-2;

double gamma32(std::int64_t k) { return compare::gamma(k, kU32); }
double gamma64(std::int64_t k) { return compare::gamma(k, kU64); }
std::int64_t count(std::size_t n) { return static_cast<std::int64_t>(n); }

// Normal values on the grid 2^-10, clamped to +-limit.
std::vector<float> grid_normal(std::size_t n, std::uint64_t seed, double sd, double limit) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, sd);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(std::clamp(std::round(d(rng) / kGrid) * kGrid, -limit, limit));
  return v;
}

// Moves values within `margin` of 0 out to +-margin (a grid value): keeps ReLU's kink away.
std::vector<float> away_from_zero(std::vector<float> v, float margin) {
  for (float& x : v)
    if (std::fabs(x) < margin) x = std::signbit(x) ? -margin : margin;
  return v;
}

// n distinct grid values spaced `spacing` apart, shuffled: max-pool windows without ties.
std::vector<float> distinct_values(std::size_t n, std::uint64_t seed, double spacing) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>((static_cast<double>(i) - static_cast<double>(n) / 2) * spacing);
  std::mt19937_64 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

Tensor make_tensor(int n, int c, int h, int w, std::vector<float> values) {
  Tensor t(n, c, h, w);
  EXPECT_EQ(values.size(), t.size());
  t.values = std::move(values);
  return t;
}

std::vector<float> absolute(std::span<const float> v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = std::fabs(v[i]);
  return out;
}

double dot(std::span<const float> a, std::span<const float> b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

double abs_dot(std::span<const float> a, std::span<const float> b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += std::fabs(static_cast<double>(a[i]) * b[i]);
  return s;
}

// p + t v, asserting the sum is a float exactly (the grid makes it one).
std::vector<float> shifted(std::span<const float> p, std::span<const float> v, double t) {
  std::vector<float> out(p.size());
  bool exact = true;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double sum = static_cast<double>(p[i]) + t * v[i];
    out[i] = static_cast<float>(sum);
    exact = exact && static_cast<double>(out[i]) == sum;
  }
  EXPECT_TRUE(exact) << "a perturbed point is not a float: the step is not what the difference divides by";
  return out;
}

void set_parameter(nn::Parameter& p, std::vector<float> values) {
  ASSERT_EQ(values.size(), p.size()) << p.name;
  p.master = values;
  p.value = std::move(values);
}

// The channel of flat NCHW index i.
std::size_t channel_of(const ops::ChannelShape& s, std::size_t i) {
  return i / s.spatial() % static_cast<std::size_t>(s.c);
}

// Per channel: the sum over n, h, w of |values|.
std::vector<double> channel_abs_sums(const ops::ChannelShape& s, std::span<const float> values) {
  std::vector<double> sums(static_cast<std::size_t>(s.c), 0.0);
  for (std::size_t i = 0; i < values.size(); ++i) sums[channel_of(s, i)] += std::fabs(values[i]);
  return sums;
}

// --- the ref backend: central differences -----------------------------------

struct RefRun {
  nn::RefBackend backend;
  nn::Precision precision;  // every field fp32
  nn::Context ctx{backend, precision};
};

struct Side {
  double loss = 0;
  std::vector<float> y;
};

Side evaluate(nn::Layer& layer, nn::Context& ctx, const Tensor& x, std::span<const float> r) {
  Tensor y = layer.forward(ctx, x);
  EXPECT_EQ(y.size(), r.size()) << layer.name();
  return {dot(y.values, r), std::move(y.values)};
}

// The two sides of a central difference and the perturbed values of p there.
struct Difference {
  Side plus, minus;
  std::vector<float> p_plus, p_minus;
};

Difference input_difference(nn::Layer& layer, nn::Context& ctx, const Tensor& x, std::span<const float> v, double h,
                            std::span<const float> r) {
  Difference d;
  d.p_plus = shifted(x.values, v, h);
  d.p_minus = shifted(x.values, v, -h);
  Tensor xp = x, xm = x;
  xp.values = d.p_plus;
  xm.values = d.p_minus;
  d.plus = evaluate(layer, ctx, xp, r);
  d.minus = evaluate(layer, ctx, xm, r);
  return d;
}

Difference parameter_difference(nn::Layer& layer, nn::Context& ctx, const Tensor& x, nn::Parameter& p,
                                std::span<const float> v, double h, std::span<const float> r) {
  const std::vector<float> saved = p.value;
  Difference d;
  d.p_plus = shifted(saved, v, h);
  d.p_minus = shifted(saved, v, -h);
  p.value = d.p_plus;
  d.plus = evaluate(layer, ctx, x, r);
  p.value = d.p_minus;
  d.minus = evaluate(layer, ctx, x, r);
  p.value = saved;
  return d;
}

struct Directional {
  double analytic = 0, central = 0;
  double truncation = 0, rounding = 0, gradient_error = 0;
  double scale = 0;  // sum |grad_j v_j|
  double tolerance() const { return truncation + rounding + gradient_error; }
};

// e_plus, e_minus: the forward's error bound per element of y at the two
// points (empty: exact). grad_error: the gradient's error bound per element.
Directional directional(const Difference& d, double h, std::span<const float> r, std::span<const double> e_plus,
                        std::span<const double> e_minus, std::span<const float> grad, std::span<const float> v,
                        std::span<const double> grad_error, double truncation) {
  Directional out;
  out.central = (d.plus.loss - d.minus.loss) / (2 * h);
  double e = 0;
  for (std::size_t i = 0; i < e_plus.size(); ++i) e += std::fabs(r[i]) * e_plus[i];
  for (std::size_t i = 0; i < e_minus.size(); ++i) e += std::fabs(r[i]) * e_minus[i];
  e += gamma64(count(r.size())) * (abs_dot(r, d.plus.y) + abs_dot(r, d.minus.y));
  out.rounding = e / (2 * h) + 2 * kU64 * std::fabs(out.central);
  out.truncation = truncation;
  out.analytic = dot(grad, v);
  out.scale = abs_dot(grad, v);
  double g = gamma64(count(v.size())) * out.scale;
  for (std::size_t j = 0; j < grad_error.size(); ++j) g += std::fabs(v[j]) * grad_error[j];
  out.gradient_error = g;
  return out;
}

void expect_agree(const Directional& d, const std::string& what) {
  EXPECT_LE(std::fabs(d.analytic - d.central), d.tolerance())
      << what << ": analytic " << d.analytic << ", central difference " << d.central << " (truncation "
      << d.truncation << ", rounding " << d.rounding << ", gradient error " << d.gradient_error << ")";
  EXPECT_GT(d.scale, 0) << what;
  EXPECT_LT(d.tolerance(), kDiscrimination * d.scale) << what << ": the tolerance would hide a wrong gradient";
}

// --- affine layers (Linear, Conv2d, ConvTranspose2d) --------------------------

// What an affine layer y = A(W) x + b needs for its error bounds: the
// magnitudes of its three products on absolute values, in FP64, and the
// number of terms each output element sums.
struct AffineModel {
  ops::ChannelShape y_shape;  // the bias's channels
  std::function<std::vector<double>(std::span<const float> x, std::span<const float> w)> forward;
  std::function<std::vector<double>(std::span<const float> dy, std::span<const float> w)> data;
  std::function<std::vector<double>(std::span<const float> x, std::span<const float> dy)> filter;
  std::int64_t forward_terms = 0, data_terms = 0, filter_terms = 0;
};

AffineModel linear_model(int n, int in, int out) {
  AffineModel m;
  m.y_shape = {n, out, 1, 1};
  const auto N = static_cast<std::size_t>(n), I = static_cast<std::size_t>(in), O = static_cast<std::size_t>(out);
  m.forward = [=](std::span<const float> x, std::span<const float> w) {
    std::vector<double> y(N * O, 0.0);
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t k = 0; k < O; ++k)
        for (std::size_t j = 0; j < I; ++j) y[i * O + k] += static_cast<double>(x[i * I + j]) * w[k * I + j];
    return y;
  };
  m.data = [=](std::span<const float> dy, std::span<const float> w) {
    std::vector<double> dx(N * I, 0.0);
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t k = 0; k < O; ++k)
        for (std::size_t j = 0; j < I; ++j) dx[i * I + j] += static_cast<double>(dy[i * O + k]) * w[k * I + j];
    return dx;
  };
  m.filter = [=](std::span<const float> x, std::span<const float> dy) {
    std::vector<double> dw(O * I, 0.0);
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t k = 0; k < O; ++k)
        for (std::size_t j = 0; j < I; ++j) dw[k * I + j] += static_cast<double>(dy[i * O + k]) * x[i * I + j];
    return dw;
  };
  m.forward_terms = in;
  m.data_terms = out;
  m.filter_terms = n;
  return m;
}

AffineModel conv_model(const ops::Conv2dShape& s) {
  AffineModel m;
  m.y_shape = {s.n, s.k, s.p(), s.q()};
  m.forward = [s](std::span<const float> x, std::span<const float> w) {
    std::vector<double> y(s.y_size());
    refs::conv2d_forward_ref_fp64(s, x, w, y);
    return y;
  };
  m.data = [s](std::span<const float> dy, std::span<const float> w) {
    std::vector<double> dx(s.x_size());
    refs::conv2d_backward_data_ref_fp64(s, dy, w, dx);
    return dx;
  };
  m.filter = [s](std::span<const float> x, std::span<const float> dy) {
    std::vector<double> dw(s.weight_size());
    refs::conv2d_backward_filter_ref_fp64(s, x, dy, dw);
    return dw;
  };
  m.forward_terms = s.forward_terms();
  m.data_terms = s.backward_data_terms();
  m.filter_terms = s.backward_filter_terms();
  return m;
}

// The transposed convolution of input z is the adjoint of the convolution
// `s` (nn/conv_transpose2d.h): its forward is s's backward data, its dz is
// s's forward, its dW is s's backward filter with x = dout, dy = z.
AffineModel conv_transpose_model(const ops::Conv2dShape& s) {
  AffineModel m;
  m.y_shape = {s.n, s.c, s.h, s.w};
  m.forward = [s](std::span<const float> z, std::span<const float> w) {
    std::vector<double> y(s.x_size());
    refs::conv2d_backward_data_ref_fp64(s, z, w, y);
    return y;
  };
  m.data = [s](std::span<const float> dout, std::span<const float> w) {
    std::vector<double> dz(s.y_size());
    refs::conv2d_forward_ref_fp64(s, dout, w, dz);
    return dz;
  };
  m.filter = [s](std::span<const float> z, std::span<const float> dout) {
    std::vector<double> dw(s.weight_size());
    refs::conv2d_backward_filter_ref_fp64(s, dout, z, dw);
    return dw;
  };
  m.forward_terms = s.backward_data_terms();
  m.data_terms = s.forward_terms();
  m.filter_terms = s.backward_filter_terms();
  return m;
}

// |W||x| + |b| per element of y.
std::vector<double> affine_magnitude(const AffineModel& m, std::span<const float> x, std::span<const float> w,
                                     std::span<const float> b) {
  std::vector<double> a = m.forward(absolute(x), absolute(w));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] += std::fabs(b[channel_of(m.y_shape, i)]);
  return a;
}

std::vector<double> scaled(std::vector<double> v, double factor) {
  for (double& x : v) x *= factor;
  return v;
}

// Central differences along x, W and b of an affine layer with parameters {W, b}.
void check_affine_gradients(nn::Layer& layer, const Tensor& x, const AffineModel& m, std::uint64_t seed,
                            const std::string& what) {
  RefRun run;
  const auto params = layer.parameters();
  ASSERT_EQ(params.size(), 2u) << what;
  nn::Parameter& w = *params[0];
  nn::Parameter& b = *params[1];
  set_parameter(w, grid_normal(w.size(), seed + 1, 0.5, 2));
  set_parameter(b, grid_normal(b.size(), seed + 2, 0.5, 2));
  const std::vector<float> r = grid_normal(m.y_shape.size(), seed + 3, 1, 4);
  const std::vector<float> vx = grid_normal(x.size(), seed + 4, 1, 2), vw = grid_normal(w.size(), seed + 5, 1, 2),
                           vb = grid_normal(b.size(), seed + 6, 1, 2);
  const double h = 0x1p-4;  // L is linear along each direction: no truncation, so a large step

  layer.forward(run.ctx, x);
  Tensor dy = make_tensor(m.y_shape.n, m.y_shape.c, m.y_shape.h, m.y_shape.w, r);
  const Tensor dx = layer.backward(run.ctx, dy, true);
  ASSERT_EQ(dx.size(), x.size()) << what;
  const std::vector<float> gw = w.grad, gb = b.grad;

  const double gf = gamma32(m.forward_terms + 1);
  const auto dx_error = scaled(m.data(absolute(r), absolute(w.value)), gamma32(m.data_terms));
  const auto dw_error = scaled(m.filter(absolute(x.values), absolute(r)), gamma32(m.filter_terms));
  // db: the sum over n, h, w in FP64, rounded once.
  const auto r_sums = channel_abs_sums(m.y_shape, r);
  std::vector<double> db_error(b.size());
  for (std::size_t c = 0; c < b.size(); ++c)
    db_error[c] = kOnceU32 * std::fabs(gb[c]) + gamma64(count(m.y_shape.channel_elements())) * r_sums[c];

  {
    const Difference d = input_difference(layer, run.ctx, x, vx, h, r);
    const auto ep = scaled(affine_magnitude(m, d.p_plus, w.value, b.value), gf);
    const auto em = scaled(affine_magnitude(m, d.p_minus, w.value, b.value), gf);
    expect_agree(directional(d, h, r, ep, em, dx.values, vx, dx_error, 0), what + " dx");
  }
  {
    const Difference d = parameter_difference(layer, run.ctx, x, w, vw, h, r);
    const auto ep = scaled(affine_magnitude(m, x.values, d.p_plus, b.value), gf);
    const auto em = scaled(affine_magnitude(m, x.values, d.p_minus, b.value), gf);
    expect_agree(directional(d, h, r, ep, em, gw, vw, dw_error, 0), what + " dw");
  }
  {
    const Difference d = parameter_difference(layer, run.ctx, x, b, vb, h, r);
    const auto ep = scaled(affine_magnitude(m, x.values, w.value, d.p_plus), gf);
    const auto em = scaled(affine_magnitude(m, x.values, w.value, d.p_minus), gf);
    expect_agree(directional(d, h, r, ep, em, gb, vb, db_error, 0), what + " db");
  }
}

TEST(LayerGradients, Linear) {
  const int n = 3, in = 5, out = 4;
  nn::Linear layer("fc", in, out, 7, 0);
  check_affine_gradients(layer, make_tensor(n, in, 1, 1, grid_normal(n * in, 11, 1, 4)), linear_model(n, in, out), 100,
                         "Linear");
}

// Strided with padding (windows overlap the border), and stride 1 without.
TEST(LayerGradients, Conv2d) {
  struct Case {
    int n, c, h, w, k, kernel, stride, pad;
  };
  for (const Case& cs : {Case{2, 3, 5, 6, 4, 3, 2, 1}, Case{2, 2, 4, 5, 3, 2, 1, 0}}) {
    nn::Conv2d layer("conv", cs.c, cs.k, cs.kernel, cs.stride, cs.pad, 7, 0);
    const Tensor x = make_tensor(cs.n, cs.c, cs.h, cs.w, grid_normal(static_cast<std::size_t>(cs.n) * cs.c * cs.h * cs.w, 12, 1, 4));
    check_affine_gradients(layer, x, conv_model(layer.shape_for(x)), 200,
                           "Conv2d stride " + std::to_string(cs.stride));
  }
}

TEST(LayerGradients, ConvTranspose2d) {
  struct Case {
    int n, cin, h, w, cout, kernel, stride, pad;
  };
  for (const Case& cs : {Case{2, 3, 3, 4, 2, 4, 2, 1}, Case{2, 2, 3, 3, 3, 3, 1, 0}}) {
    nn::ConvTranspose2d layer("deconv", cs.cin, cs.cout, cs.kernel, cs.stride, cs.pad, 7, 0);
    const Tensor z = make_tensor(cs.n, cs.cin, cs.h, cs.w, grid_normal(static_cast<std::size_t>(cs.n) * cs.cin * cs.h * cs.w, 13, 1, 4));
    check_affine_gradients(layer, z, conv_transpose_model(layer.adjoint_shape(z)), 300,
                           "ConvTranspose2d stride " + std::to_string(cs.stride));
  }
}

// --- ConvTranspose2d against its scatter definition ---------------------------

// out[n, co, ih s - p + r, iw s - p + t] += z[n, ci, ih, iw] W[ci, co, r, t]
// (PyTorch's definition of ConvTranspose2d), in double, with dz and dW of
// <out, dout> from the same seven loops.
struct Scatter {
  std::vector<double> out, dz, dw;
};

Scatter scatter(int n, int cin, int h, int w, int cout, int kernel, int stride, int pad, std::span<const float> z,
                std::span<const float> wgt, std::span<const float> dout) {
  const int H = (h - 1) * stride - 2 * pad + kernel, W = (w - 1) * stride - 2 * pad + kernel;
  Scatter s;
  s.out.assign(static_cast<std::size_t>(n) * cout * H * W, 0.0);
  s.dz.assign(z.size(), 0.0);
  s.dw.assign(wgt.size(), 0.0);
  auto at = [](int a, int b, int c, int d, int B, int C, int D) {
    return ((static_cast<std::size_t>(a) * B + b) * C + c) * D + d;
  };
  for (int b = 0; b < n; ++b)
    for (int ci = 0; ci < cin; ++ci)
      for (int ih = 0; ih < h; ++ih)
        for (int iw = 0; iw < w; ++iw)
          for (int co = 0; co < cout; ++co)
            for (int r = 0; r < kernel; ++r)
              for (int t = 0; t < kernel; ++t) {
                const int oh = ih * stride - pad + r, ow = iw * stride - pad + t;
                if (oh < 0 || oh >= H || ow < 0 || ow >= W) continue;
                const std::size_t zi = at(b, ci, ih, iw, cin, h, w), wi = at(ci, co, r, t, cout, kernel, kernel),
                                  oi = at(b, co, oh, ow, cout, H, W);
                s.out[oi] += static_cast<double>(z[zi]) * wgt[wi];
                s.dz[zi] += static_cast<double>(dout[oi]) * wgt[wi];
                s.dw[wi] += static_cast<double>(z[zi]) * dout[oi];
              }
  return s;
}

// Each float result is within gamma_L(2^-24) of the exact sum times its
// |.|-sum (the scatter's own FP64 error is within gamma_L(2^-53) of the same),
// L the most terms it sums: out k r s + 1 (the bias; ConvTranspose2d reaches
// an output element through at most in * kernel^2 taps), dz cout kernel^2,
// dW n h w.
TEST(ConvTranspose2dOracle, MatchesTheScatterDefinition) {
  struct Case {
    int n, cin, h, w, cout, kernel, stride, pad;
  };
  // in != out both ways, in == out (where a transposed weight layout would
  // still fit every size), and stride = kernel (no overlap).
  for (const Case& cs : {Case{2, 3, 3, 4, 2, 4, 2, 1}, Case{1, 2, 4, 3, 3, 3, 1, 1}, Case{1, 3, 3, 2, 3, 3, 2, 0},
                         Case{2, 4, 2, 2, 1, 3, 3, 0}}) {
    RefRun run;
    nn::ConvTranspose2d layer("deconv", cs.cin, cs.cout, cs.kernel, cs.stride, cs.pad, 5, 0);
    auto params = layer.parameters();
    set_parameter(*params[0], grid_normal(params[0]->size(), 31, 1, 4));
    set_parameter(*params[1], grid_normal(params[1]->size(), 32, 1, 4));
    const std::size_t zn = static_cast<std::size_t>(cs.n) * cs.cin * cs.h * cs.w;
    const Tensor z = make_tensor(cs.n, cs.cin, cs.h, cs.w, grid_normal(zn, 33, 1, 4));
    const Tensor out = layer.forward(run.ctx, z);
    const int H = (cs.h - 1) * cs.stride - 2 * cs.pad + cs.kernel, W = (cs.w - 1) * cs.stride - 2 * cs.pad + cs.kernel;
    ASSERT_EQ(out.n, cs.n);
    ASSERT_EQ(out.c, cs.cout);
    ASSERT_EQ(out.h, H);
    ASSERT_EQ(out.w, W);
    const std::vector<float> dout_values = grid_normal(out.size(), 34, 1, 4);
    const Tensor dz = layer.backward(run.ctx, make_tensor(out.n, out.c, out.h, out.w, dout_values), true);

    const auto& wgt = params[0]->value;
    const auto& bias = params[1]->value;
    const Scatter exact = scatter(cs.n, cs.cin, cs.h, cs.w, cs.cout, cs.kernel, cs.stride, cs.pad, z.values, wgt,
                                  dout_values);
    const Scatter mag = scatter(cs.n, cs.cin, cs.h, cs.w, cs.cout, cs.kernel, cs.stride, cs.pad, absolute(z.values),
                                absolute(wgt), absolute(dout_values));
    const std::string what = "stride " + std::to_string(cs.stride) + " pad " + std::to_string(cs.pad);
    const ops::ChannelShape out_shape{out.n, out.c, out.h, out.w};
    const double g_out = gamma32(std::int64_t{cs.cin} * cs.kernel * cs.kernel + 1) +
                         gamma64(std::int64_t{cs.cin} * cs.kernel * cs.kernel + 1);
    for (std::size_t i = 0; i < out.size(); ++i) {
      const double b = bias[channel_of(out_shape, i)];
      ASSERT_LE(std::fabs(out.values[i] - (exact.out[i] + b)), g_out * (mag.out[i] + std::fabs(b))) << what << " out " << i;
    }
    const double g_dz = gamma32(std::int64_t{cs.cout} * cs.kernel * cs.kernel) +
                        gamma64(std::int64_t{cs.cout} * cs.kernel * cs.kernel);
    for (std::size_t i = 0; i < dz.size(); ++i)
      ASSERT_LE(std::fabs(dz.values[i] - exact.dz[i]), g_dz * mag.dz[i]) << what << " dz " << i;
    const double g_dw = gamma32(std::int64_t{cs.n} * cs.h * cs.w) + gamma64(std::int64_t{cs.n} * cs.h * cs.w);
    for (std::size_t i = 0; i < wgt.size(); ++i)
      ASSERT_LE(std::fabs(params[0]->grad[i] - exact.dw[i]), g_dw * mag.dw[i]) << what << " dW " << i;
    // The bounds are tiny against the values: a transposed or flipped kernel cannot hide in them.
    double norm = 0, mag_norm = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      norm += exact.out[i] * exact.out[i];
      mag_norm += mag.out[i] * mag.out[i];
    }
    EXPECT_LT(g_out * std::sqrt(mag_norm), 1e-5 * std::sqrt(norm)) << what;
  }
}

TEST(ConvTranspose2dOracle, RejectsAnInputWithNoOutput) {
  RefRun run;
  nn::ConvTranspose2d layer("deconv", 2, 1, 2, 1, 1, 5, 0);  // 1 x 1 -> (0) * 1 - 2 + 2 = 0
  EXPECT_THROW(layer.forward(run.ctx, Tensor(1, 2, 1, 1)), std::invalid_argument);
  EXPECT_THROW(layer.forward(run.ctx, Tensor(1, 3, 4, 4)), std::invalid_argument);  // wrong channels
}

// Backward needs what the forward kept; a gradient of the wrong shape is refused.
TEST(Layers, RefuseABackwardBeforeTheForwardOrOfTheWrongShape) {
  RefRun run;
  std::vector<std::unique_ptr<nn::Layer>> layers;
  layers.push_back(std::make_unique<nn::Conv2d>("conv", 2, 3, 3, 1, 1, 1, 0));
  layers.push_back(std::make_unique<nn::ConvTranspose2d>("deconv", 2, 3, 4, 2, 1, 1, 0));
  layers.push_back(std::make_unique<nn::ActivationLayer>("relu", ops::ActivationParams{}));
  layers.push_back(std::make_unique<nn::MaxPool2d>("pool", 2, 2));
  layers.push_back(std::make_unique<nn::BatchNorm2d>("bn", 2));
  layers.push_back(std::make_unique<nn::Reshape>("reshape", 8, 2, 2));
  for (const auto& layer : layers) {
    for (nn::Parameter* p : layer->parameters()) nn::cast_weights(*p, run.precision);
    EXPECT_THROW(layer->backward(run.ctx, Tensor(2, 2, 4, 4), true), std::invalid_argument) << layer->name();
    const Tensor y = layer->forward(run.ctx, make_tensor(2, 2, 4, 4, grid_normal(64, 1, 1, 4)));
    EXPECT_THROW(layer->backward(run.ctx, Tensor(y.n, y.c + 1, y.h, y.w), true), std::invalid_argument)
        << layer->name();
    EXPECT_NO_THROW(layer->backward(run.ctx, Tensor(y.n, y.c, y.h, y.w), true)) << layer->name();
  }
}

// --- activations, max-pool, reshape --------------------------------------------

ops::ActivationParams activation(ops::Activation kind) {
  ops::ActivationParams p;
  p.kind = kind;
  p.negative_slope = 0.2;
  return p;
}

// The ops evaluated in FP64 and rounded once: u32 |f| / (1 - u32) for the
// rounding, and 16 u64 |f| for the FP64 evaluation (libm's tanh and exp are
// within a few ulps of double).
std::vector<double> once_rounded_error(std::span<const float> values) {
  std::vector<double> e(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) e[i] = (kOnceU32 + 16 * kU64) * std::fabs(values[i]);
  return e;
}

TEST(LayerGradients, Activations) {
  const int bn = 2, bc = 3, bh = 4, bw = 5;
  const std::size_t size = static_cast<std::size_t>(bn) * bc * bh * bw;
  const float margin = 0x1p-4f;
  for (ops::Activation kind :
       {ops::Activation::relu, ops::Activation::leaky_relu, ops::Activation::tanh, ops::Activation::sigmoid}) {
    RefRun run;
    nn::ActivationLayer layer("act", activation(kind));
    const Tensor x = make_tensor(bn, bc, bh, bw, away_from_zero(grid_normal(size, 41, 1.5, 4), margin));
    const std::vector<float> r = grid_normal(size, 42, 1, 4), v = grid_normal(size, 43, 1, 2);
    const bool piecewise_linear = kind == ops::Activation::relu || kind == ops::Activation::leaky_relu;
    // Piecewise linear: h |v| <= 2^-5 < margin keeps every point on its side
    // of the kink. Smooth: h balances truncation (h^2) against rounding (1/h).
    const double h = piecewise_linear ? 0x1p-6 : 0x1p-8;
    double truncation = 0;
    if (piecewise_linear) {
      for (std::size_t i = 0; i < size; ++i)
        ASSERT_GT(std::fabs(x.values[i]), h * std::fabs(v[i])) << "the step crosses the kink at element " << i;
    } else {
      const double max_third = kind == ops::Activation::tanh ? 2.0 : 0.125;
      double s = 0;
      for (std::size_t i = 0; i < size; ++i) s += std::fabs(r[i]) * std::pow(std::fabs(v[i]), 3);
      truncation = h * h / 6 * max_third * s;
    }
    layer.forward(run.ctx, x);
    const Tensor dx = layer.backward(run.ctx, make_tensor(bn, bc, bh, bw, r), true);
    const Difference d = input_difference(layer, run.ctx, x, v, h, r);
    expect_agree(directional(d, h, r, once_rounded_error(d.plus.y), once_rounded_error(d.minus.y), dx.values, v,
                             once_rounded_error(dx.values), truncation),
                 std::string("activation ") + std::string(ops::to_string(kind)));
  }
}

// Distinct inputs 2^-5 apart and steps h |v| <= 2^-7: no window changes its
// winner (asserted), so L is linear along the segment. Non-overlapping 2x2
// windows, and overlapping 3x3 ones with padding (gradients summed).
TEST(LayerGradients, MaxPool2d) {
  struct Case {
    int kernel, stride, pad;
  };
  for (const Case& cs : {Case{2, 2, 0}, Case{3, 2, 1}}) {
    RefRun run;
    nn::MaxPool2d layer("pool", cs.kernel, cs.stride, cs.pad);
    const Tensor x = make_tensor(2, 2, 6, 6, distinct_values(144, 51, 0x1p-5));
    const ops::PoolShape shape = layer.shape_for(x);
    const std::vector<float> r = grid_normal(shape.y_size(), 52, 1, 4), v = grid_normal(x.size(), 53, 0.7, 2);
    const double h = 0x1p-8;
    const Tensor y = layer.forward(run.ctx, x);
    const Tensor dx = layer.backward(run.ctx, make_tensor(y.n, y.c, y.h, y.w, r), true);
    const Difference d = input_difference(layer, run.ctx, x, v, h, r);
    const auto winners = ops::max_pool_argmax(shape, x.values);
    ASSERT_EQ(ops::max_pool_argmax(shape, d.p_plus), winners);
    ASSERT_EQ(ops::max_pool_argmax(shape, d.p_minus), winners);
    // dx: each element sums at most max_windows_per_element dy in FP64, rounded once.
    std::vector<double> dx_error(dx.size());
    std::vector<float> dx_abs(dx.size());
    refs::max_pool_backward_ref(shape, x.values, absolute(r), dx_abs);
    for (std::size_t i = 0; i < dx.size(); ++i)
      dx_error[i] = kOnceU32 * std::fabs(dx.values[i]) + gamma64(shape.max_windows_per_element()) * dx_abs[i] * (1 + kOnceU32);
    expect_agree(directional(d, h, r, {}, {}, dx.values, v, dx_error, 0),
                 "max-pool " + std::to_string(cs.kernel) + "x" + std::to_string(cs.kernel));
  }
}

TEST(LayerGradients, Reshape) {
  RefRun run;
  nn::Reshape layer("reshape", 3, 2, 2);
  const Tensor x = make_tensor(3, 12, 1, 1, grid_normal(36, 61, 1, 4));
  const Tensor y = layer.forward(run.ctx, x);
  EXPECT_EQ(y.n, 3);
  EXPECT_EQ(y.c, 3);
  EXPECT_EQ(y.h, 2);
  EXPECT_EQ(y.w, 2);
  EXPECT_EQ(y.values, x.values);  // NCHW keeps an example contiguous: nothing moves
  const std::vector<float> r = grid_normal(36, 62, 1, 4), v = grid_normal(36, 63, 1, 2);
  const Tensor dx = layer.backward(run.ctx, make_tensor(3, 3, 2, 2, r), true);
  EXPECT_EQ(dx.n, 3);
  EXPECT_EQ(dx.c, 12);
  EXPECT_EQ(dx.h, 1);
  EXPECT_EQ(dx.w, 1);
  const Difference d = input_difference(layer, run.ctx, x, v, 0x1p-4, r);
  expect_agree(directional(d, 0x1p-4, r, {}, {}, dx.values, v, {}, 0), "reshape");
  EXPECT_THROW(layer.forward(run.ctx, Tensor(3, 11, 1, 1)), std::invalid_argument);
}

// --- batch norm ------------------------------------------------------------------

// Per channel, in double from the float input: the batch mean, 1/sqrt(var +
// eps) (biased variance), and the mean of |x|.
struct ChannelStats {
  std::vector<double> mean, invstd, mean_abs;
  double xhat(const ops::ChannelShape& s, std::span<const float> x, std::size_t i) const {
    const std::size_t c = channel_of(s, i);
    return (x[i] - mean[c]) * invstd[c];
  }
};

ChannelStats channel_stats(const ops::ChannelShape& s, std::span<const float> x, double eps) {
  const auto C = static_cast<std::size_t>(s.c);
  const auto M = static_cast<double>(s.channel_elements());
  ChannelStats st{std::vector<double>(C, 0.0), std::vector<double>(C, 0.0), std::vector<double>(C, 0.0)};
  for (std::size_t i = 0; i < x.size(); ++i) {
    st.mean[channel_of(s, i)] += x[i];
    st.mean_abs[channel_of(s, i)] += std::fabs(x[i]);
  }
  std::vector<double> sq(C, 0.0);
  for (std::size_t c = 0; c < C; ++c) {
    st.mean[c] /= M;
    st.mean_abs[c] /= M;
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = x[i] - st.mean[channel_of(s, i)];
    sq[channel_of(s, i)] += d * d;
  }
  for (std::size_t c = 0; c < C; ++c) st.invstd[c] = 1 / std::sqrt(sq[c] / M + eps);
  return st;
}

// The reference's forward error at input x: one rounding of y, and the FP64
// evaluation (mean and variance sums of M terms, a few more operations) within
// gamma_{M+10}(2^-53) (|gamma| (|xhat| + mean|x| invstd) + |beta|).
std::vector<double> batch_norm_forward_error(const ops::ChannelShape& s, std::span<const float> x,
                                             std::span<const float> y, std::span<const float> gamma,
                                             std::span<const float> beta, double eps) {
  const ChannelStats st = channel_stats(s, x, eps);
  const double g64 = gamma64(count(s.channel_elements()) + 10);
  std::vector<double> e(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t c = channel_of(s, i);
    e[i] = kOnceU32 * std::fabs(y[i]) +
           g64 * (std::fabs(gamma[c]) * (std::fabs(st.xhat(s, x, i)) + st.mean_abs[c] * st.invstd[c]) +
                  std::fabs(beta[c]));
  }
  return e;
}

// Truncation of the central difference along x. Per channel, with c = x - mean
// and w = v - mean(v) (xhat sees x only through the centred values),
//   L_ch(t) = gamma (a + b t) q(t)^(-1/2) + const,  a = <r, c>, b = <r, w>,
//   q(t) = alpha + 2 beta t + delta t^2, alpha = |c|^2/M + eps,
//   beta = <c, w>/M, delta = |w|^2/M,  |beta| <= sqrt(alpha delta).
// For complex |t| <= rho = sqrt(alpha/delta)/4: |2 beta t| <= alpha/2 and
// |delta t^2| <= alpha/16, so |q - alpha| <= 9 alpha/16, q stays in the right
// half-plane, the principal q^(-1/2) is analytic and
// |L_ch - const| <= F = |gamma| (|a| + |b| rho) sqrt(16 / (7 alpha)).
// Cauchy's estimate gives |L_ch'''(xi)| <= 6 F / (rho - |xi|)^3 for |xi| < rho,
// so the truncation h^2/6 |L'''| is at most h^2 F / (rho - h)^3.
double batch_norm_truncation(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> v,
                             std::span<const float> r, std::span<const float> gamma, double eps, double h) {
  const auto C = static_cast<std::size_t>(s.c);
  const auto M = static_cast<double>(s.channel_elements());
  const ChannelStats st = channel_stats(s, x, eps);
  std::vector<double> v_mean(C, 0.0);
  for (std::size_t i = 0; i < v.size(); ++i) v_mean[channel_of(s, i)] += v[i] / M;
  std::vector<double> a(C, 0.0), b(C, 0.0), cc(C, 0.0), ww(C, 0.0);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t ch = channel_of(s, i);
    const double ci = x[i] - st.mean[ch], wi = v[i] - v_mean[ch];
    a[ch] += r[i] * ci;
    b[ch] += r[i] * wi;
    cc[ch] += ci * ci;
    ww[ch] += wi * wi;
  }
  double total = 0;
  for (std::size_t ch = 0; ch < C; ++ch) {
    const double alpha = cc[ch] / M + eps, delta = ww[ch] / M;
    if (delta == 0) continue;  // v constant in the channel: xhat does not move
    const double rho = std::sqrt(alpha / delta) / 4;
    EXPECT_LT(h, rho / 2) << "step too large for the truncation bound in channel " << ch;
    const double F = std::fabs(gamma[ch]) * (std::fabs(a[ch]) + std::fabs(b[ch]) * rho) * std::sqrt(16 / (7 * alpha));
    total += h * h * F / std::pow(rho - h, 3);
  }
  return total;
}

// The reference backward's error. It runs in FP64 from the float statistics
// the forward saved: mean~ = mean + e_mu, |e_mu| <= u |mean| + gamma_M(2^-53)
// mean|x|, and invstd~ = invstd (1 + e_s), |e_s| <= u + gamma_{M+8}(2^-53).
// So xhat~_i = xhat_i (1 + e_s) - e_mu invstd (1 + e_s) is within
// z_i = e_s |xhat_i| + |e_mu| invstd (1 + e_s) of xhat_i; dgamma~ = sum dy
// xhat~ within Z = sum |dy_i| z_i; and
//   dx~_j - dx_j = gamma/M [(invstd~ - invstd)(M dy_j - dbeta - xhat~_j dgamma~)
//                  - invstd (xhat~_j dgamma~ - xhat_j dgamma)]
// is at most |gamma| invstd / M [e_s T_j + z_j (|dgamma| + Z) + |xhat_j| Z],
// T_j = M |dy_j| + |dbeta| + (|xhat_j| + z_j)(|dgamma| + Z). Then one
// rounding to float, and the FP64 evaluation within gamma_{M+10}(2^-53) of
// the terms. dgamma: Z plus its rounding and FP64 sum; dbeta: its rounding
// and FP64 sum.
struct BatchNormGradientError {
  std::vector<double> dx, dgamma, dbeta;
};

BatchNormGradientError batch_norm_gradient_error(const ops::ChannelShape& s, std::span<const float> x,
                                                 std::span<const float> dy, std::span<const float> gamma,
                                                 std::span<const float> dx, std::span<const float> dgamma,
                                                 std::span<const float> dbeta, double eps) {
  const auto C = static_cast<std::size_t>(s.c);
  const auto Mi = count(s.channel_elements());
  const auto M = static_cast<double>(Mi);
  const ChannelStats st = channel_stats(s, x, eps);
  const double e_s = kU32 + gamma64(Mi + 8);
  std::vector<double> e_mu(C), dg(C, 0.0), db(C, 0.0), Z(C, 0.0), sum_abs_dy(C, 0.0), sum_dy_xhat(C, 0.0);
  for (std::size_t c = 0; c < C; ++c) e_mu[c] = kU32 * std::fabs(st.mean[c]) + gamma64(Mi) * st.mean_abs[c];
  std::vector<double> z(x.size()), xh(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t c = channel_of(s, i);
    xh[i] = st.xhat(s, x, i);
    z[i] = e_s * std::fabs(xh[i]) + e_mu[c] * st.invstd[c] * (1 + e_s);
    dg[c] += dy[i] * xh[i];
    db[c] += dy[i];
    Z[c] += std::fabs(dy[i]) * z[i];
    sum_abs_dy[c] += std::fabs(dy[i]);
    sum_dy_xhat[c] += std::fabs(dy[i]) * (std::fabs(xh[i]) + z[i]);
  }
  const double g64 = gamma64(Mi + 10);
  BatchNormGradientError e{std::vector<double>(x.size()), std::vector<double>(C), std::vector<double>(C)};
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t c = channel_of(s, i);
    const double scale = std::fabs(gamma[c]) * st.invstd[c] / M;
    const double T = M * std::fabs(dy[i]) + std::fabs(db[c]) + (std::fabs(xh[i]) + z[i]) * (std::fabs(dg[c]) + Z[c]);
    e.dx[i] = scale * (e_s * T + z[i] * (std::fabs(dg[c]) + Z[c]) + std::fabs(xh[i]) * Z[c]) +
              kOnceU32 * std::fabs(dx[i]) + g64 * scale * (1 + e_s) * T;
  }
  for (std::size_t c = 0; c < C; ++c) {
    e.dgamma[c] = Z[c] + kOnceU32 * std::fabs(dgamma[c]) + g64 * sum_dy_xhat[c];
    e.dbeta[c] = kOnceU32 * std::fabs(dbeta[c]) + g64 * sum_abs_dy[c];
  }
  return e;
}

// 4 x 3 x 3 x 3 (M = 36 per channel) and 6 x 5 x 1 x 1 (after a Linear: M = n = 6).
TEST(LayerGradients, BatchNorm2d) {
  struct Case {
    int n, c, h, w;
  };
  const double eps = ops::BatchNormParams{}.eps;
  for (const Case& cs : {Case{4, 3, 3, 3}, Case{6, 5, 1, 1}}) {
    RefRun run;
    nn::BatchNorm2d layer("bn", cs.c);
    auto params = layer.parameters();
    ASSERT_EQ(params.size(), 2u);
    nn::Parameter& gamma = *params[0];
    nn::Parameter& beta = *params[1];
    EXPECT_EQ(gamma.kind, nn::ParameterKind::norm);
    std::vector<float> g = grid_normal(gamma.size(), 71, 0.25, 0.75);
    for (float& v : g) v += 1.0f;
    set_parameter(gamma, g);
    set_parameter(beta, grid_normal(beta.size(), 72, 0.5, 2));
    const ops::ChannelShape s{cs.n, cs.c, cs.h, cs.w};
    const Tensor x = make_tensor(cs.n, cs.c, cs.h, cs.w, grid_normal(s.size(), 73, 2, 4));
    const std::vector<float> r = grid_normal(s.size(), 74, 1, 4), vx = grid_normal(s.size(), 75, 0.5, 2),
                             vg = grid_normal(gamma.size(), 76, 1, 2), vb = grid_normal(beta.size(), 77, 1, 2);
    layer.forward(run.ctx, x);
    const Tensor dx = layer.backward(run.ctx, make_tensor(cs.n, cs.c, cs.h, cs.w, r), true);
    const std::vector<float> dgamma = gamma.grad, dbeta = beta.grad;
    const auto ge = batch_norm_gradient_error(s, x.values, r, gamma.value, dx.values, dgamma, dbeta, eps);
    const std::string what = "batch norm " + std::to_string(cs.n) + "x" + std::to_string(cs.c) + "x" +
                             std::to_string(cs.h) + "x" + std::to_string(cs.w);
    {
      const double h = 0x1p-7;
      const Difference d = input_difference(layer, run.ctx, x, vx, h, r);
      const auto ep = batch_norm_forward_error(s, d.p_plus, d.plus.y, gamma.value, beta.value, eps);
      const auto em = batch_norm_forward_error(s, d.p_minus, d.minus.y, gamma.value, beta.value, eps);
      const double t = batch_norm_truncation(s, x.values, vx, r, gamma.value, eps, h);
      expect_agree(directional(d, h, r, ep, em, dx.values, vx, ge.dx, t), what + " dx");
    }
    const double h = 0x1p-4;  // y is affine in gamma and in beta
    {
      const Difference d = parameter_difference(layer, run.ctx, x, gamma, vg, h, r);
      const auto ep = batch_norm_forward_error(s, x.values, d.plus.y, d.p_plus, beta.value, eps);
      const auto em = batch_norm_forward_error(s, x.values, d.minus.y, d.p_minus, beta.value, eps);
      expect_agree(directional(d, h, r, ep, em, dgamma, vg, ge.dgamma, 0), what + " dgamma");
    }
    {
      const Difference d = parameter_difference(layer, run.ctx, x, beta, vb, h, r);
      const auto ep = batch_norm_forward_error(s, x.values, d.plus.y, gamma.value, d.p_plus, eps);
      const auto em = batch_norm_forward_error(s, x.values, d.minus.y, gamma.value, d.p_minus, eps);
      expect_agree(directional(d, h, r, ep, em, dbeta, vb, ge.dbeta, 0), what + " dbeta");
    }
  }
}

// The running statistics follow PyTorch: (1 - m) old + m batch, the variance unbiased.
TEST(BatchNorm2dLayer, UpdatesRunningStatisticsAsPyTorch) {
  RefRun run;
  nn::BatchNorm2d layer("bn", 2);
  nn::cast_weights(*layer.parameters()[0], run.precision);
  nn::cast_weights(*layer.parameters()[1], run.precision);
  EXPECT_EQ(layer.running_mean(), std::vector<float>(2, 0.0f));
  EXPECT_EQ(layer.running_var(), std::vector<float>(2, 1.0f));
  // Channel 0: 1, 2, 3, 4 (mean 2.5, unbiased var 5/3); channel 1: 0, 0, 0, 8 (mean 2, unbiased var 16).
  const Tensor x = make_tensor(2, 2, 1, 2, {1, 2, 0, 0, 3, 4, 0, 8});
  layer.forward(run.ctx, x);
  EXPECT_NEAR(layer.running_mean()[0], 0.1 * 2.5, 1e-7);
  EXPECT_NEAR(layer.running_mean()[1], 0.1 * 2.0, 1e-7);
  EXPECT_NEAR(layer.running_var()[0], 0.9 + 0.1 * 5.0 / 3.0, 1e-6);
  EXPECT_NEAR(layer.running_var()[1], 0.9 + 0.1 * 16.0, 1e-6);
  EXPECT_THROW(layer.forward(run.ctx, Tensor(1, 2, 1, 1)), std::invalid_argument);  // M = 1: no variance
}

// --- the emu backend with an fp16 recipe -----------------------------------------

// fp16 operands, storage and element-wise inputs, fp32 accumulation; the
// weight gradients fp16 too (no master weights), so that batch norm's
// parameter gradients, which stay in norm_parameters (fp32), are told apart.
nn::Precision fp16_recipe() {
  nn::Precision p;
  const formats::Format f16 = formats::parse_format("fp16");
  p.matmul_forward = p.matmul_backward = f16;
  p.activations = p.activation_grads = p.weights = p.weight_grads = p.elementwise = f16;
  return p;
}

class StoreLog final : public nn::StoreObserver {
 public:
  struct Entry {
    std::string layer, tensor;
    nn::Role role;
    formats::Format format;
    std::vector<float> stored;
  };
  void on_store(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass, std::span<const float>,
                std::span<const float> stored, const formats::Format& format) override {
    entries.push_back({std::string(layer), std::string(tensor), role, format, {stored.begin(), stored.end()}});
  }
  std::vector<Entry> entries;
};

struct EmuRun {
  nn::EmuBackend backend;
  nn::Precision precision = fp16_recipe();
  StoreLog log;
  nn::Context ctx{backend, precision};
  EmuRun() { ctx.set_observer(&log); }
};

bool is_norm_gradient(const std::string& tensor) { return tensor == "dgamma" || tensor == "dbeta"; }

// The layer stored exactly `expected`, each in the format of its role
// (batch norm's parameter gradients in norm_parameters), each value a value
// of that format (rounding it again changes no bit), the activations and
// activation gradients in fp16.
void expect_stored(const EmuRun& run, const std::set<std::string>& expected, const std::string& what) {
  std::set<std::string> seen;
  for (const auto& e : run.log.entries) {
    seen.insert(e.tensor);
    const formats::Format& want =
        is_norm_gradient(e.tensor) ? run.precision.norm_parameters : run.ctx.format_of(e.role);
    EXPECT_EQ(e.format, want) << what << " " << e.tensor;
    if (e.role == nn::Role::activation || e.role == nn::Role::activation_grad) {
      EXPECT_EQ(e.format.name, "fp16") << what << " " << e.tensor;
    }
    std::vector<float> again(e.stored.size());
    emu::quantize(e.stored, again, emu::QuantizeSpec{e.format});
    EXPECT_EQ(std::memcmp(again.data(), e.stored.data(), again.size() * sizeof(float)), 0)
        << what << " " << e.tensor << " holds values that are not " << e.format.name << " values";
  }
  EXPECT_EQ(seen, expected) << what;
}

// |got - ref| <= tol per element, and the comparison is not vacuous.
void expect_close(std::span<const float> ref, std::span<const float> got, std::span<const double> tol,
                  const std::string& what) {
  ASSERT_EQ(ref.size(), got.size()) << what;
  ASSERT_EQ(ref.size(), tol.size()) << what;
  std::size_t failures = 0, first = 0, nonzero = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    nonzero += ref[i] != 0;
    if (std::fabs(static_cast<double>(got[i]) - ref[i]) <= tol[i]) continue;
    if (failures++ == 0) first = i;
  }
  EXPECT_EQ(failures, 0u) << what << ": first at " << first << ": ref " << ref[first] << " emu " << got[first]
                          << " tolerance " << tol[first];
  EXPECT_GT(nonzero, 0u) << what;
}

// The tolerance of an fp16 result against the fp32 reference y32, given
// D_i >= |y^_i - y32_i| for the emulator's fp32 value y^ before the store:
// the store's rounding to fp16 adds at most u16 |y^| <= u16 (|y32| + D_i),
// plus half an fp16 subnormal.
std::vector<double> fp16_store_tolerance(std::span<const float> ref, std::span<const double> D) {
  std::vector<double> tol(ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i)
    tol[i] = D[i] * (1 + kU16) + kU16 * std::fabs(ref[i]) + kFp16HalfSubnormal;
  return tol;
}

// An affine layer under the fp16 recipe against the same layer on the ref
// backend (same initial weights; inputs and dy fp16 values given to both).
// y: the emulator computes with W16 = fl16(W) (|W16 - W| <= u16 |W|), so with
// A = |W||x| + |b| its fp32 result is within gamma_{K+1}(1 + u16) A of the
// exact affine map of W16, which is within u16 A of that of W; the reference
// is within gamma_{K+1} A: D = (gamma_{K+1} (2 + u16) + u16) A. dx likewise
// with A = |dy||W| and K = the data terms. dW: the same fp16 x and dy on both
// sides, both fp32 sums: D = 2 gamma_K |dy||x|. db: two fp32/FP64 sums of M
// terms: D = 2 gamma_{M+1} sum |dy|. Both then stored in fp16.
void compare_affine_with_emu(const std::function<std::unique_ptr<nn::Layer>()>& make, const Tensor& x_in,
                             const AffineModel& m, const std::set<std::string>& stored, const std::string& what) {
  RefRun ref;
  EmuRun emu;
  const auto ref_layer = make(), emu_layer = make();
  for (nn::Parameter* p : ref_layer->parameters()) nn::cast_weights(*p, ref.precision);
  for (nn::Parameter* p : emu_layer->parameters()) nn::cast_weights(*p, emu.precision);
  Tensor x = x_in;
  x.values = test_support::to_fp16(x.values);
  const Tensor y32 = ref_layer->forward(ref.ctx, x), y16 = emu_layer->forward(emu.ctx, x);
  const std::vector<float> dy_values = test_support::to_fp16(grid_normal(y32.size(), 81, 1, 4));
  const Tensor dy = make_tensor(y32.n, y32.c, y32.h, y32.w, dy_values);
  const Tensor dx32 = ref_layer->backward(ref.ctx, dy, true), dx16 = emu_layer->backward(emu.ctx, dy, true);
  expect_stored(emu, stored, what);

  const auto& w = ref_layer->parameters()[0]->value;
  const auto& b = ref_layer->parameters()[1]->value;
  auto D = [](std::vector<double> a, std::int64_t terms) {
    return scaled(std::move(a), gamma32(terms) * (2 + kU16) + kU16);
  };
  expect_close(y32.values, y16.values,
               fp16_store_tolerance(y32.values, D(affine_magnitude(m, x.values, w, b), m.forward_terms + 1)),
               what + " y");
  expect_close(dx32.values, dx16.values,
               fp16_store_tolerance(dx32.values, D(m.data(absolute(dy.values), absolute(w)), m.data_terms)),
               what + " dx");
  const auto& dw32 = ref_layer->parameters()[0]->grad;
  expect_close(dw32, emu_layer->parameters()[0]->grad,
               fp16_store_tolerance(dw32, scaled(m.filter(absolute(x.values), absolute(dy.values)),
                                                 2 * gamma32(m.filter_terms))),
               what + " dw");
  const auto& db32 = ref_layer->parameters()[1]->grad;
  std::vector<double> db_D = channel_abs_sums(m.y_shape, dy.values);
  for (double& v : db_D) v *= 2 * gamma32(count(m.y_shape.channel_elements()) + 1);
  expect_close(db32, emu_layer->parameters()[1]->grad, fp16_store_tolerance(db32, db_D), what + " db");
}

TEST(LayersOnEmu, Linear) {
  const int n = 4, in = 24, out = 10;
  compare_affine_with_emu([] { return std::make_unique<nn::Linear>("fc", 24, 10, 3, 0); },
                          make_tensor(n, in, 1, 1, grid_normal(n * in, 91, 1, 4)), linear_model(n, in, out),
                          {"y", "dx", "dw", "db"}, "Linear");
}

TEST(LayersOnEmu, Conv2d) {
  const Tensor x = make_tensor(2, 3, 8, 7, grid_normal(2 * 3 * 8 * 7, 92, 1, 4));
  const nn::Conv2d probe("conv", 3, 5, 3, 2, 1, 3, 0);
  compare_affine_with_emu([] { return std::make_unique<nn::Conv2d>("conv", 3, 5, 3, 2, 1, 3, 0); }, x,
                          conv_model(probe.shape_for(x)), {"y", "dx", "dw", "db"}, "Conv2d");
}

TEST(LayersOnEmu, ConvTranspose2d) {
  const Tensor z = make_tensor(2, 4, 4, 3, grid_normal(2 * 4 * 4 * 3, 93, 1, 4));
  const nn::ConvTranspose2d probe("deconv", 4, 3, 4, 2, 1, 3, 0);
  compare_affine_with_emu([] { return std::make_unique<nn::ConvTranspose2d>("deconv", 4, 3, 4, 2, 1, 3, 0); }, z,
                          conv_transpose_model(probe.adjoint_shape(z)), {"y", "dx", "dw", "db"}, "ConvTranspose2d");
}

// Both sides evaluate f (or f' dy) in FP64 from the same fp16 input and round
// to fp32 once: within 2 (u32 + 16 u64) |y32| of each other (16 u64: the FP64
// evaluation); then the fp16 store (fp16_store_tolerance).
TEST(LayersOnEmu, Activations) {
  const int n = 2, c = 3, h = 5, w = 4;
  const std::size_t size = static_cast<std::size_t>(n) * c * h * w;
  for (ops::Activation kind :
       {ops::Activation::relu, ops::Activation::leaky_relu, ops::Activation::tanh, ops::Activation::sigmoid}) {
    RefRun ref;
    EmuRun emu;
    nn::ActivationLayer ref_layer("act", activation(kind)), emu_layer("act", activation(kind));
    const Tensor x = make_tensor(n, c, h, w, test_support::to_fp16(grid_normal(size, 94, 2, 4)));
    const Tensor dy = make_tensor(n, c, h, w, test_support::to_fp16(grid_normal(size, 95, 1, 4)));
    const Tensor y32 = ref_layer.forward(ref.ctx, x), y16 = emu_layer.forward(emu.ctx, x);
    const Tensor dx32 = ref_layer.backward(ref.ctx, dy, true), dx16 = emu_layer.backward(emu.ctx, dy, true);
    const std::string what = std::string("activation ") + std::string(ops::to_string(kind));
    expect_stored(emu, {"y", "dx"}, what);
    expect_close(y32.values, y16.values, fp16_store_tolerance(y32.values, scaled(once_rounded_error(y32.values), 2)),
                 what + " y");
    expect_close(dx32.values, dx16.values,
                 fp16_store_tolerance(dx32.values, scaled(once_rounded_error(dx32.values), 2)), what + " dx");
  }
}

// Forward selects an input, an fp16 value, on both sides: equal bit for bit.
// Backward: each input element sums at most max_windows_per_element dy (fp16
// values) of the windows it wins, in fp32 (emu) or FP64 rounded once (ref):
// both within gamma_w sum |dy| of the exact sum; then the fp16 store.
TEST(LayersOnEmu, MaxPool2d) {
  struct Case {
    int kernel, stride, pad;
  };
  for (const Case& cs : {Case{2, 2, 0}, Case{3, 2, 1}}) {
    RefRun ref;
    EmuRun emu;
    nn::MaxPool2d ref_layer("pool", cs.kernel, cs.stride, cs.pad), emu_layer("pool", cs.kernel, cs.stride, cs.pad);
    const Tensor x = make_tensor(2, 3, 7, 6, test_support::to_fp16(grid_normal(2 * 3 * 7 * 6, 96, 1, 4)));
    const Tensor y32 = ref_layer.forward(ref.ctx, x), y16 = emu_layer.forward(emu.ctx, x);
    EXPECT_EQ(y16.values, y32.values);
    const Tensor dy = make_tensor(y32.n, y32.c, y32.h, y32.w, test_support::to_fp16(grid_normal(y32.size(), 97, 1, 4)));
    const Tensor dx32 = ref_layer.backward(ref.ctx, dy, true), dx16 = emu_layer.backward(emu.ctx, dy, true);
    const std::string what = "max-pool " + std::to_string(cs.kernel) + "x" + std::to_string(cs.kernel);
    expect_stored(emu, {"y", "dx"}, what);
    const ops::PoolShape shape = ref_layer.shape_for(x);
    std::vector<float> routed(x.size());
    refs::max_pool_backward_ref(shape, x.values, absolute(dy.values), routed);
    std::vector<double> D(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      D[i] = 2 * gamma32(shape.max_windows_per_element()) * routed[i] * (1 + kOnceU32);
    expect_close(dx32.values, dx16.values, fp16_store_tolerance(dx32.values, D), what + " dx");
  }
}

// emu::batch_norm_*_bounds give the emulator's normwise error against the
// reference op on the same inputs (emu/batch_norm_bounds.h) with the layer's
// policy (fp32 output); the store's fp16 rounding adds u16 ||y^|| <= u16 (1 +
// B) ||y32|| plus half a subnormal per element. Backward: the reference op
// is evaluated at the statistics the emu layer saved (the reference layer
// saved its own, FP64 ones, which are compared to them within the forward
// bounds).
TEST(LayersOnEmu, BatchNorm2d) {
  struct Case {
    int n, c, h, w;
  };
  for (const Case& cs : {Case{4, 3, 5, 5}, Case{8, 6, 1, 1}}) {
    RefRun ref;
    EmuRun emu;
    nn::BatchNorm2d ref_layer("bn", cs.c), emu_layer("bn", cs.c);
    std::vector<float> g = grid_normal(static_cast<std::size_t>(cs.c), 98, 0.25, 0.75);
    for (float& v : g) v += 1.0f;
    const std::vector<float> beta = grid_normal(static_cast<std::size_t>(cs.c), 99, 0.5, 2);
    for (nn::BatchNorm2d* layer : {&ref_layer, &emu_layer}) {
      set_parameter(*layer->parameters()[0], g);
      set_parameter(*layer->parameters()[1], beta);
    }
    const ops::ChannelShape s{cs.n, cs.c, cs.h, cs.w};
    const Tensor x = make_tensor(cs.n, cs.c, cs.h, cs.w, test_support::to_fp16(grid_normal(s.size(), 100, 2, 4)));
    const Tensor dy = make_tensor(cs.n, cs.c, cs.h, cs.w, test_support::to_fp16(grid_normal(s.size(), 101, 1, 4)));
    const Tensor y32 = ref_layer.forward(ref.ctx, x), y16 = emu_layer.forward(emu.ctx, x);
    const Tensor dx32 = ref_layer.backward(ref.ctx, dy, true), dx16 = emu_layer.backward(emu.ctx, dy, true);
    const std::string what = "batch norm " + std::to_string(cs.n) + "x" + std::to_string(cs.c);
    expect_stored(emu, {"y", "dx", "dgamma", "dbeta"}, what);

    const emu::BatchNormPolicy policy = nn::batch_norm_policy(emu.precision);
    const auto fb = emu::batch_norm_forward_bounds(s, {}, x.values, g, beta, policy);
    const double sub = kFp16HalfSubnormal * std::sqrt(static_cast<double>(s.size()));
    auto expect_normwise = [&](std::span<const float> reference, std::span<const float> got, double bound,
                               double absolute_slack, const std::string& name) {
      double diff = 0, norm = 0;
      for (std::size_t i = 0; i < reference.size(); ++i) {
        diff += std::pow(static_cast<double>(got[i]) - reference[i], 2);
        norm += std::pow(static_cast<double>(reference[i]), 2);
      }
      EXPECT_GT(norm, 0) << what << " " << name;
      EXPECT_LE(std::sqrt(diff), bound * std::sqrt(norm) + absolute_slack) << what << " " << name;
      EXPECT_LT(bound, 1e-2) << what << " " << name << ": a bound this loose would hide a wrong result";
    };
    expect_normwise(y32.values, y16.values, fb.y + kU16 * (1 + fb.y), sub, "y");
    expect_normwise(ref_layer.saved_mean(), emu_layer.saved_mean(), fb.mean, 0, "mean");
    expect_normwise(ref_layer.saved_invstd(), emu_layer.saved_invstd(), fb.invstd, 0, "invstd");

    std::vector<float> rdx(s.size()), rdg(g.size()), rdb(g.size());
    refs::batch_norm_backward_ref(s, x.values, dy.values, g, emu_layer.saved_mean(), emu_layer.saved_invstd(), rdx,
                                  rdg, rdb);
    const auto bb = emu::batch_norm_backward_bounds(s, x.values, dy.values, g, emu_layer.saved_mean(),
                                                    emu_layer.saved_invstd(), policy);
    expect_normwise(rdx, dx16.values, bb.dx + kU16 * (1 + bb.dx), sub, "dx");
    expect_normwise(rdg, emu_layer.parameters()[0]->grad, bb.dgamma, 0, "dgamma");
    expect_normwise(rdb, emu_layer.parameters()[1]->grad, bb.dbeta, 0, "dbeta");
    // The reference layer's own backward is that op at its own statistics.
    std::vector<float> own(s.size()), own_dg(g.size()), own_db(g.size());
    refs::batch_norm_backward_ref(s, x.values, dy.values, g, ref_layer.saved_mean(), ref_layer.saved_invstd(), own,
                                  own_dg, own_db);
    EXPECT_EQ(own, dx32.values) << what;
  }
}

TEST(LayersOnEmu, ReshapeStoresNothingAndMovesNoValue) {
  EmuRun emu;
  nn::Reshape layer("reshape", 4, 2, 3);
  const Tensor x = make_tensor(2, 24, 1, 1, grid_normal(48, 102, 1, 4));
  const Tensor y = layer.forward(emu.ctx, x);
  EXPECT_EQ(y.values, x.values);
  const Tensor dx = layer.backward(emu.ctx, y, true);
  EXPECT_EQ(dx.values, x.values);
  EXPECT_TRUE(emu.log.entries.empty());
}

}  // namespace
