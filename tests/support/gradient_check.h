// Central-difference checks of a layer's backward on the ref backend, and the
// emu backend's stored formats: the machinery of tests/nn_layers_test.cpp
// (whose top comment derives the tolerances), shared by the transformer's
// layer and model tests.
//
// directional() compares <grad, v> with D(h) = (L(+h) - L(-h)) / 2h, L(t) =
// <y(p + t v), r>, within truncation + rounding + gradient error: rounding is
// sum_i |r_i| (e_i(+) + e_i(-)) / 2h for forward error bounds e_i at the two
// points, plus the double dot products and the subtraction; the gradient
// error is sum_j |v_j| g_j plus its double dot product. expect_agree() also
// asserts that the tolerance is below 1% of sum_j |grad_j v_j|, the size by
// which a wrong gradient would miss, so that the check can fail.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "emu/quantize.h"
#include "nn/context.h"
#include "nn/emu_backend.h"
#include "nn/layer.h"
#include "nn/ref_backend.h"

namespace mpverify::test_support {

inline constexpr double kU32 = 0x1p-24, kU64 = 0x1p-53;
// One rounding to float of a value v gives f with |f - v| <= u |v| <= u |f| / (1 - u).
inline constexpr double kOnceU32 = kU32 / (1 - kU32);
inline constexpr double kGrid = 0x1p-10;
inline constexpr double kDiscrimination = 1e-2;

inline double gamma32(std::int64_t k) { return compare::gamma(k, kU32); }
inline double gamma64(std::int64_t k) { return compare::gamma(k, kU64); }
inline std::int64_t count(std::size_t n) { return static_cast<std::int64_t>(n); }

// Normal values on the grid 2^-10, clamped to +-limit: p +- h v stays a float
// for grid p and v within +-8 and h = 2^-k, k <= 10 (asserted by shifted()).
inline std::vector<float> grid_normal(std::size_t n, std::uint64_t seed, double sd, double limit) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, sd);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(std::clamp(std::round(d(rng) / kGrid) * kGrid, -limit, limit));
  return v;
}

inline nn::Tensor make_tensor(int n, int c, std::vector<float> values) {
  nn::Tensor t(n, c);
  EXPECT_EQ(values.size(), t.size());
  t.values = std::move(values);
  return t;
}

inline double dot(std::span<const float> a, std::span<const float> b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

inline double abs_dot(std::span<const float> a, std::span<const float> b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += std::fabs(static_cast<double>(a[i]) * b[i]);
  return s;
}

// p + t v, asserting the sum is a float exactly.
inline std::vector<float> shifted(std::span<const float> p, std::span<const float> v, double t) {
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

inline void set_parameter(nn::Parameter& p, std::vector<float> values) {
  ASSERT_EQ(values.size(), p.size()) << p.name;
  p.master = values;
  p.value = std::move(values);
}

struct RefRun {
  nn::RefBackend backend;
  nn::Precision precision;  // every field fp32
  nn::Context ctx{backend, precision};
};

struct Side {
  double loss = 0;
  std::vector<float> y;
};

inline Side evaluate(nn::Layer& layer, nn::Context& ctx, const nn::Tensor& x, std::span<const float> r) {
  nn::Tensor y = layer.forward(ctx, x);
  EXPECT_EQ(y.size(), r.size()) << layer.name();
  return {dot(y.values, r), std::move(y.values)};
}

struct Difference {
  Side plus, minus;
  std::vector<float> p_plus, p_minus;
};

inline Difference input_difference(nn::Layer& layer, nn::Context& ctx, const nn::Tensor& x,
                                   std::span<const float> v, double h, std::span<const float> r) {
  Difference d;
  d.p_plus = shifted(x.values, v, h);
  d.p_minus = shifted(x.values, v, -h);
  nn::Tensor xp = x, xm = x;
  xp.values = d.p_plus;
  xm.values = d.p_minus;
  d.plus = evaluate(layer, ctx, xp, r);
  d.minus = evaluate(layer, ctx, xm, r);
  return d;
}

inline Difference parameter_difference(nn::Layer& layer, nn::Context& ctx, const nn::Tensor& x, nn::Parameter& p,
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
inline Directional directional(const Difference& d, double h, std::span<const float> r,
                               std::span<const double> e_plus, std::span<const double> e_minus,
                               std::span<const float> grad, std::span<const float> v,
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

inline void expect_agree(const Directional& d, const std::string& what) {
  EXPECT_LE(std::fabs(d.analytic - d.central), d.tolerance())
      << what << ": analytic " << d.analytic << ", central difference " << d.central << " (truncation "
      << d.truncation << ", rounding " << d.rounding << ", gradient error " << d.gradient_error << ")";
  EXPECT_GT(d.scale, 0) << what;
  EXPECT_LT(d.tolerance(), kDiscrimination * d.scale) << what << ": the tolerance would hide a wrong gradient";
}

// --- the emu backend with a bf16 recipe -----------------------------------------

// bf16 operands, storage and element-wise inputs (bf16-o2's table without the
// master weights): every stored tensor but the norm parameters' gradients is bf16.
inline nn::Precision bf16_recipe() {
  nn::Precision p;
  const formats::Format bf16 = formats::parse_format("bf16");
  p.matmul_forward = p.matmul_backward = bf16;
  p.activations = p.activation_grads = p.weights = p.weight_grads = p.elementwise = bf16;
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
  nn::Precision precision = bf16_recipe();
  StoreLog log;
  emu::CounterSet counters;
  nn::Context ctx{backend, precision};
  EmuRun() {
    ctx.set_observer(&log);
    ctx.set_counters(&counters);
  }
};

// Every store was in the format of its role (norm-parameter gradients in
// norm_parameters, fp32), every value a value of that format (rounding it
// again changes no bit), the activations and activation gradients bf16; the
// stored "LAYER.TENSOR" names are exactly `expected`; and not every stored
// tensor is zero (the check is not vacuous).
inline void expect_stored_bf16(const EmuRun& run, const std::set<std::string>& expected, const std::string& what) {
  std::set<std::string> seen;
  bool any_nonzero = false;
  for (const auto& e : run.log.entries) {
    const std::string name = e.layer + "." + e.tensor;
    seen.insert(name);
    const bool norm_gradient = e.tensor == "dgamma" || e.tensor == "dbeta";
    const formats::Format& want = norm_gradient ? run.precision.norm_parameters : run.ctx.format_of(e.role);
    EXPECT_EQ(e.format, want) << what << " " << name;
    if (!norm_gradient) {
      EXPECT_EQ(e.format.name, "bf16") << what << " " << name;
    }
    std::vector<float> again(e.stored.size());
    emu::quantize(e.stored, again, emu::QuantizeSpec{e.format});
    EXPECT_EQ(std::memcmp(again.data(), e.stored.data(), again.size() * sizeof(float)), 0)
        << what << " " << name << " holds values that are not " << e.format.name << " values";
    for (float v : e.stored) {
      EXPECT_TRUE(std::isfinite(v)) << what << " " << name;
      any_nonzero = any_nonzero || v != 0.0f;
    }
  }
  EXPECT_EQ(seen, expected) << what;
  EXPECT_TRUE(any_nonzero) << what;
}

}  // namespace mpverify::test_support

namespace mpverify::test_support {

// --- composite layers: Richardson's estimate --------------------------------------
//
// For a layer built of several ops (attention, a transformer block, the
// model) no a priori bound on L''' is derived here. The central difference
// of a smooth L is D(h) = L' + c h^2 + O(h^4), so D(h/2) - D(h/4) = 3/16 c h^2
// + O(h^4) and D(h/4) errs by c h^2 / 16 = (D(h/2) - D(h/4)) / 3 + O(h^4):
// the check allows |D(h/2) - D(h/4)|, three times that estimate, and asserts
// the asymptotic regime it rests on: where the differences stand above the
// rounding level, (D(h) - D(h/2)) / (D(h/2) - D(h/4)) lies in [2, 8] (4 in the
// limit). Rounding: `loss_error` bounds |fl(L) - L| at every point, so D(h/4)
// errs by at most 2 loss_error / (2 h/4); the analytic side by
// `gradient_error`. Both are first-order estimates (see the callers).
struct Richardson {
  double d1 = 0, d2 = 0, d4 = 0;  // D(h), D(h/2), D(h/4)
  double tolerance = 0;
};

template <typename Loss>
Richardson richardson(Loss&& loss, double h, double loss_error, double gradient_error, const std::string& what) {
  auto central = [&](double step) { return (loss(step) - loss(-step)) / (2 * step); };
  Richardson r{central(h), central(h / 2), central(h / 4), 0};
  const double rounding = loss_error / (h / 4);
  r.tolerance = std::fabs(r.d2 - r.d4) + rounding + gradient_error;
  if (std::fabs(r.d2 - r.d4) > 4 * rounding) {
    const double ratio = (r.d1 - r.d2) / (r.d2 - r.d4);
    EXPECT_GE(ratio, 2.0) << what << ": not in the asymptotic regime of the h^2 term";
    EXPECT_LE(ratio, 8.0) << what << ": not in the asymptotic regime of the h^2 term";
  }
  return r;
}

inline void expect_agree(const Richardson& r, double analytic, double scale, const std::string& what) {
  EXPECT_LE(std::fabs(analytic - r.d4), r.tolerance)
      << what << ": analytic " << analytic << ", central differences " << r.d1 << ", " << r.d2 << ", " << r.d4;
  EXPECT_GT(scale, 0) << what;
  EXPECT_LT(r.tolerance, kDiscrimination * scale) << what << ": the tolerance would hide a wrong gradient";
}

}  // namespace mpverify::test_support
