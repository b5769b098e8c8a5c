// The transformer (nn::make_transformer): its layout and the matrix layers the
// block-scaled recipes see, determinism (same seed, same bits), causality
// (a later token changes no earlier output, bit for bit, on ref and emu),
// the logits against an FP64 oracle, the loss gradient against central
// differences of that oracle on several parameters, and a bf16 step on the
// emu backend whose every stored tensor is a bf16 value.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "nn/linear.h"
#include "nn/matrix_layers.h"
#include "nn/models.h"
#include "nn/policies.h"
#include "ops/fp64_math.h"
#include "support/gradient_check.h"
#include "support/transformer_oracle.h"
#include "training/recipe.h"

namespace {

using namespace mpverify;
using namespace mpverify::test_support;
using nn::Tensor;

constexpr int kVocab = 11, kT = 6, kD = 16, kH = 2, kLayers = 2, kB = 2;
constexpr Dims kDims{kB, kT, kD, kH};

nn::Sequential small_model(std::uint64_t seed) { return nn::make_transformer(kVocab, kT, kD, kH, kLayers, seed); }

std::vector<int> random_ids(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(0, kVocab - 1);
  std::vector<int> ids(kB * kT);
  for (int& id : ids) id = d(rng);
  return ids;
}

Tensor token_batch(const std::vector<int>& ids) {
  Tensor x(static_cast<int>(ids.size()), 1);
  for (std::size_t i = 0; i < ids.size(); ++i) x.values[i] = static_cast<float>(ids[i]);
  return x;
}

void cast_all(nn::Sequential& model, const nn::Precision& p) { model.cast_weights(p); }

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::size_t parameter_count(int vocab, int T, int d, int layers) {
  const auto V = static_cast<std::size_t>(vocab), D = static_cast<std::size_t>(d);
  const std::size_t block = 2 * 2 * D + 4 * (D * D + D) + (D * 4 * D + 4 * D) + (4 * D * D + D);
  return V * D + static_cast<std::size_t>(T) * D + static_cast<std::size_t>(layers) * block + 2 * D + D * V + V;
}

TEST(TransformerModel, LayoutAndMatrixLayers) {
  nn::Sequential model = small_model(7);
  std::vector<std::string> top;
  for (const auto& l : model.layers()) top.push_back(l->name());
  EXPECT_EQ(top, (std::vector<std::string>{"tok_emb", "pos_emb", "h0", "h1", "ln_f", "head"}));
  std::vector<std::string> want;
  for (const char* block : {"h0", "h1"})
    for (const char* l : {"attn.q", "attn.k", "attn.v", "attn.o", "fc1", "fc2"})
      want.push_back(std::string(block) + "." + l);
  want.push_back("head");
  EXPECT_EQ(nn::matrix_layer_names(model), want);
  // What the trainer's scan of the top level finds: the head alone, the last matrix layer either way.
  std::vector<std::string> top_matrix;
  for (const auto& l : model.layers())
    if (dynamic_cast<const nn::Linear*>(l.get())) top_matrix.push_back(l->name());
  EXPECT_EQ(top_matrix, std::vector<std::string>{"head"});

  std::size_t total = 0;
  std::set<std::string> names;
  for (nn::Parameter* p : model.parameters()) {
    total += p->size();
    EXPECT_TRUE(names.insert(p->name).second) << "two parameters named " << p->name;
  }
  EXPECT_EQ(total, parameter_count(kVocab, kT, kD, kLayers));
  nn::Sequential defaults = nn::make_transformer(65, 32, 1);  // d 64, 4 heads, 2 layers
  total = 0;
  for (nn::Parameter* p : defaults.parameters()) total += p->size();
  EXPECT_EQ(total, parameter_count(65, 32, 64, 2));
  EXPECT_EQ(nn::matrix_layer_names(defaults).size(), 13u);
  EXPECT_THROW(nn::make_transformer(kVocab, kT, 16, 3, 2, 1), std::invalid_argument);  // 3 does not divide 16
  EXPECT_THROW(nn::make_transformer(0, kT, 1), std::invalid_argument);
}

struct Step {
  Tensor logits;
  std::vector<std::vector<float>> grads;
};

// A forward and backward with the mean cross-entropy's gradient (loss scale 1).
Step step(nn::Sequential& model, nn::Context& ctx, const std::vector<int>& ids, const std::vector<int>& labels) {
  Step s;
  s.logits = model.forward(ctx, token_batch(ids));
  const ops::SoftmaxCrossEntropyShape shape{s.logits.n, kVocab};
  const std::vector<std::int32_t> l(labels.begin(), labels.end());
  Tensor d(s.logits.n, kVocab);
  ctx.backend().softmax_cross_entropy_backward(shape, s.logits.values, l, d.values, nn::loss_policy(ctx.precision()),
                                               ctx.counters());
  model.backward(ctx, d, false);
  for (nn::Parameter* p : model.parameters()) s.grads.push_back(p->grad);
  return s;
}

TEST(TransformerModel, SameSeedSameBitsAndAnotherSeedOtherBits) {
  nn::Sequential a = small_model(7), b = small_model(7), c = small_model(8);
  const auto pa = a.parameters(), pb = b.parameters(), pc = c.parameters();
  ASSERT_EQ(pa.size(), pc.size());
  for (std::size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(same_bits(pa[i]->master, pb[i]->master)) << pa[i]->name;
    const bool constant = pa[i]->kind == nn::ParameterKind::norm;  // gamma 1, beta 0 under any seed
    EXPECT_EQ(same_bits(pa[i]->master, pc[i]->master), constant) << pa[i]->name;
  }
  RefRun r1, r2;
  cast_all(a, r1.precision);
  cast_all(b, r2.precision);
  const auto ids = random_ids(3), labels = random_ids(4);
  const Step sa = step(a, r1.ctx, ids, labels), sb = step(b, r2.ctx, ids, labels);
  EXPECT_TRUE(same_bits(sa.logits.values, sb.logits.values));
  for (std::size_t i = 0; i < sa.grads.size(); ++i) EXPECT_TRUE(same_bits(sa.grads[i], sb.grads[i])) << pa[i]->name;
}

// Changing token t of sequence 0 leaves the logits of its positions 0..t-1 and
// of sequence 1 the same bit for bit (every op is row-wise or causal; masked
// probabilities are exact zeros), and changes position t.
void expect_causal(nn::Context& ctx, nn::Sequential& model, const std::string& what) {
  const auto ids = random_ids(5);
  const Tensor before = model.forward(ctx, token_batch(ids));
  for (int t : {3, kT - 1}) {
    auto changed = ids;
    changed[static_cast<std::size_t>(t)] = (ids[static_cast<std::size_t>(t)] + 1) % kVocab;
    const Tensor after = model.forward(ctx, token_batch(changed));
    const auto row = [&](const Tensor& x, int r) {
      return std::span<const float>(x.values).subspan(static_cast<std::size_t>(r * kVocab), kVocab);
    };
    for (int r = 0; r < t; ++r) {
      EXPECT_TRUE(same_bits(row(before, r), row(after, r))) << what << " t=" << t << " row " << r;
    }
    EXPECT_FALSE(same_bits(row(before, t), row(after, t))) << what << " t=" << t;
    for (int r = kT; r < kB * kT; ++r) {
      EXPECT_TRUE(same_bits(row(before, r), row(after, r))) << what << " other sequence";
    }
  }
}

TEST(TransformerModel, LaterTokensChangeNoEarlierOutput) {
  {
    RefRun run;
    nn::Sequential model = small_model(11);
    cast_all(model, run.precision);
    expect_causal(run.ctx, model, "ref");
  }
  {
    EmuRun run;
    nn::Sequential model = small_model(11);
    cast_all(model, run.precision);
    expect_causal(run.ctx, model, "emu bf16");
  }
}

// Every parameter on the grid 2^-10 (so that perturbed points are floats):
// the projections and embeddings N(0, 0.5^2), gamma near 1, beta near 0.
void set_grid_parameters(nn::Sequential& model, std::uint64_t seed) {
  for (nn::Parameter* p : model.parameters()) {
    std::vector<float> v = grid_normal(p->size(), seed++, p->kind == nn::ParameterKind::norm ? 0.25 : 0.5, 2);
    if (p->name.ends_with("gamma"))
      for (float& g : v) g += 1.0f;
    set_parameter(*p, v);
  }
}

double loss_fp64(const nn::Sequential& model, const std::vector<int>& ids, const std::vector<std::int32_t>& labels) {
  return ops::softmax_cross_entropy_fp64({kB * kT, kVocab}, transformer_fp64(model, ids, kDims), labels);
}

// The logits against the oracle: the float forward's first-order error is at
// most a few hundred u32 (two blocks of 100 each, as in
// tests/transformer_layers_test, ln_f and the head) of magnitudes within 10
// max|logit| here: 1e-4 max|logit| holds it with room, while an error of any
// layer moves the logits by far more. The gradient: the mean loss's gradient
// in fp32 (one rounding of the FP64 value) times that path back, first order
// within 500 u32 sum |g_j v_j|; Richardson's check (support/gradient_check.h)
// of the FP64 loss, whose own error is below 10^4 u64 |L|.
TEST(TransformerModel, LossGradientMatchesFiniteDifferencesOfTheFp64Model) {
  RefRun run;
  nn::Sequential model = small_model(13);
  set_grid_parameters(model, 100);
  const auto ids = random_ids(14), labels = random_ids(15);
  const std::vector<std::int32_t> l32(labels.begin(), labels.end());
  const Step s = step(model, run.ctx, ids, labels);
  const std::vector<double> oracle = transformer_fp64(model, ids, kDims);
  double max_logit = 0, max_diff = 0;
  for (std::size_t i = 0; i < oracle.size(); ++i) {
    max_logit = std::max(max_logit, std::fabs(oracle[i]));
    max_diff = std::max(max_diff, std::fabs(s.logits.values[i] - oracle[i]));
  }
  EXPECT_LE(max_diff, 1e-4 * max_logit);
  const double loss = loss_fp64(model, ids, l32), h = 0x1p-7;
  std::uint64_t seed = 200;
  int checked = 0;
  const auto params = model.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    nn::Parameter& p = *params[i];
    if (!(p.name == "tok_emb.w" || p.name == "pos_emb.w" || p.name == "h0.attn.q.w" || p.name == "h0.ln1.gamma" ||
          p.name == "h1.attn.v.b" || p.name == "h1.fc2.w" || p.name == "ln_f.beta" || p.name == "head.w"))
      continue;
    const std::vector<float> v = grid_normal(p.size(), seed++, 1, 2), saved = p.value;
    const double scale = abs_dot(s.grads[i], v);
    const Richardson r = richardson(
        [&](double t) {
          p.value = shifted(saved, v, t);
          const double value = loss_fp64(model, ids, l32);
          p.value = saved;
          return value;
        },
        h, 1e4 * kU64 * std::fabs(loss), 500 * kU32 * scale, "d" + p.name);
    expect_agree(r, dot(s.grads[i], v), scale, "d" + p.name);
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

// One bf16 step on the emulator: every stored tensor a bf16 value (norm
// gradients fp32), nothing non-finite, the emulated ops counted.
TEST(TransformerModel, Bf16StepOnTheEmulatorStoresBf16Values) {
  EmuRun run;
  nn::Sequential model = small_model(17);
  cast_all(model, run.precision);
  const Step s = step(model, run.ctx, random_ids(18), random_ids(19));
  std::set<std::string> stored;
  for (const auto& e : run.log.entries) stored.insert(e.layer + "." + e.tensor);
  expect_stored_bf16(run, stored, "model");
  EXPECT_TRUE(stored.count("head.y") && stored.count("tok_emb.dw") && stored.count("h1.attn.probs") &&
              stored.count("ln_f.dgamma"));
  EXPECT_FALSE(run.ctx.first_nonfinite().has_value());
  for (const char* site : {"softmax.x", "layer_norm.x", "activation.x", "gemm.accumulate"})
    EXPECT_NE(run.counters.find(site), nullptr) << site;
}

// Under a block-scaled recipe (mxfp8) with the last matrix layer kept out, as
// the trainer keeps BlockScaling::high_precision_last = 1 of
// nn::matrix_layer_names: the nested projections run block-scaled GEMMs
// (their tensors carry block-gemm counters), the head and the attention's two
// batched matmuls run plain GEMMs (gemm.accumulate, no block-gemm), and the
// step stores only finite values.
TEST(TransformerModel, BlockScaledRecipeReachesTheProjectionsOnly) {
  nn::EmuBackend backend;
  training::Recipe recipe = training::parse_recipe("mxfp8");
  ASSERT_TRUE(recipe.precision.block_scaling.has_value());
  nn::Sequential model = small_model(21);
  recipe.precision.block_scaling->high_precision_layers = {nn::matrix_layer_names(model).back()};
  nn::Context ctx(backend, recipe.precision);
  emu::CounterSet counters;
  nn::TensorCounterSets per_tensor;
  ctx.set_counters(&counters);
  ctx.set_tensor_counters(&per_tensor);
  model.cast_weights(recipe.precision);
  step(model, ctx, random_ids(22), random_ids(23));
  EXPECT_FALSE(ctx.first_nonfinite().has_value());
  auto has_site = [&](const std::string& tensor, const std::string& prefix) {
    const auto it = per_tensor.find(tensor);
    if (it == per_tensor.end()) return false;
    for (const auto& [site, c] : it->second.sites())
      if (site.starts_with(prefix)) return true;
    return false;
  };
  for (const char* t : {"h0.attn.q.y", "h0.attn.o.dx", "h1.fc1.y", "h1.fc2.dw"}) {
    EXPECT_TRUE(has_site(t, "block-gemm")) << t;
  }
  for (const char* t : {"head.y", "head.dx", "h0.attn.scores", "h1.attn.context", "h0.attn.dq"}) {
    EXPECT_TRUE(has_site(t, "gemm.accumulate")) << t;
    EXPECT_FALSE(has_site(t, "block-gemm")) << t;
  }
}

}  // namespace
