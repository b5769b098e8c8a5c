// Seeded mini-batches over a Dataset: each epoch visits every example once in
// an order that is a pure function of (seed, epoch), so a run can be resumed
// at any epoch and two backends see the same batches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "data/dataset.h"

namespace mpverify::data {

struct BatchOptions {
  std::size_t batch_size = 64;
  std::uint64_t seed = 0;
  bool shuffle = true;     // false: every epoch in index order
  bool drop_last = true;   // drop the epoch's last partial batch (else keep it, smaller)
};

// The order of epoch `epoch` over n examples: a Fisher-Yates shuffle driven
// by Philox stream (0xBA7C << 48) + epoch under `seed` (exactly uniform
// choices, see data/random.h). Throws std::invalid_argument for n > 2^32.
std::vector<std::size_t> epoch_order(std::size_t n, std::uint64_t seed, std::size_t epoch);

struct Batch {
  std::span<const float> images;         // size() x C x H x W, gathered in batch order
  std::span<const std::int32_t> labels;  // size()
  std::span<const std::size_t> indices;  // the examples' indices in the Dataset
  std::size_t epoch = 0, index = 0;      // which epoch, which batch within it
  std::size_t size() const { return labels.size(); }
};

// The spans of a Batch point into the iterator and stay valid until the next
// call to next() or seek(); the Dataset must outlive the iterator.
class BatchIterator {
 public:
  // Throws std::invalid_argument for batch_size 0, an invalid Dataset (see
  // validate), or an epoch with no batch (drop_last and size < batch_size).
  BatchIterator(const Dataset& data, BatchOptions options);

  std::size_t batches_per_epoch() const;
  // The next batch; after an epoch's last batch, the next epoch begins.
  Batch next();
  // Continue from batch `batch` of epoch `epoch` (as if that many batches
  // had been taken). Throws std::out_of_range for batch >= batches_per_epoch().
  void seek(std::size_t epoch, std::size_t batch);

 private:
  const Dataset* data_;
  BatchOptions options_;
  std::size_t epoch_ = 0, batch_ = 0;  // of the next batch
  std::vector<std::size_t> order_;      // of epoch order_epoch_
  std::size_t order_epoch_ = 0;
  bool have_order_ = false;
  std::vector<float> images_;
  std::vector<std::int32_t> labels_;
};

}  // namespace mpverify::data
