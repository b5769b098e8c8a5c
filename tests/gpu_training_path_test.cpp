// The gpu backend's path through whole training steps, on a machine without
// a GPU: every op goes through GpuBackend (its policy mapping, its host
// paths), and where it would reach the device, whose absence it reports with
// std::runtime_error(gpu_unavailable_reason()), the emulator computes the
// values instead so that the step goes on. A policy the gpu backend rejects
// (std::invalid_argument) fails the test: that is how a recipe the README
// says the GPU runs turned out to throw at its first op, unseen, because no
// test could reach the ops behind the first one without a device. On a
// machine with a GPU the device runs every op and nothing stands in.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>

#include "gpu/device.h"
#include "nn/emu_backend.h"
#include "nn/gpu_backend.h"
#include "training/trainer.h"

namespace {

using namespace mpverify;

class GpuWithStandIn final : public nn::Backend {
 public:
  explicit GpuWithStandIn(std::set<std::string>* stood_in) : stood_in_(stood_in) {}
  nn::BackendKind kind() const override { return nn::BackendKind::gpu; }

#include "nn/backend_overrides.inc"

 private:
  // Runs the gpu op; where it reports the missing device, the emulator's.
  template <typename Gpu, typename Emu>
  auto run(const char* op, Gpu gpu_op, Emu emu_op) {
    try {
      return gpu_op();
    } catch (const std::runtime_error& e) {
      if (gpu::gpu_unavailable_reason().empty() || std::string(e.what()) != gpu::gpu_unavailable_reason()) throw;
      stood_in_->insert(op);
      return emu_op();
    }
  }
  nn::GpuBackend gpu_;
  nn::EmuBackend emu_;
  std::set<std::string>* stood_in_;
};

#define MPVERIFY_STAND_IN(op, ...) \
  return run(#op, [&] { return gpu_.op(__VA_ARGS__); }, [&] { return emu_.op(__VA_ARGS__); })

void GpuWithStandIn::gemm(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                          std::span<float> c, const emu::GemmPolicy& policy, emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(gemm, shape, a, b, c, policy, counters);
}
void GpuWithStandIn::conv2d_forward(const ops::Conv2dShape& shape, std::span<const float> x,
                                    std::span<const float> wgt, std::span<float> y, const emu::GemmPolicy& policy,
                                    emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(conv2d_forward, shape, x, wgt, y, policy, counters);
}
void GpuWithStandIn::conv2d_backward_data(const ops::Conv2dShape& shape, std::span<const float> dy,
                                          std::span<const float> wgt, std::span<float> dx,
                                          const emu::GemmPolicy& policy, emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(conv2d_backward_data, shape, dy, wgt, dx, policy, counters);
}
void GpuWithStandIn::conv2d_backward_filter(const ops::Conv2dShape& shape, std::span<const float> x,
                                            std::span<const float> dy, std::span<float> dw,
                                            const emu::GemmPolicy& policy, emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(conv2d_backward_filter, shape, x, dy, dw, policy, counters);
}
void GpuWithStandIn::bias_add(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> b,
                              std::span<float> y, const emu::BiasAddPolicy& policy, emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(bias_add, s, x, b, y, policy, counters);
}
void GpuWithStandIn::bias_add_backward(const ops::ChannelShape& s, std::span<const float> dy, std::span<float> db,
                                       const emu::BiasAddPolicy& policy, emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(bias_add_backward, s, dy, db, policy, counters);
}
void GpuWithStandIn::activation(const ops::ActivationParams& p, std::span<const float> x, std::span<float> y,
                                const emu::ElementwisePolicy& policy, emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(activation, p, x, y, policy, counters);
}
void GpuWithStandIn::activation_backward(const ops::ActivationParams& p, std::span<const float> x,
                                         std::span<const float> dy, std::span<float> dx,
                                         const emu::ElementwisePolicy& policy, emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(activation_backward, p, x, dy, dx, policy, counters);
}
void GpuWithStandIn::max_pool(const ops::PoolShape& p, std::span<const float> x, std::span<float> y,
                              const emu::MaxPoolPolicy& policy, emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(max_pool, p, x, y, policy, counters);
}
void GpuWithStandIn::max_pool_backward(const ops::PoolShape& p, std::span<const float> x, std::span<const float> dy,
                                       std::span<float> dx, const emu::MaxPoolPolicy& policy,
                                       emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(max_pool_backward, p, x, dy, dx, policy, counters);
}
void GpuWithStandIn::batch_norm(const ops::ChannelShape& s, const ops::BatchNormParams& p,
                                std::span<const float> x, std::span<const float> gamma, std::span<const float> beta,
                                std::span<float> y, std::span<float> mean, std::span<float> invstd,
                                std::span<float> running_mean, std::span<float> running_var,
                                const emu::BatchNormPolicy& policy, emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(batch_norm, s, p, x, gamma, beta, y, mean, invstd, running_mean, running_var, policy, counters);
}
void GpuWithStandIn::batch_norm_backward(const ops::ChannelShape& s, std::span<const float> x,
                                         std::span<const float> dy, std::span<const float> gamma,
                                         std::span<const float> mean, std::span<const float> invstd,
                                         std::span<float> dx, std::span<float> dgamma, std::span<float> dbeta,
                                         const emu::BatchNormPolicy& policy, emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(batch_norm_backward, s, x, dy, gamma, mean, invstd, dx, dgamma, dbeta, policy, counters);
}
float GpuWithStandIn::softmax_cross_entropy(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                            std::span<const std::int32_t> labels, const emu::LossPolicy& policy,
                                            emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(softmax_cross_entropy, s, logits, labels, policy, counters);
}
void GpuWithStandIn::softmax_cross_entropy_backward(const ops::SoftmaxCrossEntropyShape& s,
                                                    std::span<const float> logits,
                                                    std::span<const std::int32_t> labels, std::span<float> dlogits,
                                                    const emu::LossPolicy& policy, emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(softmax_cross_entropy_backward, s, logits, labels, dlogits, policy, counters);
}
float GpuWithStandIn::bce_with_logits(std::span<const float> x, std::span<const float> t,
                                      const emu::LossPolicy& policy, emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(bce_with_logits, x, t, policy, counters);
}
void GpuWithStandIn::bce_with_logits_backward(std::span<const float> x, std::span<const float> t,
                                              std::span<float> dx, const emu::LossPolicy& policy,
                                              emu::CounterSet* counters) {
  MPVERIFY_STAND_IN(bce_with_logits_backward, x, t, dx, policy, counters);
}
void GpuWithStandIn::sgd_step(const ops::SgdParams& p, std::int64_t step, std::span<float> w, std::span<float> v,
                              std::span<const float> g, const emu::OptimizerPolicy& policy,
                              emu::CounterSet* counters, std::span<float> update) {
  MPVERIFY_STAND_IN(sgd_step, p, step, w, v, g, policy, counters, update);
}
void GpuWithStandIn::adam_step(const ops::AdamParams& p, std::int64_t step, std::span<float> w,
                               std::span<float> m, std::span<float> v, std::span<const float> g,
                               const emu::OptimizerPolicy& policy, emu::CounterSet* counters,
                               std::span<float> update) {
  MPVERIFY_STAND_IN(adam_step, p, step, w, m, v, g, policy, counters, update);
}

training::TrainConfig config(const char* model, const char* recipe, std::set<std::string>* stood_in) {
  training::TrainConfig c;
  c.model = model;
  c.recipe = recipe;
  c.scaler = std::string(recipe) == "fp32" ? "none" : "torch";
  c.backend = nn::BackendKind::gpu;
  c.backend_factory = [stood_in] { return std::make_unique<GpuWithStandIn>(stood_in); };
  c.train_size = 16;
  c.test_size = 8;
  c.batch_size = 8;
  c.steps = 2;
  c.seed = 3;
  return c;
}

// The recipes the README says the gpu backend runs (fp32, o1, o2), on every
// model, two steps each with the recorders on (they ask the optimizers for
// the updates), then the classifiers' evaluation. Adam too, on one model.
TEST(GpuTrainingPath, TheGpuRecipesRunEveryModelsSteps) {
  std::set<std::string> stood_in;
  int runs = 0;
  for (const char* model : {"mlp", "cnn", "dcgan"})
    for (const char* recipe : {"fp32", "o1", "o2"}) {
      training::TrainConfig c = config(model, recipe, &stood_in);
      if (std::string(model) == "cnn" && std::string(recipe) == "o2") c.optimizer = training::OptimizerKind::adam;
      const std::string what = std::string(model) + " " + recipe;
      try {
        training::Trainer trainer(c);
        for (int s = 0; s < 2; ++s) trainer.step();
        if (std::string(model) != "dcgan") trainer.evaluate();
        ++runs;
      } catch (const std::invalid_argument& e) {
        ADD_FAILURE() << what << ": the gpu backend rejected an op: " << e.what();
      }
    }
  EXPECT_EQ(runs, 9);
  if (!gpu::gpu_unavailable_reason().empty()) {
    // Without a device the ops that need one did reach it (and stood in).
    for (const char* op : {"gemm", "conv2d_forward", "conv2d_backward_filter", "activation", "max_pool",
                           "batch_norm", "sgd_step", "adam_step"})
      EXPECT_TRUE(stood_in.count(op)) << op << " never reached the device";
  }
}

// fp16-pure keeps the optimizer state and the batch-norm parameters in fp16,
// which the CUDA kernels do not (they keep fp32): the gpu backend says so at
// the op, naming the policy and the way out, rather than compute otherwise.
TEST(GpuTrainingPath, Fp16PureIsRefusedByName) {
  std::set<std::string> stood_in;
  for (const char* model : {"mlp", "cnn"}) {
    training::Trainer trainer(config(model, "fp16-pure", &stood_in));
    try {
      trainer.step();
      ADD_FAILURE() << model << ": fp16-pure ran on the gpu backend";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("fp16"), std::string::npos) << what;
      EXPECT_NE(what.find("--backend emu"), std::string::npos) << what;
    }
  }
}

}  // namespace
