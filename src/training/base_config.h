// The training configuration every experiment (and `mpverify study`) starts
// from: the model and data it names on its command line, a batch of 64 and
// SGD with momentum 0.9, fp16 as the studied format. Each experiment then sets
// only what it varies (recipe, scaler, backend, seed, recorders, or Adam in
// place of SGD), so that what they share is written once.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "training/trainer.h"

namespace mpverify::training {

// The fields the experiments take from their command line.
struct ExperimentBase {
  std::string model = "cnn";
  std::string data = "synthetic";
  std::filesystem::path data_dir;  // empty: the loader's default
  std::size_t train_size = 8000;
  std::size_t test_size = 2000;
  std::size_t steps = 200;
  // SGD's (an Adam run sets its optimizer after).
  double lr = 0.05;
  double momentum = 0.9;
};

constexpr std::size_t kExperimentBatch = 64;

// `base`'s model, data and schedule; batch kExperimentBatch; SGD at base.lr
// with base.momentum; study_format fp16. The rest (recipe fp32,
// scaler none, the ref backend, recorders on) stays TrainConfig's default.
TrainConfig experiment_config(const ExperimentBase& base);

}  // namespace mpverify::training
