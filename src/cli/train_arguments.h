// The training configuration a command line of `mpverify train` stands for, for commands that plan
// runs rather than train them (sweep): one parser, so a planned run means what `train` would do.
#pragma once

#include <string>
#include <vector>

#include "training/trainer.h"

namespace mpverify::cli {

// The configuration `mpverify train ARGUMENTS --out DIR` would train (ARGUMENTS without "train" and
// "--out"). Throws UsageError for arguments train refuses, with train's message.
training::TrainConfig train_config_from_arguments(const std::vector<std::string>& arguments);

}  // namespace mpverify::cli
