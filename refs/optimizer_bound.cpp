#include "refs/optimizer_bound.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mpverify::refs {

namespace {

constexpr double kU32 = 0x1p-24, kEta32 = 0x1p-150;
constexpr double kU64 = 0x1p-53, kEta64 = 0x1p-1074;  // half of 2^-1074 is not a double: round it up

// The largest error of one round-to-nearest into f beyond u |x|: half the
// smallest subnormal, or the smallest normal when subnormals flush to zero.
double eta_of(const formats::Format& f) { return f.subnormals ? f.min_subnormal() / 2 : f.min_normal(); }

bool is_fp32(const formats::Format& f) { return f.precision() == 24 && f.exponent_bits == 8 && f.subnormals; }

// An exact value and a bound on how far the side's value is from it.
struct Tracked {
  double x = 0;
  double e = 0;
};

// The arithmetic of one side, on Tracked values: each operation propagates
// the operands' bounds and adds its own rounding.
class Side {
 public:
  explicit Side(const SideRounding& r)
      : r_(r), u_(r.fp32_math ? kU32 : kU64), eta_(r.fp32_math ? kEta32 : kEta64) {}

  // The value the side uses for a hyperparameter c.
  double constant(double c) const { return r_.fp32_math ? static_cast<double>(static_cast<float>(c)) : c; }

  Tracked round(Tracked a) const { return round_to(a, u_, eta_); }
  static Tracked round_to(Tracked a, double u, double eta) {
    if (u == 0) return a;
    return {a.x, a.e + u * (std::fabs(a.x) + a.e) + eta};
  }

  // c * a where the exact model multiplies by c and the side by cs.
  Tracked scale(double c, double cs, Tracked a) const {
    if (c == 1 && cs == 1) return a;  // an exact product: no rounding
    return round({c * a.x, std::fabs(cs) * a.e + std::fabs(cs - c) * std::fabs(a.x)});
  }
  Tracked scale(double c, Tracked a) const { return scale(c, constant(c), a); }
  Tracked add(Tracked a, Tracked b) const { return round({a.x + b.x, a.e + b.e}); }
  Tracked sub(Tracked a, Tracked b) const { return round({a.x - b.x, a.e + b.e}); }
  Tracked mul(Tracked a, Tracked b) const {
    return round({a.x * b.x, std::fabs(a.x) * b.e + std::fabs(b.x) * a.e + a.e * b.e});
  }
  // |a^/b^ - a/b| = |(a^ - a) b - a (b^ - b)| / |b^ b| <= (ea |b| + |a| eb) / ((|b| - eb) |b|)
  Tracked div(Tracked a, Tracked b) const {
    const double ab = std::fabs(b.x);
    const double e = ab > b.e ? (a.e * ab + std::fabs(a.x) * b.e) / ((ab - b.e) * ab) : INFINITY;
    return round({a.x / b.x, e});
  }
  Tracked div_constant(Tracked a, double c) const {
    const double cs = constant(c);
    return round({a.x / c, a.e / std::fabs(cs) + std::fabs(a.x) * std::fabs(1 / cs - 1 / c)});
  }
  Tracked add_constant(Tracked a, double c) const { return round({a.x + c, a.e + std::fabs(constant(c) - c)}); }
  // |sqrt(x^) - sqrt(x)| = |x^ - x| / (sqrt(x^) + sqrt(x)) <= min(sqrt(e), e / sqrt(x))
  Tracked sqrt(Tracked a) const {
    const double e = a.x > 0 ? std::min(std::sqrt(a.e), a.e / std::sqrt(a.x)) : std::sqrt(a.e);
    return round({std::sqrt(a.x), e});
  }
  // ATen's lerp: the branch is the one the side takes on its own weight.
  Tracked lerp(Tracked self, Tracked end, double weight) const {
    const double ws = constant(weight);
    const Tracked d = sub(end, self);
    if (std::fabs(ws) < 0.5) return add(self, scale(weight, ws, d));
    // 1 - weight, exact in double (Sterbenz); the side computes it in its precision.
    const double complement = 1 - weight;
    const double cs = r_.fp32_math ? static_cast<double>(1.0f - static_cast<float>(weight)) : complement;
    return sub(end, scale(complement, cs, d));
  }

  Tracked take_gradient(float g) const { return {g, r_.grad_u * std::fabs(g) + (r_.grad_u > 0 ? r_.grad_eta : 0)}; }
  Tracked store_state(Tracked a) const { return round_to(a, r_.state_u, r_.state_eta); }

  // Stores `a` (exact value, bound of the side's unrounded value) as the new
  // weight. `distance` bounds |unrounded - old weight|: rounding to nearest
  // never moves farther than the old weight, a value of the format.
  Tracked store_weight(Tracked a, double distance) const {
    const double mag = std::fabs(a.x) + a.e;
    if (r_.weights_via_fp32) {
      const double e1 = kU32 * mag + kEta32;
      const double e2 = std::min(r_.weight_u * (mag + e1) + r_.weight_eta, distance + e1);
      return {a.x, a.e + e1 + e2};
    }
    return {a.x, a.e + std::min(r_.weight_u * mag + r_.weight_eta, distance)};
  }
  Tracked apply_update(Tracked w, Tracked u) const {
    return store_weight({w.x + u.x, w.e + u.e}, std::fabs(u.x) + u.e);
  }
  // w * c (adamw's decay), rounded once from the exact product.
  Tracked decay(Tracked w, double c) const {
    const double cs = constant(c);
    const Tracked a{c * w.x, std::fabs(cs) * w.e + std::fabs(cs - c) * std::fabs(w.x)};
    return store_weight(a, (std::fabs(w.x) + w.e) * std::fabs(1 - cs));
  }

 private:
  SideRounding r_;
  double u_, eta_;
};

void check_inputs(std::span<const float> w0, const std::vector<std::vector<float>>& grads) {
  for (const auto& g : grads)
    if (g.size() != w0.size())
      throw std::invalid_argument("optimizer bounds: a gradient has " + std::to_string(g.size()) +
                                  " elements, w0 has " + std::to_string(w0.size()));
}

void put(TensorBound& t, std::size_t i, Tracked a) {
  t.exact[i] = a.x;
  t.bound[i] = a.e;
}

TensorBound sized(std::size_t n) { return {std::vector<double>(n), std::vector<double>(n)}; }

}  // namespace

SideRounding SideRounding::fp64_reference() {
  SideRounding r;
  r.fp32_math = false;
  r.weight_u = kU64;
  r.weight_eta = kEta64;
  return r;
}

SideRounding SideRounding::fp32_reference() { return SideRounding{}; }

SideRounding SideRounding::stored(const formats::Format& weights, const formats::Format& state,
                                  const formats::Format& grad, bool weights_via_fp32) {
  SideRounding r;
  if (!is_fp32(grad)) r.grad_u = grad.unit_roundoff(), r.grad_eta = eta_of(grad);
  if (!is_fp32(state)) r.state_u = state.unit_roundoff(), r.state_eta = eta_of(state);
  r.weight_u = weights.unit_roundoff();
  r.weight_eta = eta_of(weights);
  r.weights_via_fp32 = weights_via_fp32 && !is_fp32(weights);
  return r;
}

OptimizerBounds sgd_error_bounds(const ops::SgdParams& p, const SideRounding& rounding, std::span<const float> w0,
                                 const std::vector<std::vector<float>>& grads) {
  p.check();
  check_inputs(w0, grads);
  const Side side(rounding);
  const std::size_t n = w0.size();
  OptimizerBounds out{sized(n), p.momentum != 0 ? sized(n) : TensorBound{}, {}};
  for (std::size_t i = 0; i < n; ++i) {
    Tracked w{w0[i], 0}, v;
    for (std::size_t t = 0; t < grads.size(); ++t) {
      Tracked g = side.take_gradient(grads[t][i]);
      if (p.weight_decay != 0) g = side.add(g, side.scale(p.weight_decay, w));
      if (p.momentum != 0) {
        const Tracked buf = t == 0 ? g : side.add(side.scale(p.momentum, v), side.scale(1 - p.dampening, g));
        v = side.store_state(buf);
        g = p.nesterov ? side.add(g, side.scale(p.momentum, v)) : v;
      }
      w = side.apply_update(w, side.scale(-p.lr, g));
    }
    put(out.w, i, w);
    if (p.momentum != 0) put(out.v, i, v);
  }
  return out;
}

OptimizerBounds adam_error_bounds(const ops::AdamParams& p, const SideRounding& rounding, std::span<const float> w0,
                                  const std::vector<std::vector<float>>& grads) {
  p.check();
  check_inputs(w0, grads);
  const Side side(rounding);
  const std::size_t n = w0.size();
  std::vector<ops::AdamScalars> scalars;
  for (std::size_t t = 0; t < grads.size(); ++t) scalars.push_back(ops::adam_scalars(p, static_cast<std::int64_t>(t + 1)));
  OptimizerBounds out{sized(n), sized(n), sized(n)};
  for (std::size_t i = 0; i < n; ++i) {
    Tracked w{w0[i], 0}, m, v;
    for (std::size_t t = 0; t < grads.size(); ++t) {
      const ops::AdamScalars& s = scalars[t];
      if (p.adamw && p.weight_decay != 0) w = side.decay(w, s.decay_factor);
      Tracked g = side.take_gradient(grads[t][i]);
      if (!p.adamw && p.weight_decay != 0) g = side.add(g, side.scale(p.weight_decay, w));
      m = side.store_state(side.lerp(m, g, s.lerp_weight));
      v = side.store_state(side.add(side.scale(p.beta2, v), side.mul(side.scale(s.one_minus_beta2, g), g)));
      const Tracked denom = side.add_constant(side.div_constant(side.sqrt(v), s.bias_correction2_sqrt), p.eps);
      w = side.apply_update(w, side.div(side.scale(s.neg_step_size, m), denom));
    }
    put(out.w, i, w);
    put(out.m, i, m);
    put(out.v, i, v);
  }
  return out;
}

double normwise_bound(const TensorBound& a, const TensorBound& b) {
  if (a.exact.size() != b.exact.size() || a.bound.size() != b.bound.size() || a.exact.size() != a.bound.size())
    throw std::invalid_argument("normwise_bound: tensors of different sizes");
  double diff2 = 0, exact2 = 0, a2 = 0;
  for (std::size_t i = 0; i < a.exact.size(); ++i) {
    const double d = a.bound[i] + b.bound[i];
    diff2 += d * d;
    exact2 += a.exact[i] * a.exact[i];
    a2 += a.bound[i] * a.bound[i];
  }
  const double denominator = std::sqrt(exact2) - std::sqrt(a2);
  if (!(denominator > 0) || !std::isfinite(diff2)) return INFINITY;
  return std::sqrt(diff2) / denominator * (1 + 0x1p-20);
}

}  // namespace mpverify::refs
