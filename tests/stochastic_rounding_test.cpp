// Stochastic rounding in training (grad_rounding=stochastic, update_rounding=stochastic; emu/rounding_key.h):
// the same seed replays a run bit for bit, the gradient cast and the weight update are unbiased as the
// training path draws them, and no two tensors, steps or stores of a step share their random bits.
// The unbiasedness of one stochastic rounding itself is properties/stochastic_properties.cpp's; here the
// question is whether the training path keys its draws so that those properties hold across its roundings.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "emu/optimizer_emu.h"
#include "emu/rounding_key.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/philox.h"
#include "nn/context.h"
#include "nn/emu_backend.h"
#include "nn/gpu_backend.h"
#include "training/trainer.h"

namespace {

using mpverify::formats::Rounding;
using mpverify::nn::Role;
using mpverify::training::TrainConfig;
using mpverify::training::Trainer;

const auto fp16 = mpverify::formats::parse_format("fp16");

TrainConfig small_mlp(std::string recipe, std::uint64_t seed) {
  TrainConfig c;
  c.model = "mlp";
  c.train_size = 256;
  c.test_size = 64;
  c.batch_size = 32;
  c.recipe = std::move(recipe);
  c.scaler = "none";
  c.backend = mpverify::nn::BackendKind::emu;
  c.seed = seed;
  c.histograms = false;
  return c;
}

// Every parameter's master weights, as bits, after `steps` steps (and the step logs).
struct RunResult {
  std::vector<std::uint32_t> bits;
  std::string logs;
};

RunResult train(const TrainConfig& c, int steps) {
  Trainer t(c);
  RunResult r;
  for (int i = 0; i < steps; ++i) {
    const nlohmann::json log = t.step();
    EXPECT_FALSE(log["skipped"].get<bool>()) << "step " << i << " was skipped: the update was not exercised";
    r.logs += log.dump();
  }
  for (const mpverify::nn::Parameter* p : t.parameters())
    for (const float w : p->master) r.bits.push_back(std::bit_cast<std::uint32_t>(w));
  return r;
}

constexpr const char* kBoth = "fp16-pure:grad_rounding=stochastic,update_rounding=stochastic";

// --- replay ----------------------------------------------------------------------------

TEST(TrainerStochasticRounding, SameSeedReplaysBitwiseAndEachKeyChangesTheRun) {
  const RunResult a = train(small_mlp(kBoth, 7), 3), b = train(small_mlp(kBoth, 7), 3);
  EXPECT_EQ(a.bits, b.bits);
  EXPECT_EQ(a.logs, b.logs);
  EXPECT_NE(train(small_mlp(kBoth, 8), 3).bits, a.bits);
  // Each key on its own changes the weights against nearest-even from the same seed (data, init, batches).
  const RunResult rne = train(small_mlp("fp16-pure", 7), 3);
  EXPECT_NE(train(small_mlp("fp16-pure:grad_rounding=stochastic", 7), 3).bits, rne.bits);
  EXPECT_NE(train(small_mlp("fp16-pure:update_rounding=stochastic", 7), 3).bits, rne.bits);
  EXPECT_NE(a.bits, rne.bits);
}

TEST(TrainerStochasticRounding, RneSpelledOutIsTheDefaultBitForBit) {
  const RunResult plain = train(small_mlp("o2", 7), 3);
  const RunResult spelled = train(small_mlp("o2:grad_rounding=rne,update_rounding=rne", 7), 3);
  EXPECT_EQ(plain.bits, spelled.bits);
  EXPECT_EQ(plain.logs, spelled.logs);
}

TEST(TrainerStochasticRounding, OnlyTheEmulatorRoundsStochastically) {
  auto refused = [](TrainConfig c, const std::string& fragment) {
    try {
      Trainer t(c);
      ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  TrainConfig ref = small_mlp("o2:grad_rounding=stochastic", 7);
  ref.backend = mpverify::nn::BackendKind::ref;
  refused(ref, "only the emulator does (the ref backend is the FP32 reference); use --backend emu");
  TrainConfig gpu = small_mlp("fp16-pure:update_rounding=stochastic", 7);
  gpu.backend = mpverify::nn::BackendKind::gpu;
  gpu.backend_factory = [] { return std::make_unique<mpverify::nn::GpuBackend>(); };  // no device needed
  refused(gpu, "(the CUDA kernels round to nearest even); use --backend emu");
  // The gpu backend's optimizer refuses the policy itself, before any device call.
  mpverify::nn::GpuBackend backend;
  mpverify::emu::OptimizerPolicy policy;
  policy.weights = fp16;
  policy.update_rounding = Rounding::stochastic;
  std::vector<float> w(4, 1.0f), v, g(4, 0.5f);
  try {
    backend.sgd_step({0.1, 0.0}, 1, w, v, g, policy, nullptr, {});
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("round the update to nearest even"), std::string::npos) << e.what();
  }
}

// --- the key mapping -------------------------------------------------------------------

// FNV-1a (32 bits) written out again: the documented mapping, not the library's function.
std::uint64_t documented_stream(const std::string& tensor, std::uint64_t step) {
  std::uint32_t h = 2166136261u;
  for (const char c : tensor) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return std::uint64_t{0x5D} << 56 | std::uint64_t{h} << 24 | step;
}

mpverify::nn::Precision fp16_gradients() {
  mpverify::nn::Precision p;
  p.activation_grads = p.weight_grads = fp16;
  p.grad_rounding = Rounding::stochastic;
  return p;
}

// A stored gradient equals, element by element, one stochastic rounding with the draw of the documented
// key at the element's position; a second store of the name in the same step draws as "NAME#1".
TEST(TrainerStochasticRounding, AStoredGradientDrawsTheDocumentedKeyAtEachPosition) {
  mpverify::nn::EmuBackend backend;
  const mpverify::nn::Precision precision = fp16_gradients();
  mpverify::nn::Context ctx(backend, precision);
  ctx.set_rounding_seed(11);
  ctx.set_step(5);
  std::vector<float> exact(100003);
  for (std::size_t i = 0; i < exact.size(); ++i) exact[i] = std::ldexp(std::sin(static_cast<float>(i)), -3);
  for (const char* name : {"fc1.dx", "fc1.dx#1"}) {
    std::vector<float> stored = exact;
    ctx.store("fc1", "dx", Role::activation_grad, stored);
    const std::uint64_t stream = documented_stream(name, 5);
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < exact.size(); ++i) {
      mpverify::formats::RoundingContext rc{Rounding::stochastic};
      rc.random = mpverify::formats::stochastic_draw(11, stream, i);
      mpverify::formats::Flags flags;
      const float expected = mpverify::formats::to_float(fp16, mpverify::formats::from_float(fp16, exact[i], rc, flags), flags);
      mismatches += std::bit_cast<std::uint32_t>(expected) != std::bit_cast<std::uint32_t>(stored[i]);
    }
    EXPECT_EQ(mismatches, 0u) << name;
  }
}

// Collects the names the gradient stores of a step are keyed by, as documented ("LAYER.TENSOR", then
// "#n" for the n-th repeat within the step).
class GradientNames final : public mpverify::nn::StoreObserver {
 public:
  void on_store(std::string_view layer, std::string_view tensor, Role role, mpverify::nn::Pass,
                std::span<const float>, std::span<const float>, const mpverify::formats::Format&) override {
    if (role != Role::activation_grad && role != Role::weight_grad) return;
    std::string name = std::string(layer) + "." + std::string(tensor);
    if (const int seen = seen_[name]++; seen > 0) name += "#" + std::to_string(seen);
    names.push_back(name);
  }
  std::vector<std::string> names;

 private:
  std::map<std::string, int> seen_;
};

// Every name a step of mlp, cnn, dcgan and transformer keys a rounding by (its gradients, and "PARAM.update" and
// "PARAM.decay" per parameter), over 64 steps, gives a different stream: no two tensors, no two steps,
// and no two stores of one tensor in a step (the DCGAN's discriminator, twice) share a random bit.
TEST(TrainerStochasticRounding, NoTwoTensorsStepsOrStoresShareAStream) {
  for (const char* model : {"mlp", "cnn", "dcgan", "transformer"}) {
    GradientNames names;
    TrainConfig c = small_mlp("fp32", 3);
    c.model = model;
    if (c.model == "transformer") {
      c.data = "kjv";
      c.text_for_tests = std::string(2000, 'a');
      c.context_length = 8;
      c.test_size = 2;
    }
    c.backend = mpverify::nn::BackendKind::ref;
    c.train_size = 64;
    c.batch_size = 8;
    c.extra_observer = &names;
    Trainer t(c);
    t.step();
    for (const mpverify::nn::Parameter* p : t.parameters()) {
      names.names.push_back(p->name + ".update");
      names.names.push_back(p->name + ".decay");
      // A block-scaled recipe's stochastic quantization of dy (nn/block_scaled_matmul.h), per matrix layer.
      if (p->name.ends_with(".w")) {
        const std::string layer = p->name.substr(0, p->name.size() - 2);
        names.names.push_back(layer + ".dgrad.dy");
        names.names.push_back(layer + ".wgrad.dy");
      }
    }
    if (std::string(model) == "dcgan") {
      EXPECT_NE(std::find(names.names.begin(), names.names.end(), "d.fc.dw#1"), names.names.end());
    }
    std::set<std::uint64_t> streams;
    for (std::uint64_t step = 0; step < 64; ++step)
      for (const std::string& name : names.names) {
        const mpverify::emu::RoundingKey key = mpverify::emu::rounding_key(3, name, step);
        EXPECT_EQ(key.seed, 3u);
        EXPECT_EQ(key.stream, documented_stream(name, step)) << name;
        streams.insert(key.stream);
      }
    EXPECT_EQ(streams.size(), 64 * names.names.size()) << model << ": two names share a stream";
  }
  EXPECT_THROW(mpverify::emu::rounding_key(0, "fc1.dw", std::uint64_t{1} << 24), std::out_of_range);
}

// --- unbiasedness and independence as the training path draws --------------------------

// x = 1 + f 2^-10 lies between the fp16 neighbours 1 and 1 + 2^-10 with f = 2458/8192 (13 bits, so the
// 32-bit draw resolves it exactly): each stored element is 1 + 2^-10 with probability f, else 1.
constexpr double kF = 2458.0 / 8192.0;
constexpr std::size_t kN = 1 << 16;
const float kX = static_cast<float>(1.0 + kF * 0x1p-10);

// Whether each element of a store of kN copies of kX rounded up.
std::vector<bool> ups(mpverify::nn::Context& ctx, const char* layer, const char* tensor) {
  std::vector<float> v(kN, kX);
  ctx.store(layer, tensor, Role::weight_grad, v);
  std::vector<bool> up(kN);
  for (std::size_t i = 0; i < kN; ++i) {
    EXPECT_TRUE(v[i] == 1.0f || v[i] == 1.0f + 0x1p-10f) << v[i];
    up[i] = v[i] != 1.0f;
  }
  return up;
}

// k successes of n trials with probability q: |k/n - q| within 6 standard deviations, sqrt(q(1-q)/n).
// (The draws are fixed by the seed, so this passes or fails deterministically; 6 sigma would be exceeded
// by chance with probability about 2e-9 per check.)
void expect_rate(std::size_t k, double q, const std::string& what) {
  const double bound = 6 * std::sqrt(q * (1 - q) / kN);
  EXPECT_NEAR(static_cast<double>(k) / kN, q, bound) << what;
}

TEST(TrainerStochasticRounding, GradientCastIsUnbiasedAndDrawsAreIndependentAcrossTensorsAndSteps) {
  mpverify::nn::EmuBackend backend;
  const mpverify::nn::Precision precision = fp16_gradients();
  mpverify::nn::Context ctx(backend, precision), other_seed(backend, precision);
  ctx.set_rounding_seed(5);
  other_seed.set_rounding_seed(6);
  ctx.set_step(0);
  const std::vector<bool> a = ups(ctx, "fc1", "dw");
  const std::vector<bool> repeat = ups(ctx, "fc1", "dw");  // the same tensor again in the step ("fc1.dw#1")
  const std::vector<bool> b = ups(ctx, "fc2", "dw");
  ctx.reset_step();
  ctx.set_step(1);
  const std::vector<bool> next = ups(ctx, "fc1", "dw");
  const std::vector<bool> seeded = ups(other_seed, "fc1", "dw");
  // Unbiased: the mean stored value is x, within 6 sigma (each element's variance is 2^-20 f (1 - f)).
  std::size_t k = 0;
  for (bool u : a) k += u;
  const double mean = 1.0 + 0x1p-10 * static_cast<double>(k) / kN;
  EXPECT_NEAR(mean, static_cast<double>(kX), 6 * 0x1p-10 * std::sqrt(kF * (1 - kF) / kN));
  // Independent: both of a pair round up with probability f^2 (reused bits would give f).
  for (const auto& [other, what] : {std::pair{&repeat, "second store in a step"}, std::pair{&b, "another tensor"},
                                    std::pair{&next, "the next step"}, std::pair{&seeded, "another seed"}}) {
    std::size_t both = 0, up = 0;
    for (std::size_t i = 0; i < kN; ++i) {
      both += a[i] && (*other)[i];
      up += (*other)[i];
    }
    expect_rate(up, kF, what);
    expect_rate(both, kF * kF, what);
  }
}

// The update w + u with u below half of fp16's spacing at w = 1 (2^-11 below 1, 2^-10 above): nearest-even
// loses it every time; the stochastic write moves w by one spacing with probability |u| / spacing, so the
// mean weight follows w + u. Likewise adamw's decay w * (1 - 2^-13), which nearest-even leaves at w.
TEST(TrainerStochasticRounding, StochasticUpdateAndDecayAreUnbiasedWhereNearestEvenLosesThem) {
  mpverify::emu::OptimizerPolicy policy;
  policy.weights = fp16;
  policy.update_rounding = Rounding::stochastic;
  policy.update_key = mpverify::emu::rounding_key(9, "fc1.w.update", 0);
  policy.decay_key = mpverify::emu::rounding_key(9, "fc1.w.decay", 0);
  // SGD without momentum: u = -lr g = 2^-13 exactly.
  std::vector<float> w(kN, 1.0f), v, g(kN, -0x1p-13f);
  mpverify::emu::sgd_step_emu({1.0, 0.0}, 1, w, v, g, policy, nullptr);
  std::size_t up = 0;
  for (const float wi : w) up += wi == 1.0f + 0x1p-10f;
  expect_rate(up, 0x1p-13 / 0x1p-10, "sgd update");
  std::vector<float> w_rne(kN, 1.0f);
  mpverify::emu::OptimizerPolicy rne = policy;
  rne.update_rounding = Rounding::nearest_even;
  mpverify::emu::sgd_step_emu({1.0, 0.0}, 1, w_rne, v, g, rne, nullptr);
  EXPECT_EQ(w_rne, std::vector<float>(kN, 1.0f));
  // adamw with a zero gradient: the update is 0, the decay factor fl32(1 - lr wd) = 1 - 2^-13.
  mpverify::ops::AdamParams adamw;
  adamw.lr = 0x1p-13;
  adamw.weight_decay = 1.0;
  adamw.adamw = true;
  std::vector<float> wa(kN, 1.0f), m(kN, 0.0f), va(kN, 0.0f), zero(kN, 0.0f);
  mpverify::emu::adam_step_emu(adamw, 1, wa, m, va, zero, policy, nullptr);
  std::size_t down = 0;
  for (const float wi : wa) down += wi == 1.0f - 0x1p-11f;
  expect_rate(down, 0x1p-13 / 0x1p-11, "adamw decay");
}

}  // namespace
