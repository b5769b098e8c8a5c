// Per-rank gradients of data-parallel training: one training step's batch of
// ranks x shard_batch examples cut into `ranks` shards (rank r takes examples
// r B ... r B + B - 1 of the batch, in the run's batch order), and each rank's
// gradient of the mean loss over its own shard, with the FP32 reference
// backend at the model's weights after `step` steps of ordinary fp32 training
// (step 0: the initial weights). What `mpverify allreduce --from-model` sums.
//
// The run is the Trainer's with --recipe fp32 --backend ref --batch-size N B
// and the seed: the same seed gives bitwise the same rows. Each shard is a
// separate forward and backward, so a model with batch norm (the CNN)
// normalises each shard by its own statistics, as data-parallel training
// without synchronised batch norm does; the mean of its rows is then not the
// gradient of the whole batch (the MLP's and the transformer's are, up to
// rounding: their examples do not interact).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace mpverify::training {

struct ShardGradientOptions {
  std::string model = "cnn";        // cnn, mlp or transformer
  std::string data = "synthetic";   // synthetic or mnist (cnn, mlp); kjv (transformer)
  std::filesystem::path data_dir;   // the real set's files; empty: the loader's default
  std::size_t ranks = 2;            // N, 1 to 2^20
  std::size_t shard_batch = 2;      // B: examples (transformer: windows) per rank
  std::size_t step = 0;             // K: fp32 training steps before the gradient step
  std::uint64_t seed = 0;
  std::optional<std::string> text_for_tests;  // the transformer: this text in place of the KJV file
};

struct ShardGradients {
  std::vector<float> rows;  // ranks x n, C order: row r = rank r's gradient
  std::size_t ranks = 0, n = 0;
  // The parameters in the model's order, as they are laid out in a row.
  std::vector<std::string> parameter_names;
  std::vector<std::size_t> parameter_sizes;
  std::size_t train_size = 0;  // the training set's examples used by the run (classifiers)
};

// Throws std::invalid_argument naming the bad option (unknown model or data,
// ranks or shard_batch 0, too many ranks, a data set smaller than one batch).
ShardGradients shard_gradients(const ShardGradientOptions& options);

// The synthetic training set's size the run draws: the Trainer's default
// (8000), or one batch of ranks x shard_batch examples when that is larger.
std::size_t shard_train_size(std::size_t ranks, std::size_t shard_batch);

}  // namespace mpverify::training
