// Data-parallel training simulated in one process (`train --data-parallel N`): each step's batch is cut into
// N equal shards (rank r takes examples r B ... r B + B - 1, B = batch / N), every shard's forward and
// backward runs on its own, as on N ranks, and the shards' gradients are summed by collective::allreduce in
// a format and order, each rank's gradient divided by N first: PyTorch DDP's default communication hook
// (torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py, `_allreduce_fut`: `tensor.div_(world
// size)` "first to avoid overflow", then `all_reduce`). The gradients summed are the scaled ones, as DDP
// reduces them during backward, before the GradScaler unscales.
//
// What differs from N real ranks: batch norm's running statistics are updated by every shard in rank order
// (DDP keeps rank 0's, broadcast at the next forward); the training statistics are each shard's own, as
// without SyncBatchNorm.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collective/allreduce.h"

namespace mpverify::training {

struct DataParallel {
  std::size_t ranks = 0;           // 0 or 1: off
  std::string format = "fp32";     // the format the all-reduce adds in (any formats::parse_format name)
  std::string algorithm = "ring";  // ring, tree or reduce-scatter (docs/allreduce.md)
  bool on() const { return ranks >= 2; }
};

// Throws std::invalid_argument naming the option: an unknown format or algorithm, more ranks than
// collective::kMaxRanks, or a batch that does not cut into `ranks` shards of at least `min_shard` examples.
void check_data_parallel(const DataParallel& dp, std::size_t batch_size, std::size_t min_shard);

// The average of the ranks' gradients (rows: ranks x n, row r = rank r's parameter gradients concatenated in
// the model's order), each divided by N, then summed in the format and order. The reduction's counters are
// added to `counters`.
std::vector<float> reduce_gradients(const collective::RankRows& rows, const DataParallel& dp,
                                    collective::AllreduceCounters& counters);

// summary.json's config entry: {"ranks", "format", "algorithm", "divide": "before"}.
nlohmann::json data_parallel_json(const DataParallel& dp);

// summary.json's "all_reduce": what the reductions' roundings did over the run, per stage (inputs,
// division, additions: elements, inexact, underflow_to_zero, overflow, swamped, addends_nonzero).
nlohmann::json all_reduce_counters_json(const collective::AllreduceCounters& counters);

}  // namespace mpverify::training
