#include "cli/allreduce_inputs.h"

#include "cli/commands.h"
#include "cli/tensor_argument.h"
#include "collective/allreduce.h"
#include "collective/synthetic.h"

namespace mpverify::cli {

namespace {

void check_ranks(std::size_t ranks, const std::string& where) {
  if (ranks < 1 || ranks > collective::kMaxRanks)
    throw UsageError(where + ": " + std::to_string(ranks) + " ranks; give 1 to " + std::to_string(collective::kMaxRanks));
}

AllreduceInputs one_matrix(const std::string& file) {
  TensorArgument t = read_tensor_argument(file, "allreduce");
  if (t.shape.size() != 2)
    throw UsageError(tensor_label(t) + " has shape " + shape_text(t.shape) +
                     "; one input file must be 2-D (ranks x n, one row per rank), or give one file per rank");
  check_ranks(t.shape[0], tensor_label(t));
  if (t.shape[1] == 0) throw UsageError(tensor_label(t) + " has no elements per rank (shape " + shape_text(t.shape) + ")");
  return {std::move(t.values), t.shape[0], t.shape[1], tensor_label(t), {}};
}

}  // namespace

AllreduceInputs read_allreduce_inputs(const std::vector<std::string>& files) {
  if (files.size() == 1) return one_matrix(files.front());
  check_ranks(files.size(), "the input files");
  AllreduceInputs in;
  in.ranks = files.size();
  for (const std::string& file : files) {
    const TensorArgument t = read_tensor_argument(file, "allreduce");
    if (in.values.empty()) in.n = t.values.size();
    if (t.values.size() != in.n || in.n == 0)
      throw UsageError(tensor_label(t) + " has " + std::to_string(t.values.size()) + " elements; every rank's file " +
                       "must have the same number as the first (" + std::to_string(in.n) + "), and at least one");
    in.values.insert(in.values.end(), t.values.begin(), t.values.end());
  }
  in.source = std::to_string(files.size()) + " files, one per rank (" + files.front() + ", ...)";
  return in;
}

AllreduceInputs synthetic_allreduce_inputs(std::uint64_t seed, std::size_t ranks, std::size_t n) {
  check_ranks(ranks, "--ranks");
  if (n == 0) throw UsageError("--elements 0: give the number of elements per rank (at least 1)");
  if (n > kMaxSyntheticValues / ranks)  // divided, so that the product cannot wrap
    throw UsageError("--ranks " + std::to_string(ranks) + " x --elements " + std::to_string(n) + " is more than " +
                     std::to_string(kMaxSyntheticValues) + " values (memory: every rank's gradient is held)");
  return {collective::synthetic_gradients(ranks, n, seed), ranks, n, "synthetic, seed " + std::to_string(seed), {}};
}

AllreduceInputs model_allreduce_inputs(const training::ShardGradientOptions& options) {
  training::ShardGradients g;
  with_usage_errors([&] { g = training::shard_gradients(options); });
  AllreduceInputs in{std::move(g.rows), g.ranks, g.n,
                     options.model + " on " + options.data + ", seed " + std::to_string(options.seed) + ", step " +
                         std::to_string(options.step) + ", " + std::to_string(options.shard_batch) + " per rank",
                     nullptr};
  nlohmann::json params = nlohmann::json::array();
  for (std::size_t i = 0; i < g.parameter_names.size(); ++i)
    params.push_back({{"name", g.parameter_names[i]}, {"elements", g.parameter_sizes[i]}});
  in.from_model = {{"model", options.model},   {"data", options.data},
                   {"seed", options.seed},     {"step", options.step},
                   {"shard_batch", options.shard_batch}, {"backend", "ref"},
                   {"train_size", g.train_size}, {"parameters", params}};
  return in;
}

}  // namespace mpverify::cli
