// The three nn backends: names; the ref backend equals the FP32 references
// bit for bit and rejects every non-fp32 policy field; the emu backend equals
// the emulated ops called directly (results and counters); the optimizers'
// `update` output is the value added to w; and the gpu backend's policy
// mapping (checked before any device call, so it runs without a GPU), its
// host-side losses and fp32 bias epilogue, and, with a device, its fp16 GEMM
// against the emulator's. Device tests skip with gpu_unavailable_reason().
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compare/compare.h"
#include "emu/quantize.h"
#include "gpu/device.h"
#include "nn/backend.h"
#include "nn/emu_backend.h"
#include "nn/gpu_backend.h"
#include "nn/ref_backend.h"
#include "refs/activation_ref.h"
#include "refs/batch_norm_ref.h"
#include "refs/bias_add_ref.h"
#include "refs/conv2d_ref.h"
#include "refs/gemm_ref.h"
#include "refs/loss_ref.h"
#include "refs/max_pool_ref.h"
#include "refs/optimizer_ref.h"
#include "support/tensors.h"

namespace {

using namespace mpverify;
using namespace mpverify::test_support;
using nn::Backend;
using nn::BackendKind;

const formats::Format kFp32 = formats::parse_format("fp32");
const formats::Format kFp16 = formats::parse_format("fp16");
const formats::Format kBf16 = formats::parse_format("bf16");
const formats::Format kE4m3 = formats::parse_format("e4m3");

#define SKIP_WITHOUT_GPU()                                                          \
  do {                                                                              \
    if (const std::string reason = gpu::gpu_unavailable_reason(); !reason.empty()) \
      GTEST_SKIP() << reason;                                                       \
  } while (0)

std::vector<std::uint32_t> bits(std::span<const float> v) {
  std::vector<std::uint32_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = std::bit_cast<std::uint32_t>(v[i]);
  return out;
}

// f() throws std::invalid_argument whose message holds every phrase.
void expect_invalid(const std::function<void()>& f, std::initializer_list<std::string_view> phrases,
                    const std::string& context) {
  try {
    f();
    ADD_FAILURE() << context << ": no exception";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    for (std::string_view phrase : phrases)
      EXPECT_NE(message.find(phrase), std::string::npos) << context << ": '" << phrase << "' not in: " << message;
  } catch (const std::exception& e) {
    ADD_FAILURE() << context << ": not std::invalid_argument: " << e.what();
  }
}

// --- policies: every field fp32 (the ref recipe) -------------------------------

emu::GemmPolicy fp32_gemm() {
  emu::GemmPolicy p;
  p.input = kFp32;
  return p;
}
emu::BiasAddPolicy fp32_bias() { return {kFp32, kFp32, kFp32}; }
emu::ElementwisePolicy fp32_elementwise() { return {kFp32, kFp32}; }
emu::MaxPoolPolicy fp32_pool() { return {kFp32, kFp32, kFp32}; }
emu::BatchNormPolicy fp32_norm() { return {kFp32, kFp32, kFp32, kFp32}; }
emu::LossPolicy fp32_loss() { return {kFp32, kFp32, kFp32}; }

// --- one set of inputs for every op ----------------------------------------------

struct Inputs {
  std::mt19937_64 rng{2024};
  ops::GemmShape gemm{5, 7, 9, false, true};
  std::vector<float> a = normal(gemm.a_size(), rng, 1.0), b = normal(gemm.b_size(), rng, 1.0);
  ops::Conv2dShape conv{2, 3, 6, 5, 4, 3, 3, 1, 1};
  std::vector<float> cx = normal(conv.x_size(), rng, 1.0), cw = normal(conv.weight_size(), rng, 0.3),
                     cdy = normal(conv.y_size(), rng, 1.0);
  ops::ChannelShape ch{3, 4, 2, 2};
  std::vector<float> x = normal(ch.size(), rng, 2.0), bias = normal(4, rng, 1.0), dy = normal(ch.size(), rng, 1.0),
                     gamma = normal(4, rng, 1.0), beta = normal(4, rng, 1.0);
  ops::BatchNormParams bn{};
  ops::PoolShape pool{2, 2, 4, 4, 2, 2, 2, 0};
  std::vector<float> px = normal(pool.x_size(), rng, 1.0), pdy = normal(pool.y_size(), rng, 1.0);
  ops::SoftmaxCrossEntropyShape sce{4, 5};
  std::vector<float> logits = normal(sce.logits_size(), rng, 3.0);
  std::vector<std::int32_t> labels{0, 3, 4, 1};
  std::vector<float> t{0.0f, 0.25f, 1.0f, 0.5f, 0.75f, 1.0f, 0.0f, 0.125f};
  std::vector<float> bx = normal(t.size(), rng, 2.0);
};

// ================================ names ==========================================

TEST(BackendNames, ParseInvertsToString) {
  int kinds = 0;
  for (BackendKind k : {BackendKind::ref, BackendKind::emu, BackendKind::gpu}) {
    EXPECT_EQ(nn::parse_backend(nn::to_string(k)), k) << nn::to_string(k);
    ++kinds;
  }
  EXPECT_EQ(kinds, 3);
  EXPECT_NE(nn::to_string(BackendKind::ref), nn::to_string(BackendKind::emu));
  EXPECT_NE(nn::to_string(BackendKind::emu), nn::to_string(BackendKind::gpu));
}

TEST(BackendNames, UnknownNameListsTheValidOnes) {
  for (std::string_view bad : {"cuda", "", "REF", "emu "})
    expect_invalid([&] { nn::parse_backend(bad); }, {"ref", "emu", "gpu"}, std::string("parse_backend '") += bad);
}

TEST(BackendNames, MakeBackendGivesTheKindAsked) {
  EXPECT_EQ(nn::make_backend(BackendKind::ref)->kind(), BackendKind::ref);
  EXPECT_EQ(nn::make_backend(BackendKind::emu)->kind(), BackendKind::emu);
}

// ============================ ref backend: bit for bit ============================

TEST(RefBackend, MatrixOpsEqualTheReferences) {
  Inputs in;
  nn::RefBackend ref;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const ops::GemmShape s{6, 4, 11, ta, tb};
      const auto a = normal(s.a_size(), in.rng, 1.0), b = normal(s.b_size(), in.rng, 1.0);
      std::vector<float> want(s.c_size()), got(s.c_size());
      refs::gemm_ref(s, a, b, want);
      ref.gemm(s, a, b, got, fp32_gemm(), nullptr);
      EXPECT_EQ(bits(got), bits(want)) << "transpose " << ta << tb;
    }
  std::vector<float> want(in.conv.y_size()), got(in.conv.y_size());
  refs::conv2d_forward_ref(in.conv, in.cx, in.cw, want);
  ref.conv2d_forward(in.conv, in.cx, in.cw, got, fp32_gemm(), nullptr);
  EXPECT_EQ(bits(got), bits(want));
  want.assign(in.conv.x_size(), 0.0f);
  got.assign(in.conv.x_size(), 0.0f);
  refs::conv2d_backward_data_ref(in.conv, in.cdy, in.cw, want);
  ref.conv2d_backward_data(in.conv, in.cdy, in.cw, got, fp32_gemm(), nullptr);
  EXPECT_EQ(bits(got), bits(want));
  want.assign(in.conv.weight_size(), 0.0f);
  got.assign(in.conv.weight_size(), 0.0f);
  refs::conv2d_backward_filter_ref(in.conv, in.cx, in.cdy, want);
  ref.conv2d_backward_filter(in.conv, in.cx, in.cdy, got, fp32_gemm(), nullptr);
  EXPECT_EQ(bits(got), bits(want));
}

TEST(RefBackend, ElementwiseOpsEqualTheReferences) {
  Inputs in;
  nn::RefBackend ref;
  std::vector<float> want(in.x.size()), got(in.x.size());
  refs::bias_add_ref(in.ch, in.x, in.bias, want);
  ref.bias_add(in.ch, in.x, in.bias, got, fp32_bias(), nullptr);
  EXPECT_EQ(bits(got), bits(want));
  std::vector<float> dbw(4), dbg(4);
  refs::bias_add_backward_ref(in.ch, in.dy, dbw);
  ref.bias_add_backward(in.ch, in.dy, dbg, fp32_bias(), nullptr);
  EXPECT_EQ(bits(dbg), bits(dbw));

  for (ops::Activation k :
       {ops::Activation::relu, ops::Activation::leaky_relu, ops::Activation::tanh, ops::Activation::sigmoid}) {
    const ops::ActivationParams p{k, 0.02};
    refs::activation_ref(p, in.x, want);
    ref.activation(p, in.x, got, fp32_elementwise(), nullptr);
    EXPECT_EQ(bits(got), bits(want)) << ops::to_string(k);
    refs::activation_backward_ref(p, in.x, in.dy, want);
    ref.activation_backward(p, in.x, in.dy, got, fp32_elementwise(), nullptr);
    EXPECT_EQ(bits(got), bits(want)) << ops::to_string(k) << " backward";
  }

  std::vector<float> py_want(in.pool.y_size()), py_got(in.pool.y_size());
  refs::max_pool_ref(in.pool, in.px, py_want);
  ref.max_pool(in.pool, in.px, py_got, fp32_pool(), nullptr);
  EXPECT_EQ(bits(py_got), bits(py_want));
  std::vector<float> pdx_want(in.pool.x_size()), pdx_got(in.pool.x_size());
  refs::max_pool_backward_ref(in.pool, in.px, in.pdy, pdx_want);
  ref.max_pool_backward(in.pool, in.px, in.pdy, pdx_got, fp32_pool(), nullptr);
  EXPECT_EQ(bits(pdx_got), bits(pdx_want));
}

TEST(RefBackend, BatchNormEqualsTheReference) {
  Inputs in;
  nn::RefBackend ref;
  const std::size_t n = in.x.size();
  std::vector<float> y1(n), y2(n), mean1(4), mean2(4), inv1(4), inv2(4);
  std::vector<float> rm1(4, 0.5f), rm2(4, 0.5f), rv1(4, 2.0f), rv2(4, 2.0f);
  refs::batch_norm_ref(in.ch, in.bn, in.x, in.gamma, in.beta, y1, mean1, inv1, rm1, rv1);
  ref.batch_norm(in.ch, in.bn, in.x, in.gamma, in.beta, y2, mean2, inv2, rm2, rv2, fp32_norm(), nullptr);
  EXPECT_EQ(bits(y2), bits(y1));
  EXPECT_EQ(bits(mean2), bits(mean1));
  EXPECT_EQ(bits(inv2), bits(inv1));
  EXPECT_EQ(bits(rm2), bits(rm1));
  EXPECT_EQ(bits(rv2), bits(rv1));
  std::vector<float> dx1(n), dx2(n), dg1(4), dg2(4), db1(4), db2(4);
  refs::batch_norm_backward_ref(in.ch, in.x, in.dy, in.gamma, mean1, inv1, dx1, dg1, db1);
  ref.batch_norm_backward(in.ch, in.x, in.dy, in.gamma, mean1, inv1, dx2, dg2, db2, fp32_norm(), nullptr);
  EXPECT_EQ(bits(dx2), bits(dx1));
  EXPECT_EQ(bits(dg2), bits(dg1));
  EXPECT_EQ(bits(db2), bits(db1));
}

TEST(RefBackend, LossesEqualTheReferences) {
  Inputs in;
  nn::RefBackend ref;
  EXPECT_EQ(std::bit_cast<std::uint32_t>(ref.softmax_cross_entropy(in.sce, in.logits, in.labels, fp32_loss(), nullptr)),
            std::bit_cast<std::uint32_t>(refs::softmax_cross_entropy_ref(in.sce, in.logits, in.labels)));
  std::vector<float> want(in.logits.size()), got(in.logits.size());
  refs::softmax_cross_entropy_backward_ref(in.sce, in.logits, in.labels, want);
  ref.softmax_cross_entropy_backward(in.sce, in.logits, in.labels, got, fp32_loss(), nullptr);
  EXPECT_EQ(bits(got), bits(want));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(ref.bce_with_logits(in.bx, in.t, fp32_loss(), nullptr)),
            std::bit_cast<std::uint32_t>(refs::bce_with_logits_ref(in.bx, in.t)));
  want.assign(in.bx.size(), 0.0f);
  got.assign(in.bx.size(), 0.0f);
  refs::bce_with_logits_backward_ref(in.bx, in.t, want);
  ref.bce_with_logits_backward(in.bx, in.t, got, fp32_loss(), nullptr);
  EXPECT_EQ(bits(got), bits(want));
}

// ============================ ref backend: fp32 only ==============================

// The op accepts the all-fp32 policy (so a throw below is the field's doing)
// and rejects each listed field set to something else, saying the ref backend
// is FP32 only and pointing to --backend emu.
template <class Policy>
void expect_ref_rejects_each(const std::string& op, const Policy& base,
                             const std::vector<std::pair<std::string, std::function<void(Policy&)>>>& fields,
                             const std::function<void(const Policy&)>& call) {
  EXPECT_NO_THROW(call(base)) << op << " with every field fp32";
  for (const auto& [name, set] : fields) {
    Policy p = base;
    set(p);
    expect_invalid([&] { call(p); }, {"ref backend", "FP32", "--backend emu"}, op + " with " + name);
  }
}

TEST(RefBackend, RejectsEveryNonFp32PolicyField) {
  Inputs in;
  nn::RefBackend ref;
  using GemmField = std::pair<std::string, std::function<void(emu::GemmPolicy&)>>;
  const std::vector<GemmField> gemm_fields{
      {"input fp16", [](emu::GemmPolicy& p) { p.input = kFp16; }},
      {"input bf16", [](emu::GemmPolicy& p) { p.input = kBf16; }},
      {"fp16 accumulation", [](emu::GemmPolicy& p) { p.accumulation = emu::Accumulation::fp16; }},
      {"tensor-core accumulation", [](emu::GemmPolicy& p) { p.accumulation = emu::Accumulation::tensor_core; }}};
  std::vector<float> c(in.gemm.c_size()), y(in.conv.y_size()), dx(in.conv.x_size()), dw(in.conv.weight_size());
  expect_ref_rejects_each<emu::GemmPolicy>("gemm", fp32_gemm(), gemm_fields, [&](const emu::GemmPolicy& p) {
    ref.gemm(in.gemm, in.a, in.b, c, p, nullptr);
  });
  expect_ref_rejects_each<emu::GemmPolicy>("conv2d", fp32_gemm(), gemm_fields, [&](const emu::GemmPolicy& p) {
    ref.conv2d_forward(in.conv, in.cx, in.cw, y, p, nullptr);
  });
  expect_ref_rejects_each<emu::GemmPolicy>("conv2d_backward_data", fp32_gemm(), gemm_fields,
                                           [&](const emu::GemmPolicy& p) {
                                             ref.conv2d_backward_data(in.conv, in.cdy, in.cw, dx, p, nullptr);
                                           });
  expect_ref_rejects_each<emu::GemmPolicy>("conv2d_backward_filter", fp32_gemm(), gemm_fields,
                                           [&](const emu::GemmPolicy& p) {
                                             ref.conv2d_backward_filter(in.conv, in.cx, in.cdy, dw, p, nullptr);
                                           });

  std::vector<float> out(in.x.size()), db(4);
  expect_ref_rejects_each<emu::BiasAddPolicy>(
      "bias_add", fp32_bias(),
      {{"input fp16", [](emu::BiasAddPolicy& p) { p.input = kFp16; }},
       {"output fp16", [](emu::BiasAddPolicy& p) { p.output = kFp16; }}},
      [&](const emu::BiasAddPolicy& p) { ref.bias_add(in.ch, in.x, in.bias, out, p, nullptr); });
  expect_ref_rejects_each<emu::BiasAddPolicy>(
      "bias_add_backward", fp32_bias(),
      {{"input fp16", [](emu::BiasAddPolicy& p) { p.input = kFp16; }},
       {"output fp16", [](emu::BiasAddPolicy& p) { p.output = kFp16; }},
       {"accumulation fp16", [](emu::BiasAddPolicy& p) { p.accumulation = kFp16; }}},
      [&](const emu::BiasAddPolicy& p) { ref.bias_add_backward(in.ch, in.dy, db, p, nullptr); });

  const std::vector<std::pair<std::string, std::function<void(emu::ElementwisePolicy&)>>> elementwise_fields{
      {"input fp16", [](emu::ElementwisePolicy& p) { p.input = kFp16; }},
      {"output bf16", [](emu::ElementwisePolicy& p) { p.output = kBf16; }}};
  const ops::ActivationParams act{ops::Activation::tanh};
  expect_ref_rejects_each<emu::ElementwisePolicy>("activation", fp32_elementwise(), elementwise_fields,
                                                  [&](const emu::ElementwisePolicy& p) {
                                                    ref.activation(act, in.x, out, p, nullptr);
                                                  });
  expect_ref_rejects_each<emu::ElementwisePolicy>("activation_backward", fp32_elementwise(), elementwise_fields,
                                                  [&](const emu::ElementwisePolicy& p) {
                                                    ref.activation_backward(act, in.x, in.dy, out, p, nullptr);
                                                  });

  std::vector<float> py(in.pool.y_size()), pdx(in.pool.x_size());
  expect_ref_rejects_each<emu::MaxPoolPolicy>(
      "max_pool", fp32_pool(),
      {{"input fp16", [](emu::MaxPoolPolicy& p) { p.input = kFp16; }},
       {"output fp16", [](emu::MaxPoolPolicy& p) { p.output = kFp16; }}},
      [&](const emu::MaxPoolPolicy& p) { ref.max_pool(in.pool, in.px, py, p, nullptr); });
  expect_ref_rejects_each<emu::MaxPoolPolicy>(
      "max_pool_backward", fp32_pool(),
      {{"input fp16", [](emu::MaxPoolPolicy& p) { p.input = kFp16; }},
       {"output fp16", [](emu::MaxPoolPolicy& p) { p.output = kFp16; }},
       {"accumulation fp16", [](emu::MaxPoolPolicy& p) { p.accumulation = kFp16; }}},
      [&](const emu::MaxPoolPolicy& p) { ref.max_pool_backward(in.pool, in.px, in.pdy, pdx, p, nullptr); });

  const std::vector<std::pair<std::string, std::function<void(emu::BatchNormPolicy&)>>> norm_fields{
      {"input fp16", [](emu::BatchNormPolicy& p) { p.input = kFp16; }},
      {"output fp16", [](emu::BatchNormPolicy& p) { p.output = kFp16; }},
      {"statistics bf16", [](emu::BatchNormPolicy& p) { p.statistics = kBf16; }},
      {"parameters fp16", [](emu::BatchNormPolicy& p) { p.parameters = kFp16; }}};
  std::vector<float> mean(4), invstd(4), rm(4, 0.0f), rv(4, 1.0f), dg(4), dbeta(4);
  expect_ref_rejects_each<emu::BatchNormPolicy>("batch_norm", fp32_norm(), norm_fields,
                                                [&](const emu::BatchNormPolicy& p) {
                                                  ref.batch_norm(in.ch, in.bn, in.x, in.gamma, in.beta, out, mean,
                                                                 invstd, rm, rv, p, nullptr);
                                                });
  expect_ref_rejects_each<emu::BatchNormPolicy>("batch_norm_backward", fp32_norm(), norm_fields,
                                                [&](const emu::BatchNormPolicy& p) {
                                                  ref.batch_norm_backward(in.ch, in.x, in.dy, in.gamma, mean, invstd,
                                                                          out, dg, dbeta, p, nullptr);
                                                });

  const std::vector<std::pair<std::string, std::function<void(emu::LossPolicy&)>>> loss_fields{
      {"input fp16", [](emu::LossPolicy& p) { p.input = kFp16; }},
      {"accumulate fp16", [](emu::LossPolicy& p) { p.accumulate = kFp16; }},
      {"output fp16", [](emu::LossPolicy& p) { p.output = kFp16; }}};
  std::vector<float> dlogits(in.logits.size()), dbx(in.bx.size());
  expect_ref_rejects_each<emu::LossPolicy>("softmax_cross_entropy", fp32_loss(), loss_fields,
                                           [&](const emu::LossPolicy& p) {
                                             ref.softmax_cross_entropy(in.sce, in.logits, in.labels, p, nullptr);
                                           });
  expect_ref_rejects_each<emu::LossPolicy>(
      "softmax_cross_entropy_backward", fp32_loss(), loss_fields, [&](const emu::LossPolicy& p) {
        ref.softmax_cross_entropy_backward(in.sce, in.logits, in.labels, dlogits, p, nullptr);
      });
  expect_ref_rejects_each<emu::LossPolicy>("bce_with_logits", fp32_loss(), loss_fields,
                                           [&](const emu::LossPolicy& p) { ref.bce_with_logits(in.bx, in.t, p, nullptr); });
  expect_ref_rejects_each<emu::LossPolicy>("bce_with_logits_backward", fp32_loss(), loss_fields,
                                           [&](const emu::LossPolicy& p) {
                                             ref.bce_with_logits_backward(in.bx, in.t, dbx, p, nullptr);
                                           });

  const std::vector<std::pair<std::string, std::function<void(emu::OptimizerPolicy&)>>> optimizer_fields{
      {"weights fp16", [](emu::OptimizerPolicy& p) { p.weights = kFp16; }},
      {"state bf16", [](emu::OptimizerPolicy& p) { p.state = kBf16; }},
      {"grad fp16", [](emu::OptimizerPolicy& p) { p.grad = kFp16; }}};
  std::vector<float> w = normal(16, in.rng, 1.0), m(16), v(16), g = normal(16, in.rng, 1e-2);
  expect_ref_rejects_each<emu::OptimizerPolicy>("sgd_step", {}, optimizer_fields,
                                                [&](const emu::OptimizerPolicy& p) {
                                                  ref.sgd_step(ops::SgdParams{}, 1, w, v, g, p, nullptr, {});
                                                });
  expect_ref_rejects_each<emu::OptimizerPolicy>("adam_step", {}, optimizer_fields,
                                                [&](const emu::OptimizerPolicy& p) {
                                                  ref.adam_step(ops::AdamParams{}, 1, w, m, v, g, p, nullptr, {});
                                                });
}

// ============================ emu backend ========================================

// The backend is a pass-through: same results, same counts, with the fp16
// defaults of each policy.
TEST(EmuBackend, EqualsTheEmulatedOpsCalledDirectly) {
  Inputs in;
  nn::EmuBackend emu_backend;
  auto same_counts = [](const emu::CounterSet& a, const emu::CounterSet& b, const char* op) {
    EXPECT_FALSE(a.sites().empty()) << op << ": nothing counted";
    EXPECT_TRUE(a.sites() == b.sites()) << op << ": counters differ";
  };
  for (emu::Accumulation acc : {emu::Accumulation::fp32, emu::Accumulation::fp16, emu::Accumulation::tensor_core}) {
    emu::GemmPolicy p;  // fp16 inputs
    p.accumulation = acc;
    std::vector<float> c1(in.gemm.c_size()), c2(in.gemm.c_size());
    emu::CounterSet k1, k2;
    emu::gemm_emu(in.gemm, in.a, in.b, c1, p, &k1);
    emu_backend.gemm(in.gemm, in.a, in.b, c2, p, &k2);
    EXPECT_EQ(bits(c2), bits(c1)) << emu::to_string(acc);
    same_counts(k1, k2, "gemm");
  }
  {
    std::vector<float> y1(in.conv.y_size()), y2(in.conv.y_size());
    emu::CounterSet k1, k2;
    emu::conv2d_forward_emu(in.conv, in.cx, in.cw, y1, emu::GemmPolicy{}, &k1);
    emu_backend.conv2d_forward(in.conv, in.cx, in.cw, y2, emu::GemmPolicy{}, &k2);
    EXPECT_EQ(bits(y2), bits(y1));
    same_counts(k1, k2, "conv2d");
  }
  {
    const ops::ActivationParams p{ops::Activation::sigmoid};
    std::vector<float> y1(in.x.size()), y2(in.x.size());
    emu::CounterSet k1, k2;
    emu::activation_backward_emu(p, in.x, in.dy, y1, emu::ElementwisePolicy{}, &k1);
    emu_backend.activation_backward(p, in.x, in.dy, y2, emu::ElementwisePolicy{}, &k2);
    EXPECT_EQ(bits(y2), bits(y1));
    same_counts(k1, k2, "activation_backward");
  }
  {
    std::vector<float> db1(4), db2(4);
    emu::CounterSet k1, k2;
    emu::bias_add_backward_emu(in.ch, in.dy, db1, emu::BiasAddPolicy{}, &k1);
    emu_backend.bias_add_backward(in.ch, in.dy, db2, emu::BiasAddPolicy{}, &k2);
    EXPECT_EQ(bits(db2), bits(db1));
    same_counts(k1, k2, "bias_add_backward");
  }
  {
    const std::size_t n = in.x.size();
    std::vector<float> y1(n), y2(n), mean1(4), mean2(4), inv1(4), inv2(4), rm1(4), rm2(4), rv1(4, 1.0f), rv2(4, 1.0f);
    emu::CounterSet k1, k2;
    emu::batch_norm_emu(in.ch, in.bn, in.x, in.gamma, in.beta, y1, mean1, inv1, rm1, rv1, emu::BatchNormPolicy{}, &k1);
    emu_backend.batch_norm(in.ch, in.bn, in.x, in.gamma, in.beta, y2, mean2, inv2, rm2, rv2, emu::BatchNormPolicy{},
                           &k2);
    EXPECT_EQ(bits(y2), bits(y1));
    EXPECT_EQ(bits(inv2), bits(inv1));
    EXPECT_EQ(bits(rv2), bits(rv1));
    same_counts(k1, k2, "batch_norm");
  }
  {
    emu::CounterSet k1, k2;
    const float l1 = emu::softmax_cross_entropy_emu(in.sce, in.logits, in.labels, emu::LossPolicy{}, &k1);
    const float l2 = emu_backend.softmax_cross_entropy(in.sce, in.logits, in.labels, emu::LossPolicy{}, &k2);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(l2), std::bit_cast<std::uint32_t>(l1));
    std::vector<float> d1(in.logits.size()), d2(in.logits.size());
    emu::softmax_cross_entropy_backward_emu(in.sce, in.logits, in.labels, d1, emu::LossPolicy{}, &k1);
    emu_backend.softmax_cross_entropy_backward(in.sce, in.logits, in.labels, d2, emu::LossPolicy{}, &k2);
    EXPECT_EQ(bits(d2), bits(d1));
    same_counts(k1, k2, "softmax_cross_entropy");
  }
  {
    const emu::OptimizerPolicy p{kFp16, kFp32, kFp16};
    auto w1 = to_fp16(normal(32, in.rng, 1.0)), w2 = w1;
    std::vector<float> m1(32), m2(32), v1(32), v2(32), u1(32), u2(32);
    const auto g = normal(32, in.rng, 1e-2);
    emu::CounterSet k1, k2;
    emu::adam_step_emu(ops::AdamParams{}, 1, w1, m1, v1, g, p, &k1, u1);
    emu_backend.adam_step(ops::AdamParams{}, 1, w2, m2, v2, g, p, &k2, u2);
    EXPECT_EQ(bits(w2), bits(w1));
    EXPECT_EQ(bits(u2), bits(u1));
    same_counts(k1, k2, "adam_step");
  }
}

// =============================== optimizers =======================================

std::vector<ops::SgdParams> sgd_variants() {
  std::vector<ops::SgdParams> v(6);
  v[0].lr = 0.1;
  v[1].lr = 0.05, v[1].momentum = 0.9;
  v[2].lr = 0.05, v[2].momentum = 0.9, v[2].dampening = 0.1;
  v[3].lr = 0.05, v[3].momentum = 0.9, v[3].nesterov = true;
  v[4].lr = 0.05, v[4].momentum = 0.9, v[4].weight_decay = 0.01;
  v[5].lr = 0.1, v[5].weight_decay = 0.05;
  return v;
}

std::vector<ops::AdamParams> adam_variants() {
  std::vector<ops::AdamParams> v(4);
  v[1].lr = 1e-2, v[1].weight_decay = 0.01;                    // L2 (Adam)
  v[2].lr = 1e-2, v[2].weight_decay = 0.1, v[2].adamw = true;  // decoupled (AdamW)
  v[3].lr = 3e-3, v[3].beta1 = 0.5, v[3].beta2 = 0.9, v[3].eps = 1e-6;
  return v;
}

constexpr int kSteps = 5;
constexpr std::size_t kN = 257;

// adamw's decay w * fl32(1 - lr wd), rounded once into `weights` (the product
// of two floats is exact in double), before the update is added.
std::vector<float> adamw_decayed(const ops::AdamParams& p, std::vector<float> w, const formats::Format& weights) {
  if (!p.adamw || p.weight_decay == 0) return w;
  const float c = static_cast<float>(1.0 - p.lr * p.weight_decay);
  for (float& x : w) x = emu::round_value(weights, static_cast<double>(x) * static_cast<double>(c));
  return w;
}

// w_new == fl(w_old + u) in `weights`, the sum exact in double (w_old and u
// are floats; when their exponents are too far apart for that, the double
// rounding is innocuous: 53 >= 2 p + 2 for p <= 24).
void expect_update_added(const std::vector<float>& w_old, const std::vector<float>& u, const std::vector<float>& w_new,
                         const formats::Format& weights, const std::string& context) {
  std::size_t mismatches = 0, nonzero = 0;
  for (std::size_t i = 0; i < w_old.size(); ++i) {
    const float expected = weights == kFp32
                               ? w_old[i] + u[i]  // one IEEE single addition: fl32(w + u)
                               : emu::round_value(weights, static_cast<double>(w_old[i]) + static_cast<double>(u[i]));
    mismatches += std::bit_cast<std::uint32_t>(expected) != std::bit_cast<std::uint32_t>(w_new[i]);
    nonzero += u[i] != 0.0f;
  }
  EXPECT_EQ(mismatches, 0u) << context;
  EXPECT_GT(nonzero, w_old.size() / 2) << context << ": the update is mostly zero, the check says little";
}

TEST(RefBackend, SgdEqualsTheReferenceAndReportsTheUpdate) {
  nn::RefBackend ref;
  int variant = 0;
  for (const ops::SgdParams& p : sgd_variants()) {
    std::mt19937_64 rng(100 + static_cast<unsigned>(variant));
    std::vector<float> w = normal(kN, rng, 1.0), wr = w, v(kN), vr(kN), u(kN);
    for (int step = 1; step <= kSteps; ++step) {
      const auto g = normal(kN, rng, 0.1);
      const std::vector<float> w_old = w;
      refs::sgd_step_ref(p, step, wr, vr, g);
      ref.sgd_step(p, step, w, v, g, emu::OptimizerPolicy{}, nullptr, u);
      const std::string context = "sgd variant " + std::to_string(variant) + " step " + std::to_string(step);
      EXPECT_EQ(bits(w), bits(wr)) << context;
      EXPECT_EQ(bits(v), bits(vr)) << context;
      expect_update_added(w_old, u, w, kFp32, context);
    }
    ++variant;
  }
}

TEST(RefBackend, AdamEqualsTheReferenceAndReportsTheUpdate) {
  nn::RefBackend ref;
  int variant = 0;
  for (const ops::AdamParams& p : adam_variants()) {
    std::mt19937_64 rng(200 + static_cast<unsigned>(variant));
    std::vector<float> w = normal(kN, rng, 1.0), wr = w, m(kN), mr(kN), v(kN), vr(kN), u(kN);
    for (int step = 1; step <= kSteps; ++step) {
      const auto g = normal(kN, rng, 0.1);
      const std::vector<float> w_old = adamw_decayed(p, w, kFp32);
      refs::adam_step_ref(p, step, wr, mr, vr, g);
      ref.adam_step(p, step, w, m, v, g, emu::OptimizerPolicy{}, nullptr, u);
      const std::string context = "adam variant " + std::to_string(variant) + " step " + std::to_string(step);
      EXPECT_EQ(bits(w), bits(wr)) << context;
      EXPECT_EQ(bits(m), bits(mr)) << context;
      EXPECT_EQ(bits(v), bits(vr)) << context;
      expect_update_added(w_old, u, w, kFp32, context);
    }
    ++variant;
  }
}

// fp16 weights (fp16-pure): w_new is w_old + u rounded once to fp16. Gradients
// of 0.1 and these rates give updates from about 2^-14 to 2^-4 against weights
// of order 1 (fp16 spacing 2^-10 there): some kept, some lost.
TEST(EmuBackend, Fp16WeightsTakeTheReportedUpdateRoundedOnce) {
  nn::EmuBackend emu_backend;
  const emu::OptimizerPolicy policy{kFp16, kFp32, kFp32};
  int variant = 0;
  for (const ops::SgdParams& p : sgd_variants()) {
    std::mt19937_64 rng(300 + static_cast<unsigned>(variant));
    std::vector<float> w = to_fp16(normal(kN, rng, 1.0)), v(kN), u(kN);
    for (int step = 1; step <= kSteps; ++step) {
      const auto g = normal(kN, rng, 0.1);
      const std::vector<float> w_old = w;
      emu_backend.sgd_step(p, step, w, v, g, policy, nullptr, u);
      expect_update_added(w_old, u, w, kFp16, "fp16 sgd variant " + std::to_string(variant));
    }
    ++variant;
  }
  variant = 0;
  for (const ops::AdamParams& p : adam_variants()) {
    std::mt19937_64 rng(400 + static_cast<unsigned>(variant));
    std::vector<float> w = to_fp16(normal(kN, rng, 1.0)), m(kN), v(kN), u(kN);
    for (int step = 1; step <= kSteps; ++step) {
      const auto g = normal(kN, rng, 0.1);
      const std::vector<float> w_old = adamw_decayed(p, w, kFp16);
      emu_backend.adam_step(p, step, w, m, v, g, policy, nullptr, u);
      expect_update_added(w_old, u, w, kFp16, "fp16 adam variant " + std::to_string(variant));
    }
    ++variant;
  }
}

TEST(EmuOptimizers, UpdateOfTheWrongSizeIsRejected) {
  std::vector<float> w(8, 1.0f), m(8), v(8), g(8, 0.5f);
  for (std::size_t size : {std::size_t{7}, std::size_t{9}}) {
    std::vector<float> u(size);
    const std::string context = "update of " + std::to_string(size) + " for 8 weights";
    expect_invalid([&] { emu::sgd_step_emu(ops::SgdParams{}, 1, w, v, g, emu::OptimizerPolicy{}, nullptr, u); },
                   {"update", "8"}, "sgd " + context);
    expect_invalid(
        [&] { emu::adam_step_emu(ops::AdamParams{}, 1, w, m, v, g, emu::OptimizerPolicy{}, nullptr, u); },
        {"update", "8"}, "adam " + context);
  }
  std::vector<float> u(8);  // the right size is accepted
  EXPECT_NO_THROW(emu::sgd_step_emu(ops::SgdParams{}, 1, w, v, g, emu::OptimizerPolicy{}, nullptr, u));
}

// ================================ gpu backend =====================================

TEST(GpuBackend, MakeBackendWithoutADeviceThrowsTheReason) {
  const std::string reason = gpu::gpu_unavailable_reason();
  if (reason.empty()) GTEST_SKIP() << "a device is usable here";
  for (int i = 0; i < 2; ++i) {
    try {
      if (i == 0)
        nn::make_backend(BackendKind::gpu);
      else
        nn::make_gpu_backend();
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), reason);
    }
  }
}

TEST(GpuBackend, MakeBackendWithADeviceGivesTheGpuKind) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(nn::make_backend(BackendKind::gpu)->kind(), BackendKind::gpu);
}

// Every policy the CUDA side cannot run is rejected before any device call,
// so this runs on any machine; each message names the op, says it is the gpu
// backend, and points to --backend emu.
TEST(GpuBackend, RejectsWhatTheCudaOpsCannotRun) {
  Inputs in;
  nn::GpuBackend gpu_backend;
  auto expect_rejected = [](const std::function<void()>& f, std::string_view op, std::string_view why,
                            const std::string& context) {
    expect_invalid(f, {"gpu backend", op, why, "--backend emu"}, std::string(op) + " " + context);
  };
  auto gemm_policy = [](const formats::Format& input, emu::Accumulation acc, const formats::Format& output) {
    emu::GemmPolicy p;
    p.input = input;
    p.accumulation = acc;
    p.output = output;
    return p;
  };
  const std::vector<std::pair<std::string, emu::GemmPolicy>> bad_gemms{
      {"fp32 fp16-acc", gemm_policy(kFp32, emu::Accumulation::fp16, kFp32)},
      {"fp32 tensor-core", gemm_policy(kFp32, emu::Accumulation::tensor_core, kFp32)},
      {"bf16 fp16-acc", gemm_policy(kBf16, emu::Accumulation::fp16, kFp32)},
      {"e4m3", gemm_policy(kE4m3, emu::Accumulation::fp32, kFp32)},
      {"fp16 fp32-acc output fp16", gemm_policy(kFp16, emu::Accumulation::fp32, kFp16)},
      {"fp16 fp16-acc output bf16", gemm_policy(kFp16, emu::Accumulation::fp16, kBf16)}};
  std::vector<float> c(in.gemm.c_size());
  for (const auto& [name, p] : bad_gemms)
    expect_rejected([&] { gpu_backend.gemm(in.gemm, in.a, in.b, c, p, nullptr); }, "gemm", "", name);

  const std::vector<std::pair<std::string, emu::GemmPolicy>> bad_convs{
      {"bf16", gemm_policy(kBf16, emu::Accumulation::fp32, kFp32)},
      {"fp16 fp16-acc", gemm_policy(kFp16, emu::Accumulation::fp16, kFp32)},
      {"fp32 tensor-core", gemm_policy(kFp32, emu::Accumulation::tensor_core, kFp32)},
      {"fp32 output fp16", gemm_policy(kFp32, emu::Accumulation::fp32, kFp16)},
      {"fp16 output bf16", gemm_policy(kFp16, emu::Accumulation::fp32, kBf16)}};
  std::vector<float> y(in.conv.y_size()), dx(in.conv.x_size()), dw(in.conv.weight_size());
  for (const auto& [name, p] : bad_convs) {
    expect_rejected([&] { gpu_backend.conv2d_forward(in.conv, in.cx, in.cw, y, p, nullptr); }, "conv2d", "cuDNN",
                    name);
    expect_rejected([&] { gpu_backend.conv2d_backward_data(in.conv, in.cdy, in.cw, dx, p, nullptr); },
                    "conv2d_backward_data", "cuDNN", name);
    expect_rejected([&] { gpu_backend.conv2d_backward_filter(in.conv, in.cx, in.cdy, dw, p, nullptr); },
                    "conv2d_backward_filter", "cuDNN", name);
  }

  std::vector<float> out(in.x.size()), db(4);
  const std::vector<std::pair<std::string, emu::BiasAddPolicy>> bad_bias{
      {"fp32 in, fp16 out", {kFp32, kFp16, kFp32}},
      {"bf16 in", {kBf16, kFp32, kFp32}},
      {"fp16 in, e4m3 out", {kFp16, kE4m3, kFp32}}};
  for (const auto& [name, p] : bad_bias) {
    expect_rejected([&] { gpu_backend.bias_add(in.ch, in.x, in.bias, out, p, nullptr); }, "bias_add", "fp16",
                    name);
    expect_rejected([&] { gpu_backend.bias_add_backward(in.ch, in.dy, db, p, nullptr); }, "bias_add_backward",
                    "fp16", name);
  }
  expect_rejected([&] { gpu_backend.bias_add_backward(in.ch, in.dy, db, {kFp16, kFp16, kFp16}, nullptr); },
                  "bias_add_backward", "sums in fp32", "fp16 accumulation");

  const ops::ActivationParams act{ops::Activation::relu};
  for (const emu::ElementwisePolicy& p : {emu::ElementwisePolicy{kFp32, kFp16}, emu::ElementwisePolicy{kBf16, kFp32},
                                          emu::ElementwisePolicy{kFp16, kE4m3}}) {
    const std::string name = p.input.name + " -> " + p.output.name;
    expect_rejected([&] { gpu_backend.activation(act, in.x, out, p, nullptr); }, "activation", "fp16", name);
    expect_rejected([&] { gpu_backend.activation_backward(act, in.x, in.dy, out, p, nullptr); },
                    "activation_backward", "fp16", name);
  }

  std::vector<float> py(in.pool.y_size()), pdx(in.pool.x_size());
  expect_rejected([&] { gpu_backend.max_pool(in.pool, in.px, py, {kBf16, kFp32, kFp32}, nullptr); }, "max_pool",
                  "fp16 inputs only", "bf16");
  expect_rejected(
      [&] { gpu_backend.max_pool_backward(in.pool, in.px, in.pdy, pdx, {kFp16, kFp16, kFp16}, nullptr); },
      "max_pool_backward", "sums in fp32", "fp16 accumulation");

  std::vector<float> mean(4), invstd(4, 1.0f), rm(4), rv(4, 1.0f), dg(4), dbeta(4);
  const std::vector<std::pair<std::string, emu::BatchNormPolicy>> bad_norms{
      {"fp32 input, fp16 output", {kFp32, kFp16, kFp32, kFp32}},
      {"fp16 statistics", {kFp16, kFp16, kFp16, kFp32}},
      {"bf16 parameters", {kFp16, kFp16, kFp32, kBf16}}};
  for (const auto& [name, p] : bad_norms) {
    expect_rejected([&] {
      gpu_backend.batch_norm(in.ch, in.bn, in.x, in.gamma, in.beta, out, mean, invstd, rm, rv, p, nullptr);
    }, "batch_norm", "", name);
    expect_rejected([&] {
      gpu_backend.batch_norm_backward(in.ch, in.x, in.dy, in.gamma, mean, invstd, out, dg, dbeta, p, nullptr);
    }, "batch_norm_backward", "", name);
  }

  const emu::LossPolicy fp16_sums{kFp16, kFp16, kFp32};
  std::vector<float> dlogits(in.logits.size());
  expect_rejected([&] { gpu_backend.softmax_cross_entropy(in.sce, in.logits, in.labels, fp16_sums, nullptr); },
                  "softmax_cross_entropy", "fp32 reference", "fp16 sums");
  expect_rejected(
      [&] { gpu_backend.softmax_cross_entropy_backward(in.sce, in.logits, in.labels, dlogits, fp16_sums, nullptr); },
      "softmax_cross_entropy_backward", "fp32 reference", "fp16 sums");
  expect_rejected([&] { gpu_backend.bce_with_logits(in.bx, in.t, fp16_sums, nullptr); }, "bce_with_logits",
                  "fp32 reference", "fp16 sums");

  std::vector<float> w = normal(16, in.rng, 1.0), m(16), v(16), g = normal(16, in.rng, 1e-2);
  const std::vector<std::pair<std::string, emu::OptimizerPolicy>> bad_optimizers{
      {"fp16 state", {kFp32, kFp16, kFp32}},
      {"bf16 weights", {kBf16, kFp32, kFp32}},
      {"bf16 grad", {kFp16, kFp32, kBf16}}};
  for (const auto& [name, p] : bad_optimizers) {
    expect_rejected([&] { gpu_backend.sgd_step(ops::SgdParams{}, 1, w, v, g, p, nullptr, {}); }, "sgd_step",
                    "CUDA optimizers", name);
    expect_rejected([&] { gpu_backend.adam_step(ops::AdamParams{}, 1, w, m, v, g, p, nullptr, {}); }, "adam_step",
                    "CUDA optimizers", name);
  }
}

// Under the fp32 recipe's all-fp32 policies the element-wise ops have no CUDA
// kernel (theirs read and write fp16) and run as the ref backend runs them
// (see gpu_backend.cpp), with or without a device: the same bits.
TEST(GpuBackend, Fp32ElementwiseOpsAreTheReference) {
  Inputs in;
  nn::GpuBackend gpu_backend;
  nn::RefBackend ref;
  const emu::ElementwisePolicy fp32_elementwise{kFp32, kFp32};
  for (const ops::ActivationParams act : {ops::ActivationParams{ops::Activation::relu},
                                           ops::ActivationParams{ops::Activation::tanh}}) {
    std::vector<float> want(in.x.size()), got(in.x.size());
    ref.activation(act, in.x, want, fp32_elementwise, nullptr);
    gpu_backend.activation(act, in.x, got, fp32_elementwise, nullptr);
    EXPECT_EQ(bits(got), bits(want)) << ops::to_string(act.kind);
    ref.activation_backward(act, in.x, in.dy, want, fp32_elementwise, nullptr);
    gpu_backend.activation_backward(act, in.x, in.dy, got, fp32_elementwise, nullptr);
    EXPECT_EQ(bits(got), bits(want)) << ops::to_string(act.kind) << " backward";
  }
  std::vector<float> py_want(in.pool.y_size()), py_got(in.pool.y_size()), pdx_want(in.pool.x_size()),
      pdx_got(in.pool.x_size());
  ref.max_pool(in.pool, in.px, py_want, fp32_pool(), nullptr);
  gpu_backend.max_pool(in.pool, in.px, py_got, fp32_pool(), nullptr);
  EXPECT_EQ(bits(py_got), bits(py_want));
  ref.max_pool_backward(in.pool, in.px, in.pdy, pdx_want, fp32_pool(), nullptr);
  gpu_backend.max_pool_backward(in.pool, in.px, in.pdy, pdx_got, fp32_pool(), nullptr);
  EXPECT_EQ(bits(pdx_got), bits(pdx_want));
  const emu::BatchNormPolicy fp32_norm{kFp32, kFp32, kFp32, kFp32};
  std::vector<float> y_want(in.x.size()), y_got(in.x.size()), mean_want(4), mean_got(4), invstd_want(4), invstd_got(4),
      rm_want(4), rm_got(4), rv_want(4, 1.0f), rv_got(4, 1.0f);
  ref.batch_norm(in.ch, in.bn, in.x, in.gamma, in.beta, y_want, mean_want, invstd_want, rm_want, rv_want, fp32_norm,
                 nullptr);
  gpu_backend.batch_norm(in.ch, in.bn, in.x, in.gamma, in.beta, y_got, mean_got, invstd_got, rm_got, rv_got,
                         fp32_norm, nullptr);
  EXPECT_EQ(bits(y_got), bits(y_want));
  EXPECT_EQ(bits(rv_got), bits(rv_want));
  std::vector<float> dx_want(in.x.size()), dx_got(in.x.size()), dg_want(4), dg_got(4), db_want(4), db_got(4);
  ref.batch_norm_backward(in.ch, in.x, in.dy, in.gamma, mean_want, invstd_want, dx_want, dg_want, db_want, fp32_norm,
                          nullptr);
  gpu_backend.batch_norm_backward(in.ch, in.x, in.dy, in.gamma, mean_got, invstd_got, dx_got, dg_got, db_got,
                                  fp32_norm, nullptr);
  EXPECT_EQ(bits(dx_got), bits(dx_want));
  EXPECT_EQ(bits(dg_got), bits(dg_want));
}

// The policies the fp32 and fp16 recipes hand the device ops get past the
// mapping: without a device they reach the gpu:: function (its
// std::runtime_error names the reason); with one they run.
TEST(GpuBackend, SupportedPoliciesReachTheDevice) {
  Inputs in;
  nn::GpuBackend gpu_backend;
  const std::string reason = gpu::gpu_unavailable_reason();
  auto expect_reaches_device = [&](const std::function<void()>& f, const std::string& context) {
    if (!reason.empty()) {
      try {
        f();
        ADD_FAILURE() << context << ": ran without a device";
      } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()), reason) << context;
      } catch (const std::exception& e) {
        ADD_FAILURE() << context << ": rejected: " << e.what();
      }
    } else {
      EXPECT_NO_THROW(f()) << context;
    }
  };
  std::vector<float> c(in.gemm.c_size());
  for (const auto& [input, acc] : std::vector<std::pair<formats::Format, emu::Accumulation>>{
           {kFp32, emu::Accumulation::fp32},
           {kFp16, emu::Accumulation::fp32},
           {kFp16, emu::Accumulation::tensor_core},
           {kFp16, emu::Accumulation::fp16},
           {kBf16, emu::Accumulation::fp32},
           {kBf16, emu::Accumulation::tensor_core}}) {
    emu::GemmPolicy p;
    p.input = input;
    p.accumulation = acc;
    const std::string context = "gemm " + input.name + " " + std::string(emu::to_string(acc));
    expect_reaches_device([&] { gpu_backend.gemm(in.gemm, in.a, in.b, c, p, nullptr); }, context);
    if (input == kFp16 && acc == emu::Accumulation::fp16) {
      p.output = kFp16;  // an fp16 result may also be asked for in fp16
      expect_reaches_device([&] { gpu_backend.gemm(in.gemm, in.a, in.b, c, p, nullptr); }, context + " -> fp16");
    }
  }
  std::vector<float> y(in.conv.y_size()), dx(in.conv.x_size()), dw(in.conv.weight_size());
  for (const formats::Format& input : {kFp32, kFp16}) {
    emu::GemmPolicy p;
    p.input = input;
    expect_reaches_device([&] { gpu_backend.conv2d_forward(in.conv, in.cx, in.cw, y, p, nullptr); },
                          "conv2d " + input.name);
    expect_reaches_device([&] { gpu_backend.conv2d_backward_data(in.conv, in.cdy, in.cw, dx, p, nullptr); },
                          "conv2d_backward_data " + input.name);
    expect_reaches_device([&] { gpu_backend.conv2d_backward_filter(in.conv, in.cx, in.cdy, dw, p, nullptr); },
                          "conv2d_backward_filter " + input.name);
  }
  std::vector<float> out(in.x.size()), db(4);
  const emu::BiasAddPolicy fp16_bias{kFp16, kFp32, kFp32};
  expect_reaches_device([&] { gpu_backend.bias_add(in.ch, in.x, in.bias, out, fp16_bias, nullptr); }, "bias_add");
  expect_reaches_device([&] { gpu_backend.bias_add_backward(in.ch, in.dy, db, fp16_bias, nullptr); },
                        "bias_add_backward");
  const emu::ElementwisePolicy fp16_elementwise{kFp16, kFp32};  // the fp16 recipe's
  const ops::ActivationParams act{ops::Activation::tanh};
  expect_reaches_device([&] { gpu_backend.activation(act, in.x, out, fp16_elementwise, nullptr); }, "activation");
  expect_reaches_device([&] { gpu_backend.activation_backward(act, in.x, in.dy, out, fp16_elementwise, nullptr); },
                        "activation_backward");
  const emu::MaxPoolPolicy fp16_pool{kFp16, kFp32, kFp32};
  std::vector<float> py(in.pool.y_size()), pdx(in.pool.x_size());
  expect_reaches_device([&] { gpu_backend.max_pool(in.pool, in.px, py, fp16_pool, nullptr); }, "max_pool");
  expect_reaches_device([&] { gpu_backend.max_pool_backward(in.pool, in.px, in.pdy, pdx, fp16_pool, nullptr); },
                        "max_pool_backward");
  const emu::BatchNormPolicy fp16_norm{kFp16, kFp32, kFp32, kFp32};
  std::vector<float> mean(4), invstd(4), rm(4), rv(4, 1.0f), dg(4), dbeta(4);
  expect_reaches_device([&] {
    gpu_backend.batch_norm(in.ch, in.bn, in.x, in.gamma, in.beta, out, mean, invstd, rm, rv, fp16_norm, nullptr);
  }, "batch_norm");
  if (reason.empty())  // the backward needs the forward's statistics
    expect_reaches_device([&] {
      gpu_backend.batch_norm_backward(in.ch, in.x, in.dy, in.gamma, mean, invstd, out, dg, dbeta, fp16_norm, nullptr);
    }, "batch_norm_backward");
  std::vector<float> w = to_fp16(normal(16, in.rng, 1.0)), m(16), v(16), g = normal(16, in.rng, 1e-2);
  for (const emu::OptimizerPolicy& p : {emu::OptimizerPolicy{kFp32, kFp32, kFp32},
                                        emu::OptimizerPolicy{kFp16, kFp32, kFp16}}) {
    expect_reaches_device([&] { gpu_backend.sgd_step(ops::SgdParams{}, 1, w, v, g, p, nullptr, {}); },
                          "sgd_step weights " + p.weights.name);
    expect_reaches_device([&] { gpu_backend.adam_step(ops::AdamParams{}, 1, w, m, v, g, p, nullptr, {}); },
                          "adam_step weights " + p.weights.name);
  }
  // The trainer asks for each step's update (its lost-update statistics).
  std::vector<float> u(16);
  expect_reaches_device([&] { gpu_backend.sgd_step(ops::SgdParams{}, 1, w, v, g, {}, nullptr, u); },
                        "sgd_step with update");
  expect_reaches_device([&] { gpu_backend.adam_step(ops::AdamParams{}, 1, w, m, v, g, {}, nullptr, u); },
                        "adam_step with update");
}

// The losses run on the host (see gpu_backend.cpp): the FP32 reference on the
// logits rounded to policy.input, the gradient in policy.output.
TEST(GpuBackend, LossesAreTheReferenceOnTheRoundedLogits) {
  Inputs in;
  nn::GpuBackend gpu_backend;
  const emu::LossPolicy autocast{kFp16, kFp32, kFp32};  // what nn passes for fp16 logits
  const auto z = to_fp16(in.logits);
  ASSERT_NE(bits(z), bits(in.logits)) << "the logits must not be fp16 values already, or rounding goes unseen";
  EXPECT_EQ(std::bit_cast<std::uint32_t>(gpu_backend.softmax_cross_entropy(in.sce, in.logits, in.labels, autocast,
                                                                            nullptr)),
            std::bit_cast<std::uint32_t>(refs::softmax_cross_entropy_ref(in.sce, z, in.labels)));
  std::vector<float> want(z.size()), got(z.size()), unrounded(z.size());
  refs::softmax_cross_entropy_backward_ref(in.sce, z, in.labels, want);
  refs::softmax_cross_entropy_backward_ref(in.sce, in.logits, in.labels, unrounded);
  ASSERT_NE(bits(want), bits(unrounded));
  gpu_backend.softmax_cross_entropy_backward(in.sce, in.logits, in.labels, got, autocast, nullptr);
  EXPECT_EQ(bits(got), bits(want));

  const auto bz = to_fp16(in.bx);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(gpu_backend.bce_with_logits(in.bx, in.t, autocast, nullptr)),
            std::bit_cast<std::uint32_t>(refs::bce_with_logits_ref(bz, in.t)));
  // An fp16 gradient asked for is the fp32 one rounded once.
  const emu::LossPolicy fp16_grad{kFp16, kFp32, kFp16};
  std::vector<float> bwant(bz.size()), bgot(bz.size());
  refs::bce_with_logits_backward_ref(bz, in.t, bwant);
  ASSERT_NE(bits(bwant), bits(to_fp16(bwant)));
  gpu_backend.bce_with_logits_backward(in.bx, in.t, bgot, fp16_grad, nullptr);
  EXPECT_EQ(bits(bgot), bits(to_fp16(bwant)));
}

// The reason the losses are on the host: softmax gradients of (p - onehot) / B
// with p ~ e^-30 are about 2^-45, far below fp16's smallest subnormal 2^-24.
// The fp32 gradient keeps them for the loss scale; an fp16 one would be 0.
TEST(GpuBackend, SmallLossGradientsSurviveForTheLossScale) {
  nn::GpuBackend gpu_backend;
  const ops::SoftmaxCrossEntropyShape s{2, 4};
  const std::vector<float> logits{30.0f, 0.0f, 0.5f, -1.0f, -2.0f, 28.0f, 0.25f, 1.0f};  // fp16 values
  const std::vector<std::int32_t> labels{0, 1};
  std::vector<float> d(logits.size());
  gpu_backend.softmax_cross_entropy_backward(s, logits, labels, d, {kFp16, kFp32, kFp32}, nullptr);
  int below_fp16 = 0;
  for (float x : d) {
    EXPECT_NE(x, 0.0f);
    below_fp16 += std::fabs(x) < 0x1p-25f;  // rounds to 0 in fp16
  }
  EXPECT_GE(below_fp16, 4);
  std::vector<float> want(logits.size());
  refs::softmax_cross_entropy_backward_ref(s, logits, labels, want);
  EXPECT_EQ(bits(d), bits(want));
}

// nn's bias policy (every format fp32, a GEMM epilogue) runs on the host as
// the FP32 reference: fl32(x + b) forward, the sum rounded once backward.
TEST(GpuBackend, Fp32BiasEpilogueIsTheReference) {
  Inputs in;
  nn::GpuBackend gpu_backend;
  std::vector<float> want(in.x.size()), got(in.x.size());
  refs::bias_add_ref(in.ch, in.x, in.bias, want);
  gpu_backend.bias_add(in.ch, in.x, in.bias, got, fp32_bias(), nullptr);
  EXPECT_EQ(bits(got), bits(want));
  for (std::size_t i = 0; i < in.x.size(); ++i)  // one IEEE single addition
    EXPECT_EQ(std::bit_cast<std::uint32_t>(got[i]),
              std::bit_cast<std::uint32_t>(in.x[i] + in.bias[(i / in.ch.spatial()) % 4]))
        << i;
  std::vector<float> dbw(4), dbg(4);
  refs::bias_add_backward_ref(in.ch, in.dy, dbw);
  gpu_backend.bias_add_backward(in.ch, in.dy, dbg, fp32_bias(), nullptr);
  EXPECT_EQ(bits(dbg), bits(dbw));
}

// cuBLAS fp16 GEMM (tensor cores, fp32 accumulation) against the emu
// backend's fp16 GEMM with fp32 accumulation, on the same fp16 inputs. Both
// are within gamma_k(2^-21) || |A||B| ||_F of the exact product (the bound
// tests/gemm_gpu_test derives for the hardware's truncated block sums; the
// emulator's fp32 running sum, gamma_k(2^-24), is inside it), so
// ||gpu - emu||_F <= 2 gamma_k(2^-21) || |A||B| ||_F, and relative to
// ||emu||_F >= ||C||_F (1 - gamma_k(2^-21) cond) that is
// 2 gamma cond / (1 - gamma cond), cond = || |A||B| ||_F / ||C||_F.
TEST(GpuBackend, Fp16GemmWithinTheBoundOfTheEmulator) {
  SKIP_WITHOUT_GPU();
  const auto gpu_backend = nn::make_backend(BackendKind::gpu);
  nn::EmuBackend emu_backend;
  std::mt19937_64 rng(77);
  for (bool tb : {false, true}) {
    const ops::GemmShape s{96, 80, 192, false, tb};
    const auto a = to_fp16(normal(s.a_size(), rng, 1.0)), b = to_fp16(normal(s.b_size(), rng, 1.0));
    for (emu::Accumulation acc : {emu::Accumulation::fp32, emu::Accumulation::tensor_core}) {
      emu::GemmPolicy p;  // fp16 inputs, fp32 output
      p.accumulation = acc;
      std::vector<float> hw(s.c_size()), emulated(s.c_size());
      gpu_backend->gemm(s, a, b, hw, p, nullptr);
      emu_backend.gemm(s, a, b, emulated, p, nullptr);
      const double g = compare::gamma(s.k, 0x1p-21) * refs::gemm_condition(s, a, b);
      ASSERT_LT(g, 0.5);
      const auto cmp = compare::compare(emulated, hw, kFp32,
                                        compare::Tolerance::normwise(2 * g / (1 - g), "2 gamma_k(2^-21) cond / (1 - "
                                                                                      "gamma_k(2^-21) cond)"));
      EXPECT_TRUE(cmp.passed) << emu::to_string(acc) << " transpose_b " << tb << ": " << cmp.failure;
    }
  }
}

}  // namespace
