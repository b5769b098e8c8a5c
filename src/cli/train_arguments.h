// The training configuration a command line of `mpverify train` stands for, for commands that plan
// runs rather than train them (sweep): one parser, so a planned run means what `train` would do.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "training/trainer.h"

namespace mpverify::cli {

// The configuration `mpverify train ARGUMENTS --out DIR` would train (ARGUMENTS without "train" and
// "--out"). Throws UsageError for arguments train refuses, with train's message.
training::TrainConfig train_config_from_arguments(const std::vector<std::string>& arguments);

// A check that throws UsageError unless KEY (a name without dashes) is an option of `mpverify train` and VALUE
// has the shape it takes: true or false for a flag, a scalar for a value, a list only for a repeatable option.
// A plan must be checked with it: false adds no argument, so its name would otherwise never meet the parser.
// Made once, used for every setting of a plan (it holds train's option table).
using TrainSettingCheck = std::function<void(const std::string& key, const nlohmann::json& value)>;
TrainSettingCheck train_setting_check();

}  // namespace mpverify::cli
