// The DCGAN's generator step (training/trainer.cpp): the discriminator is
// run on the kind of batch it is trained on (the real batch and a generated
// one, so its batch norm normalises with the same kind of statistics), and
// the generator's loss and gradient come from the generated half only.
//
// Why it matters: with the discriminator shown the generated images alone,
// batch norm over them alone made any batch look like a mixed one, the
// discriminator scored the fakes as real (fp32, 300 steps: loss_d 0.0004,
// loss_g 0.065) and the generator learned nothing (its samples stayed noise).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "training/trainer.h"

namespace {

using namespace mpverify;

// Keeps the gradient of the generator's loss with respect to the
// discriminator's logits, as the trainer stores it.
struct LogitGradients : nn::StoreObserver {
  std::vector<std::vector<float>> generator_step;
  void on_store(std::string_view layer, std::string_view tensor, nn::Role, nn::Pass, std::span<const float>,
                std::span<const float> stored, const formats::Format&) override {
    if (layer == "loss_g" && tensor == "dlogits") generator_step.emplace_back(stored.begin(), stored.end());
  }
};

training::TrainConfig tiny_dcgan(nn::StoreObserver* observer) {
  training::TrainConfig c;
  c.model = "dcgan";
  c.data = "synthetic";
  c.train_size = 64;
  c.test_size = 16;
  c.batch_size = 8;
  c.seed = 11;
  c.optimizer = training::OptimizerKind::adam;
  c.adam.lr = 2e-4;
  c.recorders = false;
  c.histograms = false;
  c.extra_observer = observer;
  return c;
}

TEST(DcganStep, GeneratorStepRunsTheDiscriminatorOnRealAndGeneratedHalves) {
  LogitGradients seen;
  training::Trainer t(tiny_dcgan(&seen));
  std::size_t checked = 0;
  for (int step = 0; step < 3; ++step) {
    const nlohmann::json log = t.step();
    ASSERT_EQ(seen.generator_step.size(), static_cast<std::size_t>(step + 1));
    const std::vector<float>& d = seen.generator_step.back();
    // Both halves went through the discriminator: 2 x batch logits.
    ASSERT_EQ(d.size(), 16u) << "the discriminator saw " << d.size() << " images in the generator step";
    // The real half takes no part in the loss: exactly zero gradient.
    for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(d[i], 0.0f) << "real example " << i;
    // The generated half: BCE with target 1, mean over the 8 generated
    // examples, so d_i = (sigmoid(l_i) - 1) / 8 (scale 1 in fp32), i.e.
    // sigmoid(l_i) = 1 + 8 d_i and the example's loss -log sigmoid(l_i) =
    // -log(1 + 8 d_i). Their mean must be the logged loss_g.
    // Tolerance: d_i carries a few float roundings (sigmoid, subtraction,
    // division: <= 4u relative, u = 2^-24), so 1 + 8 d_i (about 0.5 here) is
    // off by <= 8 |d_i| 4u + u < 3e-7 and its log by < 1e-6; the logged loss
    // is a float mean of 8 terms (<= 8u relative). 1e-5 covers both.
    double loss = 0;
    for (std::size_t i = 8; i < 16; ++i) {
      EXPECT_LT(d[i], 0.0f) << "target 1: sigmoid(l) - 1 < 0";
      loss += -std::log(1.0 + 8.0 * static_cast<double>(d[i]));
    }
    loss /= 8;
    EXPECT_NEAR(loss, log["loss_g"].get<double>(), 1e-5) << "step " << step;
    ++checked;
  }
  EXPECT_EQ(checked, 3u);
}

}  // namespace
