// The three models (nn/models.h) and Sequential: seeded initialisation
// (bitwise reproducible, seed-dependent, one Philox stream per layer), output
// shapes, a full backward on the ref backend that leaves every gradient
// finite, Sequential's need_dx and weight cast, and the MLP's gradient of a
// softmax cross-entropy loss against a central difference through the whole
// model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "emu/quantize.h"
#include "nn/models.h"
#include "nn/policies.h"
#include "nn/ref_backend.h"

namespace {

using namespace mpverify;
using nn::Tensor;

constexpr double kU32 = 0x1p-24, kU64 = 0x1p-53;

double gamma32(std::int64_t k) { return compare::gamma(k, kU32); }
double gamma64(std::int64_t k) { return compare::gamma(k, kU64); }

struct RefRun {
  nn::RefBackend backend;
  nn::Precision precision;  // every field fp32
  nn::Context ctx{backend, precision};
};

// Every stored tensor's layer and name, in order.
class StoreNames final : public nn::StoreObserver {
 public:
  void on_store(std::string_view layer, std::string_view tensor, nn::Role, nn::Pass, std::span<const float>,
                std::span<const float> stored, const formats::Format&) override {
    names.push_back(std::string(layer) + "." + std::string(tensor));
    values.emplace_back(stored.begin(), stored.end());
  }
  const std::vector<float>* find(const std::string& name) const {
    for (std::size_t i = names.size(); i-- > 0;)
      if (names[i] == name) return &values[i];
    return nullptr;
  }
  std::vector<std::string> names;
  std::vector<std::vector<float>> values;
};

Tensor random_tensor(int n, int c, int h, int w, std::uint64_t seed, double lo, double hi) {
  Tensor t(n, c, h, w);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  for (float& v : t.values) v = static_cast<float>(d(rng));
  return t;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The models under one seed, kept alive together.
struct Models {
  nn::Sequential mlp, cnn;
  nn::Dcgan gan;
  explicit Models(std::uint64_t seed)
      : mlp(nn::make_mlp(1, 28, 28, 10, seed)), cnn(nn::make_cnn(1, 28, 28, 10, seed)), gan(nn::make_dcgan(seed)) {}
  std::vector<nn::Sequential*> all() { return {&mlp, &cnn, &gan.generator, &gan.discriminator}; }
};

// --- initialisation ---------------------------------------------------------

TEST(Models, TheSameSeedGivesBitwiseTheSameParameters) {
  Models a(42), b(42);
  const auto nets_a = a.all(), nets_b = b.all();
  for (std::size_t n = 0; n < nets_a.size(); ++n) {
    const auto pa = nets_a[n]->parameters(), pb = nets_b[n]->parameters();
    ASSERT_EQ(pa.size(), pb.size()) << nets_a[n]->name();
    ASSERT_FALSE(pa.empty());
    for (std::size_t i = 0; i < pa.size(); ++i) {
      EXPECT_EQ(pa[i]->name, pb[i]->name);
      EXPECT_TRUE(bitwise_equal(pa[i]->master, pb[i]->master)) << pa[i]->name;
    }
  }
}

// Every randomly initialised parameter (weights; the Linear and Conv2d
// biases) changes with the seed; ConvTranspose2d's bias (zero) and batch
// norm's gamma (1) and beta (0) do not.
TEST(Models, ADifferentSeedGivesDifferentWeights) {
  Models a(42), b(43);
  const auto nets_a = a.all(), nets_b = b.all();
  int random = 0;
  for (std::size_t n = 0; n < nets_a.size(); ++n) {
    const auto pa = nets_a[n]->parameters(), pb = nets_b[n]->parameters();
    for (std::size_t i = 0; i < pa.size(); ++i) {
      const bool deconv_bias = pa[i]->name.find("deconv") != std::string::npos && ends_with(pa[i]->name, ".b");
      const bool constant = pa[i]->kind == nn::ParameterKind::norm || deconv_bias;
      if (constant) {
        EXPECT_TRUE(bitwise_equal(pa[i]->master, pb[i]->master)) << pa[i]->name;
        continue;
      }
      ++random;
      std::size_t same = 0;
      for (std::size_t j = 0; j < pa[i]->size(); ++j) same += pa[i]->master[j] == pb[i]->master[j];
      EXPECT_LT(same, pa[i]->size() / 100 + 1) << pa[i]->name << ": values shared between seeds";
    }
  }
  // mlp: fc1, fc2 (w, b); cnn: conv1, conv2, fc (w, b); generator: g.fc (w, b),
  // g.deconv1.w, g.deconv2.w; discriminator: d.conv1, d.conv2, d.fc (w, b).
  EXPECT_EQ(random, 4 + 6 + 4 + 6);
}

// Two layers on one Philox stream would draw the same words: their first
// values would be proportional (uniform: the bound scales them). No two
// randomly initialised parameters of a model (the DCGAN's two nets together)
// are (those of at least 4 values: d.fc's single bias cannot tell).
TEST(Models, EveryLayerDrawsFromItsOwnStream) {
  Models m(7);
  auto check = [](const std::vector<nn::Parameter*>& params, const std::string& what) {
    std::vector<const nn::Parameter*> random;
    for (const nn::Parameter* p : params)
      if (p->kind == nn::ParameterKind::weight && p->size() >= 4 &&
          std::any_of(p->master.begin(), p->master.end(), [](float v) { return v != 0; }))
        random.push_back(p);
    ASSERT_GE(random.size(), 2u) << what;
    for (std::size_t i = 0; i < random.size(); ++i)
      for (std::size_t j = i + 1; j < random.size(); ++j) {
        const auto& a = random[i]->master;
        const auto& b = random[j]->master;
        const double ratio = static_cast<double>(a[0]) / b[0];
        bool proportional = true;
        for (std::size_t k = 1; k < std::min<std::size_t>({a.size(), b.size(), 8}); ++k)
          proportional = proportional && std::fabs(a[k] - ratio * b[k]) <= 1e-5 * std::fabs(a[k]);
        EXPECT_FALSE(proportional) << what << ": " << random[i]->name << " and " << random[j]->name;
      }
  };
  check(m.mlp.parameters(), "mlp");
  check(m.cnn.parameters(), "cnn");
  auto gan = m.gan.generator.parameters();
  for (nn::Parameter* p : m.gan.discriminator.parameters()) gan.push_back(p);
  check(gan, "dcgan");
}

// --- shapes ----------------------------------------------------------------------

void expect_shape(const Tensor& t, int n, int c, int h, int w, const std::string& what) {
  EXPECT_EQ(t.n, n) << what;
  EXPECT_EQ(t.c, c) << what;
  EXPECT_EQ(t.h, h) << what;
  EXPECT_EQ(t.w, w) << what;
  EXPECT_EQ(t.size(), static_cast<std::size_t>(n) * c * h * w) << what;
}

TEST(Models, OutputShapes) {
  RefRun run;
  Models m(1);
  for (nn::Sequential* net : m.all()) net->cast_weights(run.precision);
  const Tensor images = random_tensor(3, 1, 28, 28, 1, 0, 1);
  expect_shape(m.mlp.forward(run.ctx, images), 3, 10, 1, 1, "mlp logits");
  expect_shape(m.cnn.forward(run.ctx, images), 3, 10, 1, 1, "cnn logits");

  nn::Sequential small = nn::make_cnn(2, 12, 8, 5, 1);  // h/4 = 3, w/4 = 2
  small.cast_weights(run.precision);
  expect_shape(small.forward(run.ctx, random_tensor(2, 2, 12, 8, 2, 0, 1)), 2, 5, 1, 1, "cnn 12x8 logits");

  EXPECT_EQ(m.gan.latent, 32);
  const Tensor fake = m.gan.generator.forward(run.ctx, random_tensor(4, m.gan.latent, 1, 1, 3, -1, 1));
  expect_shape(fake, 4, 1, 28, 28, "generator images");
  for (float v : fake.values) ASSERT_TRUE(v >= -1.0f && v <= 1.0f) << "tanh output outside [-1, 1]: " << v;
  expect_shape(m.gan.discriminator.forward(run.ctx, fake), 4, 1, 1, 1, "discriminator logits");

  nn::Dcgan gan16 = nn::make_dcgan(16, 8, 3);
  gan16.generator.cast_weights(run.precision);
  gan16.discriminator.cast_weights(run.precision);
  const Tensor fake16 = gan16.generator.forward(run.ctx, random_tensor(2, 8, 1, 1, 4, -1, 1));
  expect_shape(fake16, 2, 1, 16, 16, "generator 16x16");
  expect_shape(gan16.discriminator.forward(run.ctx, fake16), 2, 1, 1, 1, "discriminator 16x16");

  EXPECT_THROW(nn::make_dcgan(30, 32, 1), std::invalid_argument);
  try {
    nn::make_dcgan(30, 32, 1);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(nn::make_cnn(1, 3, 28, 10, 1), std::invalid_argument);
  EXPECT_THROW(nn::make_mlp(1, 28, 28, 0, 1), std::invalid_argument);
}

// --- backward ------------------------------------------------------------------

// Every gradient is overwritten with finite values (they start as NaN), and
// no weight gradient is all zero.
void expect_gradients_filled(nn::Sequential& net) {
  for (nn::Parameter* p : net.parameters()) {
    bool finite = true, nonzero = false;
    for (float g : p->grad) {
      finite = finite && std::isfinite(g);
      nonzero = nonzero || g != 0;
    }
    EXPECT_TRUE(finite) << p->name;
    if (ends_with(p->name, ".w")) {
      EXPECT_TRUE(nonzero) << p->name;
    }
  }
}

void poison_gradients(nn::Sequential& net) {
  for (nn::Parameter* p : net.parameters()) p->grad.assign(p->size(), std::numeric_limits<float>::quiet_NaN());
}

TEST(Models, BackwardFillsEveryGradientWithFiniteValues) {
  RefRun run;
  Models m(5);
  const Tensor images = random_tensor(4, 1, 28, 28, 11, 0, 1);
  for (nn::Sequential* net : {&m.mlp, &m.cnn}) {
    net->cast_weights(run.precision);
    poison_gradients(*net);
    const Tensor logits = net->forward(run.ctx, images);
    const Tensor dx = net->backward(run.ctx, random_tensor(logits.n, logits.c, logits.h, logits.w, 12, -1, 1), false);
    EXPECT_EQ(dx.size(), 0u) << net->name() << ": nobody reads the first layer's dx";
    expect_gradients_filled(*net);
  }
  // The GAN's generator step: D's input gradient flows back into G.
  nn::Sequential& g = m.gan.generator;
  nn::Sequential& d = m.gan.discriminator;
  g.cast_weights(run.precision);
  d.cast_weights(run.precision);
  poison_gradients(g);
  poison_gradients(d);
  const Tensor fake = g.forward(run.ctx, random_tensor(4, m.gan.latent, 1, 1, 13, -1, 1));
  const Tensor logit = d.forward(run.ctx, fake);
  const Tensor dfake = d.backward(run.ctx, random_tensor(logit.n, logit.c, logit.h, logit.w, 14, -1, 1), true);
  expect_shape(dfake, 4, 1, 28, 28, "discriminator dx");
  for (float v : dfake.values) ASSERT_TRUE(std::isfinite(v));
  g.backward(run.ctx, dfake, false);
  expect_gradients_filled(g);
  expect_gradients_filled(d);
}

// --- Sequential --------------------------------------------------------------------

TEST(Sequential, AsksOnlyTheFirstLayerWhetherItsInputGradientIsNeeded) {
  RefRun run;
  StoreNames seen;
  run.ctx.set_observer(&seen);
  nn::Sequential mlp = nn::make_mlp(1, 2, 3, 4, 5, 9);
  mlp.cast_weights(run.precision);
  expect_shape(mlp.forward(run.ctx, random_tensor(2, 1, 2, 3, 15, 0, 1)), 2, 4, 1, 1, "logits");
  const Tensor dlogits = random_tensor(2, 4, 1, 1, 16, -1, 1);
  mlp.backward(run.ctx, dlogits, false);
  auto count = [&](const std::string& name) { return std::count(seen.names.begin(), seen.names.end(), name); };
  EXPECT_EQ(count("fc2.dx"), 1);
  EXPECT_EQ(count("relu1.dx"), 1);
  EXPECT_EQ(count("fc1.dx"), 0);
  EXPECT_EQ(count("fc1.dw"), 1);
  const Tensor dx = mlp.backward(run.ctx, dlogits, true);
  EXPECT_EQ(count("fc1.dx"), 1);
  expect_shape(dx, 2, 1, 2, 3, "input gradient");
}

// cast_weights rounds each weight's master to Precision::weights and each
// batch-norm parameter to norm_parameters.
TEST(Sequential, CastWeightsRoundsEachParameterToItsFormat) {
  nn::Sequential cnn = nn::make_cnn(1, 8, 8, 3, 2);
  nn::Precision p;
  p.weights = formats::parse_format("bf16");
  for (nn::Parameter* param : cnn.parameters())
    if (param->kind == nn::ParameterKind::norm)
      for (float& v : param->master) v += 0x1p-20f;  // not a bf16 value
  cnn.cast_weights(p);
  int rounded = 0;
  for (nn::Parameter* param : cnn.parameters()) {
    std::vector<float> want(param->size());
    const formats::Format& f = param->kind == nn::ParameterKind::norm ? p.norm_parameters : p.weights;
    emu::quantize(param->master, want, emu::QuantizeSpec{f});
    EXPECT_TRUE(bitwise_equal(param->value, want)) << param->name;
    rounded += !bitwise_equal(param->value, param->master);
  }
  EXPECT_EQ(rounded, 6);  // conv1, conv2, fc: w and b; the norm parameters kept fp32
}

// --- the MLP's gradient through the whole model ---------------------------------

// L(t) = mean softmax cross-entropy of the MLP with one fc1 weight W1[k][m]
// moved by t. The loss and its gradient come from the backend's
// softmax_cross_entropy(_backward) (upstream gradient 1), the gradient of
// W1[k][m] from the model's backward through fc2, relu1 and fc1.
//
// Truncation: with no pre-activation a_ik crossing 0 within t in [-h, h]
// (asserted with a margin), the logits move linearly, z_i(t) = z_i + t d_i,
// d_ij = x_im [a_ik > 0] W2[j][k]. Cross-entropy's third derivative along d_i
// is the third central moment of d_i under the softmax, at most
// range(d_i)^3, so the truncation is at most h^2/6 (1/n) sum_i range(d_i)^3.
// Rounding: fc1's pre-activations are within E1 = gamma_{K1+1}(u32) A1 of
// exact (A1 = |W1||x| + |b1|), ReLU is exact and 1-Lipschitz, the logits
// within gamma_{K2+1}(u32) (|W2| A1 (1 + gamma_{K1+1}) + |b2|) + |W2| E1;
// cross-entropy's gradient has l1 norm at most 2, so the mean loss moves by at
// most (2/n) sum_i max_j |dz_ij|; then one rounding to float and the FP64
// evaluation (gamma_{C+8}(2^-53) of |L| + 2 max|z|). Over 2h, for both points.
// The gradient's own error: each of its terms passes through at most C + n + 3
// roundings (dz rounded once, fc2's dx sum of C terms, ReLU exact, fc1's dW
// sum of n terms): gamma_{C+n+3}(u32) sum_i |x_im| [a_ik > 0] sum_j |dz_ij||W2[j][k]|.
TEST(Models, MlpGradientMatchesACentralDifferenceOfTheLoss) {
  const int n = 5, channels = 1, height = 4, width = 4, classes = 3, hidden = 8, inputs = channels * height * width;
  RefRun run;
  StoreNames seen;
  run.ctx.set_observer(&seen);
  nn::Sequential mlp = nn::make_mlp(channels, height, width, classes, hidden, 5);
  const auto params = mlp.parameters();  // fc1.w, fc1.b, fc2.w, fc2.b
  ASSERT_EQ(params.size(), 4u);
  nn::Parameter& w1 = *params[0];
  // W1 on the grid 2^-12 (|w| < 1), so W1 +- h is a float exactly.
  for (float& v : w1.master) v = static_cast<float>(std::round(v * 0x1p12) * 0x1p-12);
  mlp.cast_weights(run.precision);
  const std::vector<float>& b1 = params[1]->value;
  const std::vector<float>& w2 = params[2]->value;
  const std::vector<float>& b2 = params[3]->value;

  Tensor x(n, channels, height, width);
  std::mt19937_64 rng(17);
  for (float& v : x.values) v = static_cast<float>(std::uniform_int_distribution<int>(0, 255)(rng)) * 0x1p-8f;
  std::vector<std::int32_t> labels(n);
  for (auto& l : labels) l = std::uniform_int_distribution<std::int32_t>(0, classes - 1)(rng);
  const ops::SoftmaxCrossEntropyShape shape{n, classes};
  const emu::LossPolicy loss_policy = nn::loss_policy(run.precision);
  auto loss = [&] {
    const Tensor logits = mlp.forward(run.ctx, x);
    return static_cast<double>(run.backend.softmax_cross_entropy(shape, logits.values, labels, loss_policy, nullptr));
  };

  const Tensor logits = mlp.forward(run.ctx, x);
  const std::vector<float> a = *seen.find("fc1.y");  // pre-activations, n x hidden
  Tensor dlogits(n, classes);
  run.backend.softmax_cross_entropy_backward(shape, logits.values, labels, dlogits.values, loss_policy, nullptr);
  mlp.backward(run.ctx, dlogits, false);
  const std::vector<float> grad = w1.grad;

  const double h = 0x1p-4;
  const auto at = [](int i, int j, int cols) { return static_cast<std::size_t>(i) * static_cast<std::size_t>(cols) + static_cast<std::size_t>(j); };
  auto A1 = [&](int i, int k) {
    double s = std::fabs(b1[static_cast<std::size_t>(k)]);
    for (int m = 0; m < inputs; ++m) s += std::fabs(w1.value[at(k, m, inputs)]) * x.values[at(i, m, inputs)];
    return s;
  };
  // The weight with the largest gradient among those whose pre-activations keep their sign.
  int best_k = -1, best_m = -1;
  for (int k = 0; k < hidden; ++k)
    for (int m = 0; m < inputs; ++m) {
      int active = 0;
      bool clear = true;
      for (int i = 0; i < n; ++i) {
        const double margin = 2 * h * x.values[at(i, m, inputs)] + gamma32(inputs + 1) * (A1(i, k) + h);
        clear = clear && std::fabs(a[at(i, k, hidden)]) > margin;
        active += a[at(i, k, hidden)] > 0;
      }
      if (!clear || active < 2) continue;
      if (best_k < 0 || std::fabs(grad[at(k, m, inputs)]) > std::fabs(grad[at(best_k, best_m, inputs)])) {
        best_k = k;
        best_m = m;
      }
    }
  ASSERT_GE(best_k, 0) << "no fc1 weight whose pre-activations stay clear of ReLU's kink";
  const int k = best_k, m = best_m;
  float& wkm = w1.value[at(k, m, inputs)];
  const float w0 = wkm;

  auto loss_error = [&](double l) {
    double sum_max = 0, max_z = 0;
    for (int i = 0; i < n; ++i) {
      double worst = 0;
      for (int j = 0; j < classes; ++j) {
        double a2 = std::fabs(b2[static_cast<std::size_t>(j)]), carried = 0;
        for (int kk = 0; kk < hidden; ++kk) {
          const double wjk = std::fabs(w2[at(j, kk, hidden)]), a1 = A1(i, kk);
          a2 += wjk * a1 * (1 + gamma32(inputs + 1));
          carried += wjk * gamma32(inputs + 1) * a1;
        }
        worst = std::max(worst, gamma32(hidden + 1) * a2 + carried);
        max_z = std::max(max_z, a2);
      }
      sum_max += worst;
    }
    return 2.0 / n * sum_max + kU32 / (1 - kU32) * std::fabs(l) + gamma64(classes + 8) * (std::fabs(l) + 2 * max_z);
  };
  wkm = static_cast<float>(w0 + h);
  ASSERT_EQ(static_cast<double>(wkm), w0 + h);
  const double l_plus = loss(), e_plus = loss_error(l_plus);
  wkm = static_cast<float>(w0 - h);
  ASSERT_EQ(static_cast<double>(wkm), w0 - h);
  const double l_minus = loss(), e_minus = loss_error(l_minus);
  wkm = w0;
  const double central = (l_plus - l_minus) / (2 * h);

  double third = 0, grad_error = 0;
  for (int i = 0; i < n; ++i) {
    if (!(a[at(i, k, hidden)] > 0)) continue;
    const double xim = x.values[at(i, m, inputs)];
    double lo = 0, hi = 0, through = 0;
    for (int j = 0; j < classes; ++j) {
      const double d = xim * w2[at(j, k, hidden)];
      lo = j == 0 ? d : std::min(lo, d);
      hi = j == 0 ? d : std::max(hi, d);
      through += std::fabs(dlogits.values[at(i, j, classes)]) * std::fabs(w2[at(j, k, hidden)]);
    }
    third += std::pow(hi - lo, 3) / n;
    grad_error += std::fabs(xim) * through;
  }
  const double truncation = h * h / 6 * third;
  const double rounding = (e_plus + e_minus) / (2 * h) + 2 * kU64 * std::fabs(central);
  grad_error *= gamma32(classes + n + 3);
  const double analytic = grad[at(k, m, inputs)];
  const double tolerance = truncation + rounding + grad_error;
  EXPECT_LE(std::fabs(analytic - central), tolerance)
      << "fc1.w[" << k << "][" << m << "]: analytic " << analytic << ", central " << central << " (truncation "
      << truncation << ", rounding " << rounding << ", gradient error " << grad_error << ")";
  EXPECT_LT(tolerance, 1e-2 * std::fabs(analytic)) << "the tolerance would hide a wrong gradient";
}

}  // namespace
