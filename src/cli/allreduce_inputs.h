// Where `mpverify allreduce` gets its per-rank gradients: one 2-D tensor
// (ranks x n, row r = rank r), one tensor file per rank (each flattened, all
// of the same size), synthetic draws with a seed (collective/synthetic.h), or
// the data-parallel shards of a real training step (training/shard_gradients.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "training/shard_gradients.h"

namespace mpverify::cli {

struct AllreduceInputs {
  std::vector<float> values;  // ranks x n, C order
  std::size_t ranks = 0;
  std::size_t n = 0;
  std::string source;  // how the summary names it
  nlohmann::json from_model;  // --from-model: the model, data, seed, step and parameters the rows came from; else null
};

// From the files (see above). UsageError naming the file and the problem.
AllreduceInputs read_allreduce_inputs(const std::vector<std::string>& files);

// `--synthetic SEED --ranks N --elements n`.
// The most values (ranks x elements) synthetic inputs may hold: 2^28 floats, 1 GiB, with the exact sums beside.
inline constexpr std::size_t kMaxSyntheticValues = std::size_t{1} << 28;
AllreduceInputs synthetic_allreduce_inputs(std::uint64_t seed, std::size_t ranks, std::size_t n);

// `--from-model MODEL --ranks N [--shard-batch B] [--data D] [--model-seed S] [--step K]`: UsageError for
// a bad option (what training::shard_gradients refuses).
AllreduceInputs model_allreduce_inputs(const training::ShardGradientOptions& options);

}  // namespace mpverify::cli
