#include "training/base_config.h"

namespace mpverify::training {

TrainConfig experiment_config(const ExperimentBase& base) {
  TrainConfig t;
  t.model = base.model;
  t.data = base.data;
  t.data_dir = base.data_dir;
  t.train_size = base.train_size;
  t.test_size = base.test_size;
  t.steps = base.steps;
  t.batch_size = kExperimentBatch;
  t.optimizer = OptimizerKind::sgd;
  t.sgd = ops::SgdParams{base.lr, base.momentum};
  t.study_format = "fp16";
  return t;
}

}  // namespace mpverify::training
