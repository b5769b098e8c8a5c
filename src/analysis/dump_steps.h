// The step directories of a dump written during training:
//
//   DIR/step-000010/weights.safetensors, grads.safetensors, updates.safetensors, activation_grads.safetensors
//   DIR/step-000010/step.json   {"step": 10, "scale": 65536.0, "found_inf": false, "skipped": false, "loss": 2.3}
//
// The step number is the directory's (step-<digits>, directly below DIR);
// step.json is optional (older dumps have none), and when present its "step"
// must be that number: a dump whose directories were renamed or copied over
// one another would otherwise be summarised under the wrong steps.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mpverify::analysis {

// A step directory whose step.json cannot be used, or two directories of one
// step; the message names the file and says how to fix it.
class StepLayoutError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What step.json says besides the step number; each field is absent when the file does not give it.
struct StepRecord {
  std::optional<double> scale;  // the loss scale this step's backward pass ran at
  std::optional<bool> found_inf;
  std::optional<bool> skipped;
  std::optional<double> loss;
};

struct StepDirectory {
  std::int64_t step = 0;
  std::string name;  // "step-000010", as found
  std::filesystem::path path;
  std::optional<StepRecord> record;  // from step.json, when there is one
};

// The number of a step directory's name ("step-000010" -> 10); nullopt for other names.
std::optional<std::int64_t> step_number(std::string_view directory_name);

// The step directories directly below `dir`, sorted by step (none when `dir` is a file). Throws
// StepLayoutError for a step.json that is not a JSON object, whose "step" is not the directory's number,
// whose "scale" or "loss" is not a number or whose "found_inf" or "skipped" is not a boolean, and for two
// directories of the same step ("step-10" and "step-000010").
std::vector<StepDirectory> find_step_directories(const std::filesystem::path& dir);

// A displayed name "step-000010/grads.safetensors:fc1.weight" split at its first '/' when that first
// component is a step directory's name: {"step-000010", "grads.safetensors:fc1.weight"}.
struct StepName {
  std::string directory;
  std::string within;
};
std::optional<StepName> split_step_name(const std::string& displayed_name);

// What a file within a step directory holds: "grads.safetensors" -> "grads", "grads/fc1.weight.npy" -> "grads"
// (weights, grads, updates, activation_grads; any other name as it is).
std::string step_file_kind(const std::string& file_within_step);

// The kind of a displayed tensor name ("step-000010/grads.safetensors:fc1.weight" -> "grads"); "" for a
// tensor outside a step directory, whose kind the dump's layout does not say.
std::string dump_kind(const std::string& displayed_name);

// Whether training multiplies a kind by the loss scale: the weight and the activation gradients (a dump holds
// them unscaled, divided by the scale). Weights and updates never see it.
bool loss_scaled_kind(const std::string& kind);

}  // namespace mpverify::analysis
