// training::shard_gradients: each rank's gradient of a training step's shard.
//
// The MLP is held against an FP64 implementation written here (forward,
// softmax cross-entropy, backward, from the model's initial weights and the
// run's batch drawn here): every row against its shard's FP64 gradient, and
// the mean of the rows against the FP64 gradient of the whole N B batch, and
// against the library's own one-pass gradient of that batch (ranks = 1,
// shard batch = N B), which is the data-parallel identity
// mean_r grad L_r = grad L for equal shards. The CNN, whose batch norm makes
// the identity fail on purpose (each shard normalised by its own statistics),
// has each row held against a one-pass forward/backward of that shard alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "data/batches.h"
#include "data/synthetic_digits.h"
#include "nn/context.h"
#include "nn/models.h"
#include "nn/policies.h"
#include "nn/ref_backend.h"
#include "training/shard_gradients.h"

namespace mpverify::training {
namespace {

constexpr int kIn = 784, kHidden = nn::kMlpHidden, kClasses = 10;
constexpr double kU = 0x1p-24;  // fp32's unit roundoff

// The run's step-0 batch, drawn here from the data set and the batch order (data::BatchIterator).
struct Batch {
  std::vector<float> images;
  std::vector<std::int32_t> labels;
};
Batch step0_batch(std::uint64_t seed, std::size_t ranks, std::size_t shard_batch) {
  data::SyntheticOptions so;
  so.seed = seed;
  so.train_size = std::max<std::size_t>(8000, ranks * shard_batch);  // the Trainer's 8000, or one batch
  const data::Split split = data::synthetic_digits(so);
  data::BatchOptions bo;
  bo.batch_size = ranks * shard_batch;
  bo.seed = seed;
  data::BatchIterator it(split.train, bo);
  const data::Batch b = it.next();
  return {{b.images.begin(), b.images.end()}, {b.labels.begin(), b.labels.end()}};
}

// The FP64 gradient of the mean loss over examples [first, first + count), and
// its error scale A (each element's sum of |terms| with every fp32 quantity
// replaced by the magnitude bound its rounding errors scale with; see kChain).
struct Fp64Gradient {
  std::vector<double> g, a;
};
Fp64Gradient mlp_fp64(const std::vector<nn::Parameter*>& p, const Batch& batch, std::size_t first, std::size_t count) {
  const std::vector<float>&w1 = p[0]->master, &b1 = p[1]->master, &w2 = p[2]->master, &b2 = p[3]->master;
  const std::size_t n1 = w1.size(), n2 = n1 + b1.size(), n3 = n2 + w2.size(), total = n3 + b2.size();
  Fp64Gradient out{std::vector<double>(total, 0.0), std::vector<double>(total, 0.0)};
  const double m = static_cast<double>(count);
  for (std::size_t e = first; e < first + count; ++e) {
    const float* x = &batch.images[e * kIn];
    std::vector<double> h(kHidden), habs(kHidden), z(kClasses), zabs(kClasses);
    for (int k = 0; k < kHidden; ++k) {
      double s = b1[k], sa = std::abs(b1[k]);
      for (int l = 0; l < kIn; ++l) s += double(w1[k * kIn + l]) * x[l], sa += std::abs(double(w1[k * kIn + l]) * x[l]);
      h[k] = std::max(s, 0.0);
      habs[k] = sa;
    }
    double zmax_abs = 0;
    for (int j = 0; j < kClasses; ++j) {
      double s = b2[j], sa = std::abs(b2[j]);
      for (int k = 0; k < kHidden; ++k) s += double(w2[j * kHidden + k]) * h[k], sa += std::abs(double(w2[j * kHidden + k])) * habs[k];
      z[j] = s;
      zmax_abs = std::max(zmax_abs, sa);
    }
    const double zmax = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double v : z) sum += std::exp(v - zmax);
    std::vector<double> d(kClasses), dabs(kClasses);
    for (int j = 0; j < kClasses; ++j) {
      d[j] = (std::exp(z[j] - zmax) / sum - (j == batch.labels[e] ? 1.0 : 0.0)) / m;
      // The softmax's Jacobian has row sums of magnitude <= 2, so an error of at most eps |z|max in the logits
      // moves p by at most 2 eps |z|max; the exp and the normalisation round relative to p <= 1.
      dabs[j] = (std::abs(d[j]) * m + 2 * zmax_abs + 1) / m;
    }
    for (int j = 0; j < kClasses; ++j) {
      for (int k = 0; k < kHidden; ++k) {
        out.g[n2 + j * kHidden + k] += d[j] * h[k];
        out.a[n2 + j * kHidden + k] += dabs[j] * habs[k];
      }
      out.g[n3 + j] += d[j];
      out.a[n3 + j] += dabs[j];
    }
    for (int k = 0; k < kHidden; ++k) {
      if (h[k] <= 0) continue;  // relu' = 0 (a pre-activation within rounding of 0 would flip; see kChain)
      double dh = 0, dha = 0;
      for (int j = 0; j < kClasses; ++j) dh += double(w2[j * kHidden + k]) * d[j], dha += std::abs(double(w2[j * kHidden + k])) * dabs[j];
      for (int l = 0; l < kIn; ++l) {
        out.g[k * kIn + l] += dh * x[l];
        out.a[k * kIn + l] += dha * std::abs(x[l]);
      }
      out.g[n1 + k] += dh;
      out.a[n1 + k] += dha;
    }
  }
  return out;
}

// The tolerance. Standard forward error analysis: a sum of k products computed in fp32 in any order is within
// gamma_k = k u / (1 - k u) of the exact value, relative to the sum of its terms' magnitudes; errors of the
// inputs of a stage pass on scaled by the same magnitudes (to first order). An element of the gradient is at
// the end of a chain of at most 785 (fc1: 784 products and the bias) + 129 (fc2) + 10 (softmax's sum) + 10
// (dh = W2^T d) + M (the batch's sum, M <= 64 here) + 2 (exp, division) roundings, so its error is at most
// gamma_kChain A, A the magnitude propagation mlp_fp64 computes. (A ReLU whose pre-activation lies within its
// rounding error of 0 could flip; no such example occurs in the seeds tested, and one would fail the test.)
constexpr double kChain = 785 + 129 + 10 + 10 + 64 + 2;
double gamma(double k) { return k * kU / (1 - k * kU); }

ShardGradientOptions mlp_options(std::size_t ranks, std::size_t shard_batch, std::uint64_t seed) {
  ShardGradientOptions o;
  o.model = "mlp";
  o.ranks = ranks;
  o.shard_batch = shard_batch;
  o.seed = seed;
  return o;
}

TEST(ShardGradients, MlpRowsAreTheShardsGradientsAndTheirMeanTheBatchs) {
  const std::size_t ranks = 8, shard_batch = 4;
  const std::uint64_t seed = 3;
  const ShardGradients g = shard_gradients(mlp_options(ranks, shard_batch, seed));
  nn::Sequential model = nn::make_mlp(1, 28, 28, kClasses, seed);
  const std::vector<nn::Parameter*> p = model.parameters();
  ASSERT_EQ(g.parameter_names, (std::vector<std::string>{"fc1.w", "fc1.b", "fc2.w", "fc2.b"}));
  ASSERT_EQ(g.ranks, ranks);
  ASSERT_EQ(g.n, static_cast<std::size_t>(kIn * kHidden + kHidden + kHidden * kClasses + kClasses));
  ASSERT_EQ(g.rows.size(), ranks * g.n);
  const Batch batch = step0_batch(seed, ranks, shard_batch);

  const double tol = gamma(kChain);
  std::vector<double> mean(g.n, 0.0);
  for (std::size_t r = 0; r < ranks; ++r) {
    const Fp64Gradient ref = mlp_fp64(p, batch, r * shard_batch, shard_batch);
    for (std::size_t i = 0; i < g.n; ++i) {
      const double v = g.rows[r * g.n + i];
      mean[i] += v / ranks;
      ASSERT_LE(std::abs(v - ref.g[i]), tol * ref.a[i]) << "rank " << r << " element " << i;
    }
  }
  // The mean over ranks (in double: exact enough) against the whole batch's FP64 gradient: each row's error
  // is within gamma A_r, and the mean of the A_r over equal shards is the whole batch's A.
  const Fp64Gradient whole = mlp_fp64(p, batch, 0, ranks * shard_batch);
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < g.n; ++i) {
    ASSERT_LE(std::abs(mean[i] - whole.g[i]), tol * whole.a[i]) << "element " << i;
    nonzero += whole.g[i] != 0;
  }
  EXPECT_GT(nonzero, g.n / 4);  // a gradient, not zeros

  // The library's one-pass gradient of the whole batch (one rank of N B examples): the same batch and
  // weights, so within 2 gamma A of the mean (both within gamma A of the FP64 gradient).
  const ShardGradients one = shard_gradients(mlp_options(1, ranks * shard_batch, seed));
  ASSERT_EQ(one.n, g.n);
  for (std::size_t i = 0; i < g.n; ++i)
    ASSERT_LE(std::abs(mean[i] - one.rows[i]), 2 * tol * whole.a[i]) << "element " << i;
}

TEST(ShardGradients, CnnRowsAreOnePassGradientsOfEachShardWithItsOwnBatchNorm) {
  const std::size_t ranks = 4, shard_batch = 3;
  const std::uint64_t seed = 5;
  ShardGradientOptions o;
  o.ranks = ranks;
  o.shard_batch = shard_batch;
  o.seed = seed;
  const ShardGradients g = shard_gradients(o);
  const Batch batch = step0_batch(seed, ranks, shard_batch);
  nn::Sequential model = nn::make_cnn(1, 28, 28, kClasses, seed);
  model.set_training(true);
  nn::RefBackend backend;
  const nn::Precision precision;
  ASSERT_EQ(g.rows.size(), ranks * g.n);
  for (std::size_t r = 0; r < ranks; ++r) {
    nn::Context ctx(backend, precision);
    model.cast_weights(precision);
    nn::Tensor x(static_cast<int>(shard_batch), 1, 28, 28);
    std::copy_n(batch.images.begin() + static_cast<std::ptrdiff_t>(r * shard_batch * kIn), shard_batch * kIn,
                x.values.begin());
    nn::Tensor logits = model.forward(ctx, x);
    nn::Tensor d(logits.n, logits.c);
    const std::span<const std::int32_t> labels(batch.labels.data() + r * shard_batch, shard_batch);
    backend.softmax_cross_entropy_backward({logits.n, logits.c}, logits.span(), labels, d.span(),
                                           nn::loss_policy(precision), nullptr);
    model.backward(ctx, d, false);
    std::vector<float> row;
    for (const nn::Parameter* p : model.parameters()) row.insert(row.end(), p->grad.begin(), p->grad.end());
    ASSERT_EQ(row.size(), g.n);
    // The same fp32 operations on the same operands: the same bits.
    for (std::size_t i = 0; i < g.n; ++i) ASSERT_EQ(row[i], g.rows[r * g.n + i]) << "rank " << r << " element " << i;
  }
}

TEST(ShardGradients, SameSeedSameBitsOtherSeedOtherRows) {
  ShardGradientOptions o;
  o.ranks = 3;
  o.seed = 11;
  o.step = 2;  // after two fp32 training steps
  const ShardGradients a = shard_gradients(o), b = shard_gradients(o);
  ASSERT_EQ(a.rows.size(), b.rows.size());
  EXPECT_EQ(0, std::memcmp(a.rows.data(), b.rows.data(), a.rows.size() * sizeof(float)));
  o.step = 0;
  const ShardGradients c = shard_gradients(o);
  EXPECT_NE(0, std::memcmp(a.rows.data(), c.rows.data(), a.rows.size() * sizeof(float)));  // the weights moved
  o.step = 2;
  o.seed = 12;
  const ShardGradients d = shard_gradients(o);
  EXPECT_NE(0, std::memcmp(a.rows.data(), d.rows.data(), a.rows.size() * sizeof(float)));
}

TEST(ShardGradients, TransformerRowsAreTheModelsParametersPerWindow) {
  ShardGradientOptions o;
  o.model = "transformer";
  o.data = "kjv";
  o.ranks = 2;
  o.shard_batch = 1;
  o.text_for_tests = std::string(3000, 'a');
  for (int i = 0; i < 3000; i += 7) (*o.text_for_tests)[i] = static_cast<char>('b' + i % 13);
  const ShardGradients g = shard_gradients(o);
  ASSERT_EQ(g.rows.size(), 2 * g.n);
  EXPECT_NE(0, std::memcmp(g.rows.data(), g.rows.data() + g.n, g.n * sizeof(float)));  // different windows
}

TEST(ShardGradients, BadOptionsAreRefused) {
  auto refused = [](auto change) {
    ShardGradientOptions o;
    change(o);
    EXPECT_THROW(shard_gradients(o), std::invalid_argument);
  };
  refused([](ShardGradientOptions& o) { o.model = "dcgan"; });
  refused([](ShardGradientOptions& o) { o.ranks = 0; });
  refused([](ShardGradientOptions& o) { o.shard_batch = 0; });
  refused([](ShardGradientOptions& o) { o.data = "kjv"; });
  refused([](ShardGradientOptions& o) { o.model = "transformer"; });  // (data synthetic)
  refused([](ShardGradientOptions& o) { o.ranks = (std::size_t{1} << 20) + 1; });
}

}  // namespace
}  // namespace mpverify::training
