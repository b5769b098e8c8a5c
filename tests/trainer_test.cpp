// The trainer: an o2 run on the emulator against
// the FP32 reference, the recorders against a brute-force recount, a crafted
// underflow that a loss scale recovers, and crafted non-finite faults.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/synthetic_digits.h"
#include "nn/emu_backend.h"
#include "nn/linear.h"
#include "record/histogram_json.h"
#include "record/tensor_stats.h"
#include "training/step_recorder.h"
#include "training/trainer.h"
#include "training/unscale.h"

namespace {

using mpverify::nn::Pass;
using mpverify::nn::Role;
using mpverify::training::Trainer;
using mpverify::training::TrainConfig;

TrainConfig small_mlp(std::string recipe, std::string scaler, mpverify::nn::BackendKind backend) {
  TrainConfig c;
  c.model = "mlp";
  c.train_size = 2048;
  c.batch_size = 32;
  c.recipe = std::move(recipe);
  c.scaler = std::move(scaler);
  c.backend = backend;
  c.seed = 7;
  c.histograms = false;
  return c;
}

// The fp16 value of x (round to nearest even), by the compiler's own
// conversion: an oracle independent of the emulator.
float fp16(double x) { return static_cast<float>(static_cast<_Float16>(x)); }
bool fp16_subnormal(float v) { return v != 0 && std::fabs(v) < 0x1p-14f; }

// --- determinism ---------------------------------------------------------------------

TEST(Trainer, SameSeedGivesBitwiseTheSameStepLog) {
  for (auto backend : {mpverify::nn::BackendKind::ref, mpverify::nn::BackendKind::emu}) {
    TrainConfig c = small_mlp(backend == mpverify::nn::BackendKind::ref ? "fp32" : "o2", "torch", backend);
    Trainer a(c), b(c);
    for (int i = 0; i < 5; ++i) ASSERT_EQ(a.step().dump(), b.step().dump()) << "step " << i;
    c.seed = 8;
    Trainer other(c), again(small_mlp(c.recipe, "torch", backend));
    EXPECT_NE(other.step().dump(), again.step().dump());
  }
}

// --- o2 on the emulator against the FP32 reference -------------------------------------

// At every step the FP32 reference is evaluated at the o2 run's own master
// weights on the same batch (--against ref), so the loss difference is the
// forward error of one o2 evaluation, bounded by first-order error analysis.
// The MLP z = W2 relu(W1 x + b1) + b2 under o2 rounds, on every path from an
// input to a logit: x, W1, b1 (to fp16), h (stored fp16), W2, b2, z (stored
// fp16): at most m = 7 roundings of relative size u = 2^-11, plus the fp32
// accumulations (gamma_k with u32 = 2^-24, k <= 784: < 5e-5, negligible next
// to u but counted by rounding m up to 8). relu is 1-Lipschitz and exact on
// fp16 values. So |dz| <= gamma_8 (|W2| (|W1| |x| + |b1|) + |b2|)
// componentwise, gamma_8 = 8u / (1 - 8u). The mean cross-entropy has
// gradient (p - y)/N per row with ||p - y||_1 <= 2, and Hessian diag(p) - pp^T
// whose quadratic form is at most max_j dz_j^2, so
// |dL| <= mean over rows of (2 max_j |dz_j| + max_j dz_j^2).
// The test recomputes that bound from the run's weights and the batch.
TEST(Trainer, O2LossStaysWithinTheForwardErrorBoundOfTheFp32Reference) {
  TrainConfig c = small_mlp("o2", "torch", mpverify::nn::BackendKind::emu);
  c.against_reference = true;
  c.recorders = false;
  Trainer t(c);
  // The same batches, drawn again (a pure function of the seed).
  mpverify::data::SyntheticOptions so;
  so.seed = c.seed;
  so.train_size = c.train_size;
  so.test_size = 0;
  const auto split = mpverify::data::synthetic_digits(so);
  mpverify::data::BatchIterator batches(split.train, {c.batch_size, c.seed});
  const double u = 0x1p-11, gamma8 = 8 * u / (1 - 8 * u);
  double worst_used = 0;
  for (int step = 0; step < 300; ++step) {
    const auto params = t.parameters();  // fc1.w fc1.b fc2.w fc2.b, master weights before the step
    ASSERT_EQ(params.size(), 4u);
    const auto& w1 = params[0]->master;
    const auto& b1 = params[1]->master;
    const auto& w2 = params[2]->master;
    const auto& b2 = params[3]->master;
    const auto batch = batches.next();
    const std::size_t in = w1.size() / b1.size(), hidden = b1.size(), classes = b2.size();
    double bound = 0;
    for (std::size_t r = 0; r < batch.size(); ++r) {
      std::vector<double> h(hidden);
      for (std::size_t j = 0; j < hidden; ++j) {
        double s = std::fabs(b1[j]);
        for (std::size_t i = 0; i < in; ++i) s += std::fabs(w1[j * in + i]) * std::fabs(batch.images[r * in + i]);
        h[j] = s;
      }
      double dz_max = 0;
      for (std::size_t k = 0; k < classes; ++k) {
        double s = std::fabs(b2[k]);
        for (std::size_t j = 0; j < hidden; ++j) s += std::fabs(w2[k * hidden + j]) * h[j];
        dz_max = std::max(dz_max, gamma8 * s);
      }
      bound += (2 * dz_max + dz_max * dz_max) / static_cast<double>(batch.size());
    }
    const auto log = t.step();
    if (log["skipped"].get<bool>()) continue;  // the scaler's overflow probes at 2^16 (no loss to compare)
    const double diff = std::fabs(log["reference"]["loss_difference"].get<double>());
    EXPECT_LE(diff, bound) << "step " << step;
    worst_used = std::max(worst_used, diff / bound);
  }
  // The bound is not vacuous: o2 really differs from fp32 somewhere.
  EXPECT_GT(worst_used, 0.0);
}

// Two independent runs from the same weights and batches (fp32 on ref, o2 +
// torch scaler on emu) drift apart, so their late losses are compared as
// noisy samples: over the last 100 steps each run's loss fluctuates with the
// batch; the difference of the two means must lie within 4 standard errors
// (sqrt(var_a/n + var_b/n)), i.e. o2 trains as well as fp32 to within the
// batch noise. Both runs must also have learned (mean late loss below half the
// first loss, ln 10 = 2.30 for a uniform guess).
TEST(Trainer, O2TrainsLikeFp32WithinBatchNoise) {
  Trainer fp32(small_mlp("fp32", "none", mpverify::nn::BackendKind::ref));
  Trainer o2(small_mlp("o2", "torch", mpverify::nn::BackendKind::emu));
  std::vector<double> a, b;
  double first = 0;
  for (int step = 0; step < 300; ++step) {
    const auto la = fp32.step(), lb = o2.step();
    if (step == 0) first = la["loss"].get<double>();
    if (step >= 200) {
      a.push_back(la["loss"].get<double>());
      if (!lb["skipped"].get<bool>()) b.push_back(lb["loss"].get<double>());
    }
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
  };
  auto var = [&](const std::vector<double>& v) {
    const double m = mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return s / static_cast<double>(v.size() - 1);
  };
  ASSERT_GT(b.size(), 90u);
  const double se = std::sqrt(var(a) / static_cast<double>(a.size()) + var(b) / static_cast<double>(b.size()));
  EXPECT_LE(std::fabs(mean(a) - mean(b)), 4 * se) << "fp32 " << mean(a) << " o2 " << mean(b);
  EXPECT_LT(mean(a), first / 2);
  EXPECT_LT(mean(b), first / 2);
}

// --- the recorders against a brute-force recount ---------------------------------------

struct Saved {
  std::string layer, tensor;
  Role role;
  std::vector<float> exact, stored;
  std::string format;
};

class SavingObserver final : public mpverify::nn::StoreObserver {
 public:
  std::vector<Saved> saved;
  void on_store(std::string_view layer, std::string_view tensor, Role role, Pass, std::span<const float> exact,
                std::span<const float> stored, const mpverify::formats::Format& format) override {
    saved.push_back({std::string(layer), std::string(tensor), role, {exact.begin(), exact.end()},
                     {stored.begin(), stored.end()}, format.name});
  }
};

TEST(Trainer, RecordersEqualABruteForceRecountOnTheSavedTensors) {
  TrainConfig c = small_mlp("o2", "torch", mpverify::nn::BackendKind::emu);
  // A small static scale, so that some gradients really underflow in fp16.
  c.scaler = "static";
  c.scaler_options = {{"scale", "1"}};
  SavingObserver saver;
  c.extra_observer = &saver;
  Trainer t(c);
  for (int step = 0; step < 3; ++step) {
    saver.saved.clear();
    const auto log = t.step();
    std::vector<nlohmann::json> lines;
    for (const std::string& text : t.take_tensor_lines()) lines.push_back(nlohmann::json::parse(text));
    std::uint64_t nonzero = 0, to_zero = 0, subnormal = 0;
    std::map<std::string, const Saved*> by_name;
    for (const Saved& s : saver.saved) {
      by_name[s.layer + "/" + s.tensor] = &s;
      if (s.role != Role::activation_grad && s.role != Role::weight_grad) continue;
      ASSERT_EQ(s.format, "fp16");
      for (float x : s.exact) {
        if (x == 0 || !std::isfinite(x)) continue;
        ++nonzero;
        to_zero += fp16(x) == 0;
        subnormal += fp16_subnormal(fp16(x));
      }
    }
    ASSERT_GT(nonzero, 0u);
    EXPECT_GT(to_zero, 0u) << "the crafted scale 1 should make some gradients underflow";
    EXPECT_DOUBLE_EQ(log["underflow_rate"].get<double>(), static_cast<double>(to_zero) / static_cast<double>(nonzero));
    EXPECT_DOUBLE_EQ(log["subnormal_rate"].get<double>(), static_cast<double>(subnormal) / static_cast<double>(nonzero));
    // Per tensor: each line's rates from its own saved values.
    ASSERT_FALSE(lines.empty());
    for (const auto& line : lines) {
      const std::string key = line["layer"].get<std::string>() + "/" + line["tensor"].get<std::string>();
      if (line["role"] == "update" || line["role"] == "weight") continue;  // fp32 roles, measured against fp16
      ASSERT_TRUE(by_name.count(key)) << key;
      const Saved& s = *by_name[key];
      std::uint64_t n = 0, z = 0;
      for (float x : s.exact)
        if (x != 0 && std::isfinite(x)) {
          ++n;
          z += fp16(x) == 0;
        }
      EXPECT_EQ(line["nonzero_finite"].get<std::uint64_t>(), n) << key;
      EXPECT_DOUBLE_EQ(line["underflow_to_zero_rate"].get<double>(), n ? static_cast<double>(z) / static_cast<double>(n) : 0.0) << key;
    }
    // Lost updates: the fp32 master loses u when w + u == w in float
    // arithmetic (correctly rounded); without a master copy, when the fp16
    // sum rounds back to the fp16 weight (double rounding through double is
    // innocuous for fp16: 53 >= 2 * 11 + 2).
    std::uint64_t updates = 0, lost = 0, lost16 = 0;
    for (const Saved& s : saver.saved) {
      if (s.role != Role::update) continue;
      const Saved& w = *by_name.at(s.layer + "/value");
      for (std::size_t i = 0; i < s.exact.size(); ++i) {
        const float wi = w.exact[i], ui = s.exact[i];
        if (ui == 0 || !std::isfinite(ui) || !std::isfinite(wi)) continue;
        ++updates;
        lost += wi + ui == wi;
        const float w16 = fp16(wi);
        lost16 += fp16(static_cast<double>(w16) + ui) == w16;
      }
    }
    ASSERT_GT(updates, 0u);
    EXPECT_DOUBLE_EQ(log["lost_update_rate"].get<double>(), static_cast<double>(lost) / static_cast<double>(updates));
    EXPECT_DOUBLE_EQ(log["lost_update_rate_without_master"].get<double>(),
                     static_cast<double>(lost16) / static_cast<double>(updates));
    EXPECT_GT(lost16, lost) << "fp16 weights lose more updates than fp32 masters";
  }
}

// --- a crafted underflow that a static scale recovers ----------------------------------

// The loss gradient of a Linear layer (1 input, 4 outputs) is crafted with
// values 2^-30, 3 * 2^-31, -2^-30 and 2^-26, all below half of fp16's
// smallest subnormal 2^-24, so the fp16 store of the loss gradient flushes
// every one of them to zero: the recorder reports an underflow rate of 1 and
// the weight gradient dW = dy^T x (x = 1) is zero. Multiplied by a static
// scale of 2^16 first (as the trainer multiplies the loss gradient), they
// become 2^-14, 1.5 * 2^-14, -2^-14 and 2^-10: fp16 normals, stored exactly;
// the fp32-accumulated GEMM with x = 1 is exact and the unscale by 2^-16 is
// exact, so the fp32 weight gradient is EXACTLY the crafted values again.
// The matrix ops' counters per training tensor: every tensor a matrix op produces has its own entry, and
// per op site the entries add up to the run's total of that site (each op counted once, under its tensor).
// Under the Hopper model with FP8 operands (F = 13) some terms must lose bits; under fp32 accumulation none.
TEST(Trainer, MatrixOpCountersAreKeptPerTensorAndAddUpToTheTotals) {
  TrainConfig c = small_mlp("fp8:accumulation=hopper", "none", mpverify::nn::BackendKind::emu);
  c.model = "cnn";
  c.train_size = 256;
  c.test_size = 64;
  Trainer t(c);
  for (int i = 0; i < 2; ++i) t.step();
  const nlohmann::json s = t.summary();
  const nlohmann::json& tensors = s.at("tensor_counters");
  for (const char* name : {"conv1.y", "conv1.dw", "conv2.y", "conv2.dx", "conv2.dw", "fc.y", "fc.dx", "fc.dw"})
    EXPECT_TRUE(tensors.contains(name)) << name;
  EXPECT_FALSE(tensors.contains("conv1.dx")) << "the first layer computes no input gradient";
  std::uint64_t truncated = 0;
  for (const auto& [site, total] : s.at("counters").items()) {
    std::uint64_t elements = 0, swamped = 0;
    bool matrix_site = false;
    for (const auto& [tensor, sites] : tensors.items())
      if (sites.contains(site)) {
        matrix_site = true;
        elements += sites[site].at("elements").get<std::uint64_t>();
        swamped += sites[site].at("swamped").get<std::uint64_t>();
      }
    if (!matrix_site) continue;
    EXPECT_EQ(elements, total.at("elements").get<std::uint64_t>()) << site;
    EXPECT_EQ(swamped, total.at("swamped").get<std::uint64_t>()) << site;
    if (site.ends_with(".accumulate")) truncated += total.at("truncated").get<std::uint64_t>();
  }
  EXPECT_GT(truncated, 0u);

  TrainConfig fp32_acc = c;
  fp32_acc.recipe = "o2";
  fp32_acc.scaler = "torch";
  Trainer o2(fp32_acc);
  o2.step();
  for (const auto& [tensor, sites] : o2.summary().at("tensor_counters").items())
    for (const auto& [site, counts] : sites.items()) EXPECT_EQ(counts.at("truncated"), 0) << tensor << " " << site;
}

TEST(Trainer, AStaticScaleRecoversGradientsBelowTheFp16Subnormals) {
  mpverify::nn::EmuBackend backend;
  mpverify::nn::Precision p;
  const auto f16 = mpverify::formats::parse_format("fp16");
  p.matmul_forward = p.matmul_backward = p.activations = p.activation_grads = p.weights = p.weight_grads = f16;
  const std::vector<float> crafted = {0x1p-30f, 3 * 0x1p-31f, -0x1p-30f, 0x1p-26f};
  for (const double scale : {1.0, 65536.0}) {
    mpverify::nn::Context ctx(backend, p);
    mpverify::training::StepRecorder recorder(f16);
    recorder.begin_step(0, true, false);
    ctx.set_observer(&recorder);
    ctx.set_loss_scale(scale);
    mpverify::nn::Linear layer("fc", 1, 4, 1, 1);
    for (auto* param : layer.parameters()) mpverify::nn::cast_weights(*param, p);
    mpverify::nn::Tensor x(1, 1);
    x.values = {1.0f};
    layer.forward(ctx, x);
    ctx.set_pass(Pass::backward);
    mpverify::nn::Tensor dy(1, 4);
    for (std::size_t i = 0; i < 4; ++i) dy.values[i] = crafted[i] * static_cast<float>(scale);
    ctx.store("loss", "dlogits", Role::activation_grad, dy.span());
    layer.backward(ctx, dy, false);
    auto grad = layer.parameters()[0]->grad;
    mpverify::training::unscale_gradient("static", scale, grad);
    double dy_underflow = -1;
    for (const std::string& text : recorder.take_tensor_lines()) {
      const auto line = nlohmann::json::parse(text);
      if (line["tensor"] == "dlogits") dy_underflow = line["underflow_to_zero_rate"].get<double>();
    }
    if (scale == 1.0) {
      EXPECT_DOUBLE_EQ(dy_underflow, 1.0);
      EXPECT_EQ(recorder.gradients().underflow_to_zero, 4u);
      for (float g : grad) EXPECT_EQ(g, 0.0f);
    } else {
      EXPECT_DOUBLE_EQ(dy_underflow, 0.0);
      EXPECT_EQ(recorder.gradients().underflow_to_zero, 0u);
      for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(grad[i], crafted[i]) << i;
    }
  }
}

// The recorded norm: sqrt of the sum of squares of the finite values, against a sum in long double of the
// squares sorted ascending (a different order and a wider type). Tolerance: each of the recorder's eight
// partial sums of m <= n/8 + 1 positive exact squares is off by at most m units of 2^-53 relatively, three
// more additions and the square root add less than 4 units: n units of 2^-53 bound the relative error.
TEST(Trainer, RecordedNormIsTheL2NormOfTheFiniteValues) {
  std::vector<float> x = {3.0f, 4.0f, INFINITY, -INFINITY, NAN};
  for (int i = 0; i < 997; ++i) x.push_back(std::ldexp(1.0f + 0.37f * static_cast<float>(i % 13), (i % 40) - 20) * ((i % 3) ? 1.0f : -1.0f));
  mpverify::training::StepRecorder recorder(mpverify::formats::parse_format("fp16"));
  recorder.begin_step(0, true, false);
  recorder.record("fc", "w", Role::weight, Pass::optimizer, x, mpverify::formats::parse_format("fp16"));
  const auto lines = recorder.take_tensor_lines();
  ASSERT_EQ(lines.size(), 1u);
  std::vector<long double> squares;
  for (const float v : x)
    if (std::isfinite(v)) squares.push_back(static_cast<long double>(v) * static_cast<long double>(v));
  std::sort(squares.begin(), squares.end());
  long double sum = 0;
  for (const long double q : squares) sum += q;
  const double expected = static_cast<double>(std::sqrt(sum));
  EXPECT_NEAR(nlohmann::json::parse(lines[0])["norm"].get<double>(), expected, expected * static_cast<double>(x.size()) * 0x1p-53);
  EXPECT_GT(expected, 5.0);  // 3, 4 and the rest
}

// Each tensor is measured against its own format, fp32 ones against the study format, and by_format splits the
// step's sums by that format. Hand-worked: fp16 flushes 2^-26 to zero (below half its smallest subnormal,
// 2^-24) and keeps 2^-20 as a subnormal; bf16 keeps both as normals (its range is fp32's).
TEST(Trainer, RatesAreSplitByTheFormatMeasuredAgainst) {
  using mpverify::formats::parse_format;
  mpverify::training::StepRecorder recorder(parse_format("fp16"));
  recorder.begin_step(0, false, false);
  const std::vector<float> tiny = {0x1p-26f, 0x1p-20f, 1.0f};
  recorder.record("a", "dy", Role::activation_grad, Pass::backward, tiny, parse_format("bf16"));
  recorder.record("b", "w.grad", Role::weight_grad, Pass::backward, tiny, mpverify::nn::Precision::fp32());
  recorder.record("b", "y", Role::activation, Pass::forward, tiny, parse_format("bf16"));
  recorder.record("b", "w", Role::weight, Pass::optimizer, tiny, parse_format("bf16"));  // weights: no rates
  const auto& by = recorder.by_format();
  ASSERT_EQ(by.size(), 2u);
  EXPECT_EQ(by.at("bf16").gradients.nonzero, 3u);
  EXPECT_EQ(by.at("bf16").gradients.underflow_to_zero, 0u);
  EXPECT_EQ(by.at("bf16").activations.nonzero, 3u);
  EXPECT_EQ(by.at("fp16").gradients.nonzero, 3u);
  EXPECT_EQ(by.at("fp16").gradients.underflow_to_zero, 1u);
  EXPECT_EQ(by.at("fp16").gradients.subnormal, 1u);
  EXPECT_EQ(by.at("fp16").activations.nonzero, 0u);
  EXPECT_EQ(recorder.gradients().nonzero, 6u);  // the pooled sums hold both
  EXPECT_EQ(recorder.gradients().underflow_to_zero, 1u);
  const nlohmann::json j = recorder.by_format_json();
  EXPECT_DOUBLE_EQ(j["fp16"]["underflow_rate"].get<double>(), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(j["bf16"]["underflow_rate"].get<double>(), 0.0);
  recorder.begin_step(1, false, false);
  EXPECT_TRUE(recorder.by_format().empty());  // a new step starts empty
}

// The recorder writes its lines as text (record/json_line.h); they must be what nlohmann's dump() writes for
// the object the recorder used to build, transcribed here from tensor_stats' fields (non-finite numbers as
// null, the scale only when it is not 1, the histogram's bins from the first to the last non-zero one).
nlohmann::json expected_tensor_line(std::size_t step, const std::string& layer, const std::string& tensor,
                                    const std::string& role, const std::string& pass, const std::string& target,
                                    const std::string& stored, const mpverify::record::TensorStats& s, double scale) {
  auto number_or_null = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json j = {{"step", step}, {"layer", layer}, {"tensor", tensor}, {"role", role}, {"pass", pass},
                      {"format", target}, {"stored_in", stored}, {"count", s.count}, {"zeros_in", s.zeros_in},
                      {"nonzero_finite", s.nonzero_finite}, {"underflow_to_zero_rate", s.underflow_to_zero_rate},
                      {"subnormal_rate", s.subnormal_rate}, {"overflow_rate", s.overflow_rate},
                      {"max_abs", number_or_null(s.max_abs)}, {"headroom_log2", number_or_null(s.headroom_log2)},
                      {"norm", number_or_null(s.norm)}};
  if (scale != 1.0) j["scale"] = scale;
  return j;
}

nlohmann::json expected_histogram_line(std::size_t step, const std::string& layer, const std::string& tensor,
                                       const std::string& role, const std::string& target,
                                       const mpverify::emu::ExponentHistogram& h) {
  // The bins from the first non-zero one to the last, written here rather than through the recorder's own
  // occupied_bins: an exponent is index + min_exponent.
  nlohmann::json counts = nlohmann::json::array(), first_exponent = nullptr;
  std::vector<std::uint64_t> pending_zeros;
  for (std::size_t i = 0; i < h.bins.size(); ++i) {
    if (h.bins[i] == 0) {
      if (!first_exponent.is_null()) pending_zeros.push_back(0);
      continue;
    }
    if (first_exponent.is_null()) first_exponent = static_cast<int>(i) + mpverify::emu::ExponentHistogram::min_exponent;
    for (const std::uint64_t z : pending_zeros) counts.push_back(z);
    pending_zeros.clear();
    counts.push_back(h.bins[i]);
  }
  return {{"zeros", h.zeros}, {"nans", h.nans}, {"infinities", h.infinities}, {"below_range", h.below_range},
          {"above_range", h.above_range}, {"first_exponent", first_exponent}, {"counts", counts},
          {"step", step}, {"layer", layer}, {"tensor", tensor}, {"role", role}, {"format", target}};
}

TEST(StepRecorderLines, AreNlohmannsDumpOfTheSameObject) {
  const auto fp16 = mpverify::formats::parse_format("fp16"), fp32 = mpverify::formats::parse_format("fp32");
  const auto bf16 = mpverify::formats::parse_format("bf16");
  struct Case {
    std::string layer, tensor;
    std::vector<float> x;
    const mpverify::formats::Format* stored;
    double scale;
  };
  const std::vector<Case> cases = {
      {"conv1", "y", {1.0f, -0.1f, 3e-8f, 0.0f, 7e4f, 1e-30f}, &fp32, 1.0},
      {"fc.\"odd\"\tname\xc3", "w\n", {0.5f, 0.25f}, &bf16, 1.0},  // escapes and invalid UTF-8
      {"model", "b.grad", {}, &fp32, 1024.0},                              // empty: no bins, inf headroom
      {"fc2", "dy", {INFINITY, NAN, -2.0f, 1e-5f}, &fp16, 0.5}};
  mpverify::training::StepRecorder recorder(fp16);
  recorder.begin_step(7, true, true);
  for (const Case& c : cases)
    recorder.record(c.layer, c.tensor, Role::weight_grad, Pass::backward, c.x, *c.stored, c.scale);
  const auto tensors = recorder.take_tensor_lines();
  const auto histograms = recorder.take_histogram_lines();
  ASSERT_EQ(tensors.size(), cases.size());
  ASSERT_EQ(histograms.size(), cases.size());
  const auto replace = nlohmann::json::error_handler_t::replace;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const auto& target = *c.stored == fp32 ? fp16 : *c.stored;
    const auto s = mpverify::record::tensor_stats(c.x, target, c.scale);
    EXPECT_EQ(tensors[i], expected_tensor_line(7, c.layer, c.tensor, "weight_grad", "backward", target.name,
                                               c.stored->name, s, c.scale).dump(-1, ' ', false, replace)) << i;
    EXPECT_EQ(histograms[i], expected_histogram_line(7, c.layer, c.tensor, "weight_grad", target.name, s.histogram)
                                 .dump(-1, ' ', false, replace)) << i;
  }
}

// --- crafted non-finite values ----------------------------------------------------------

TEST(Trainer, AnInjectedInfIsCaughtSkippedAndTraced) {
  TrainConfig c = small_mlp("o2", "torch", mpverify::nn::BackendKind::emu);
  c.inject = mpverify::training::FaultInjection{3, "fc2.w"};
  c.scaler_options = {{"init", "1024"}};
  Trainer t(c);
  for (int step = 0; step < 3; ++step) ASSERT_FALSE(t.step()["skipped"].get<bool>());
  std::vector<std::vector<float>> before, state_before;
  for (auto* p : t.parameters()) {
    before.push_back(p->master);
    state_before.push_back(p->state_m);
  }
  const auto log = t.step();
  EXPECT_TRUE(log["skipped"].get<bool>());
  EXPECT_TRUE(log["found_inf"].get<bool>());
  EXPECT_EQ(log["nonfinite"]["layer"], "fc2.w");
  EXPECT_EQ(log["nonfinite"]["pass"], "backward");
  EXPECT_EQ(log["scale"].get<double>(), 1024.0);
  const auto params = t.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i]->master, before[i]) << params[i]->name << " changed on a skipped step";
    EXPECT_EQ(params[i]->state_m, state_before[i]) << params[i]->name;
  }
  const auto next = t.step();
  EXPECT_EQ(next["scale"].get<double>(), 512.0);  // torch backs off by 0.5
  EXPECT_FALSE(next["skipped"].get<bool>());
  EXPECT_TRUE(next["nonfinite"].is_null());
}

// A forward overflow: the fp16 store of a layer output above 65504 gives inf
// in the FORWARD pass, which the log names (no loss scale can fix it).
TEST(Trainer, AForwardOverflowIsTracedToItsLayerAndPass) {
  mpverify::nn::EmuBackend backend;
  mpverify::nn::Precision p;
  const auto f16 = mpverify::formats::parse_format("fp16");
  p.matmul_forward = p.activations = p.weights = f16;
  mpverify::nn::Context ctx(backend, p);
  mpverify::nn::Linear layer("big", 2, 1, 1, 1);
  auto params = layer.parameters();
  params[0]->master = {60000.0f, 60000.0f};  // fp16 values; 60000 + 60000 > 65504
  params[1]->master = {0.0f};
  for (auto* param : params) mpverify::nn::cast_weights(*param, p);
  mpverify::nn::Tensor x(1, 2);
  x.values = {1.0f, 1.0f};
  const auto y = layer.forward(ctx, x);
  EXPECT_TRUE(std::isinf(y.values[0]));
  ASSERT_TRUE(ctx.first_nonfinite().has_value());
  EXPECT_EQ(ctx.first_nonfinite()->layer, "big");
  EXPECT_EQ(ctx.first_nonfinite()->tensor, "y");
  EXPECT_EQ(ctx.first_nonfinite()->pass, Pass::forward);
}

// The block-scaled recipes train the CNN on the emulator: the block-scaled GEMMs run in every layer but the
// last (its counters say so per tensor), the run records which layers kept bf16, the loss stays finite and the
// same seed gives the same bits.
TEST(Trainer, BlockScaledRecipesTrainTheCnnWithTheHeadInBf16) {
  for (const char* recipe : {"mxfp8", "nvfp4", "fp8-blockwise"}) {
    TrainConfig c = small_mlp(recipe, "none", mpverify::nn::BackendKind::emu);
    c.model = "cnn";
    c.train_size = 256;
    c.test_size = 64;
    c.batch_size = 16;
    Trainer t(c), twin(c);
    for (int i = 0; i < 2; ++i) {
      const nlohmann::json line = t.step();
      EXPECT_TRUE(std::isfinite(line.at("loss").get<double>())) << recipe;
      EXPECT_EQ(line.dump(), twin.step().dump()) << recipe << " step " << i;
    }
    const nlohmann::json s = t.summary();
    EXPECT_EQ(s.at("config").at("precision").at("block_scaling").at("high_precision_layers"),
              nlohmann::json::array({"fc"}))
        << recipe;
    const nlohmann::json& tensors = s.at("tensor_counters");
    for (const char* name : {"conv1.y", "conv1.dw", "conv2.y", "conv2.dx", "conv2.dw"})
      EXPECT_GT(tensors.at(name).at("block-gemm.accumulate").at("elements").get<std::uint64_t>(), 0u)
          << recipe << " " << name;
    for (const char* name : {"fc.y", "fc.dx", "fc.dw"}) {
      EXPECT_FALSE(tensors.at(name).contains("block-gemm.accumulate")) << recipe << " " << name;
      EXPECT_TRUE(tensors.at(name).contains("gemm.a")) << recipe << " " << name;
    }
  }
}

// --- the transformer (a character-level language model) -----------------------------------

// A small text in the kjv alphabet, long enough for a train and a test part of many windows.
std::string repeated_text() {
  std::string text;
  for (int i = 0; i < 300; ++i) text += "And God said, Let there be light: and there was light.\n";
  return text;
}

TrainConfig small_transformer(std::string recipe, mpverify::nn::BackendKind backend) {
  TrainConfig c = small_mlp(std::move(recipe), "none", backend);
  c.model = "transformer";
  c.data = "kjv";
  c.text_for_tests = repeated_text();
  c.context_length = 16;
  c.batch_size = 4;
  c.test_size = 8;
  c.optimizer = mpverify::training::OptimizerKind::adam;
  c.adam.lr = 3e-3;
  return c;
}

// On a text that repeats one sentence, next-character prediction is learnable within a few dozen steps: the
// loss must fall well below ln 64 = 4.16 (uniform guessing over the vocabulary), and the held-out windows
// are predicted far better than chance (1/64).
TEST(Trainer, TheTransformerLearnsARepeatedText) {
  Trainer t(small_transformer("fp32", mpverify::nn::BackendKind::ref));
  const double first = t.step().at("loss").get<double>();
  EXPECT_NEAR(first, std::log(64.0), 0.5) << "an untrained model guesses about uniformly";
  double last = first;
  for (int i = 0; i < 60; ++i) last = t.step().at("loss").get<double>();
  EXPECT_LT(last, 2.0);
  const auto e = t.evaluate();
  EXPECT_EQ(e.test_size, 8u * 16u);
  EXPECT_FALSE(e.diverged);
  EXPECT_GT(static_cast<double>(e.correct) / static_cast<double>(e.test_size), 0.3);
}

// Under the block-scaled recipes the projections and the MLP run block-scaled and the output head does not;
// the attention's own matmuls stay plain; the same seed gives the same bits.
TEST(Trainer, BlockScaledRecipesTrainTheTransformerWithTheHeadInBf16) {
  for (const char* recipe : {"bf16-o1", "mxfp8", "nvfp4", "fp8-blockwise"}) {
    const TrainConfig c = small_transformer(recipe, mpverify::nn::BackendKind::emu);
    Trainer t(c), twin(c);
    for (int i = 0; i < 2; ++i) {
      const nlohmann::json line = t.step();
      EXPECT_TRUE(std::isfinite(line.at("loss").get<double>())) << recipe;
      EXPECT_EQ(line.dump(), twin.step().dump()) << recipe << " step " << i;
    }
    const nlohmann::json s = t.summary();
    EXPECT_EQ(s.at("config").at("context_length"), 16);
    if (std::string(recipe) == "bf16-o1") continue;
    EXPECT_EQ(s.at("config").at("precision").at("block_scaling").at("high_precision_layers"),
              nlohmann::json::array({"head"}))
        << recipe;
    const nlohmann::json& tensors = s.at("tensor_counters");
    for (const char* name : {"h0.attn.q.y", "h0.attn.o.dx", "h1.fc1.dw", "h1.fc2.y"})
      EXPECT_TRUE(tensors.at(name).contains("block-gemm.accumulate")) << recipe << " " << name;
    EXPECT_FALSE(tensors.at("head.y").contains("block-gemm.accumulate")) << recipe;
  }
}

// Under the fp8 recipe the projections' GEMMs take E4M3 operands (their bf16 inputs round inexactly), while
// the attention's batched matmuls stay in the activation format, bf16 (nn::attention_matmul_policy): their
// operands, stored in bf16 already, round exactly.
TEST(Trainer, Fp8KeepsTheAttentionMatmulsInBf16) {
  Trainer t(small_transformer("fp8", mpverify::nn::BackendKind::emu));
  t.step();
  const nlohmann::json summary = t.summary();
  const nlohmann::json& tensors = summary.at("tensor_counters");
  EXPECT_GT(tensors.at("h0.attn.q.y").at("gemm.a").at("inexact").get<std::uint64_t>(), 0u);
  for (const char* name : {"h0.attn.scores", "h0.attn.context", "h1.attn.dq"}) {
    EXPECT_GT(tensors.at(name).at("gemm.a").at("elements").get<std::uint64_t>(), 0u) << name;
    EXPECT_EQ(tensors.at(name).at("gemm.a").at("inexact").get<std::uint64_t>(), 0u) << name;
    EXPECT_EQ(tensors.at(name).at("gemm.b").at("inexact").get<std::uint64_t>(), 0u) << name;
  }
}

TEST(Trainer, BadConfigurationsAreRefusedWithTheReason) {
  auto refused = [](TrainConfig c, const std::string& fragment) {
    try {
      Trainer t(c);
      ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  refused(small_mlp("o2", "torch", mpverify::nn::BackendKind::ref), "--backend emu");
  refused(small_mlp("fp32", "delayed", mpverify::nn::BackendKind::ref), "FP8 operands");
  TrainConfig c = small_mlp("fp32", "none", mpverify::nn::BackendKind::ref);
  c.model = "resnet";
  refused(c, "mlp, cnn, dcgan and transformer");
  c = small_mlp("fp32", "none", mpverify::nn::BackendKind::ref);
  c.inject = mpverify::training::FaultInjection{1, "fc9.w"};
  refused(c, "fc1.w");
  refused(small_mlp("mxfp8", "none", mpverify::nn::BackendKind::ref), "only the emulator has");
  c = small_mlp("nvfp4", "none", mpverify::nn::BackendKind::emu);
  c.model = "dcgan";
  refused(c, "transposed convolutions");
  c = small_mlp("fp32", "none", mpverify::nn::BackendKind::ref);
  c.model = "transformer";
  refused(c, "train it on --data kjv");
  c = small_transformer("fp32", mpverify::nn::BackendKind::ref);
  c.model = "mlp";
  refused(c, "--model transformer reads it");
  c = small_transformer("fp32", mpverify::nn::BackendKind::ref);
  c.against_reference = true;
  refused(c, "not available for the transformer");
  c = small_transformer("fp32", mpverify::nn::BackendKind::ref);
  c.text_for_tests = "And God said.";
  refused(c, "longer than the context");
}

}  // namespace
