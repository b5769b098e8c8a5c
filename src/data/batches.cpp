#include "data/batches.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "data/random.h"

namespace mpverify::data {

std::vector<std::size_t> epoch_order(std::size_t n, std::uint64_t seed, std::size_t epoch) {
  if (static_cast<std::uint64_t>(n) > (std::uint64_t{1} << 32)) {
    throw std::invalid_argument("epoch_order: at most 2^32 examples, got " + std::to_string(n));
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  Draws rng(seed, (std::uint64_t{0xBA7C} << 48) + epoch);
  // Fisher-Yates: position k takes a uniform choice among positions [0, k].
  for (std::size_t k = n; k > 1; --k) {
    const std::size_t j = rng.below(k);
    std::swap(order[k - 1], order[j]);
  }
  return order;
}

BatchIterator::BatchIterator(const Dataset& data, BatchOptions options) : data_(&data), options_(options) {
  if (options_.batch_size == 0) throw std::invalid_argument("BatchIterator: batch_size must be positive");
  validate(data);
  if (batches_per_epoch() == 0) {
    throw std::invalid_argument("BatchIterator: " + std::to_string(data.size()) + " examples give no batch of " +
                                std::to_string(options_.batch_size) +
                                (options_.drop_last ? " (drop_last is on)" : ""));
  }
}

std::size_t BatchIterator::batches_per_epoch() const {
  const std::size_t n = data_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void BatchIterator::seek(std::size_t epoch, std::size_t batch) {
  if (batch >= batches_per_epoch()) {
    throw std::out_of_range("BatchIterator::seek: batch " + std::to_string(batch) + " >= " +
                            std::to_string(batches_per_epoch()) + " batches per epoch");
  }
  epoch_ = epoch;
  batch_ = batch;
}

Batch BatchIterator::next() {
  // The order is rebuilt here rather than when an epoch ends, so the indices
  // of the batch returned last stay valid until this call.
  if (!have_order_ || order_epoch_ != epoch_) {
    if (options_.shuffle) {
      order_ = epoch_order(data_->size(), options_.seed, epoch_);
    } else {
      order_.resize(data_->size());
      std::iota(order_.begin(), order_.end(), std::size_t{0});
    }
    order_epoch_ = epoch_;
    have_order_ = true;
  }
  const std::size_t first = batch_ * options_.batch_size;
  const std::size_t count = std::min(options_.batch_size, data_->size() - first);
  const std::size_t per_image = data_->image_size();
  images_.resize(count * per_image);
  labels_.resize(count);
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t i = order_[first + k];
    const auto image = data_->image(i);
    std::copy(image.begin(), image.end(), images_.begin() + static_cast<std::ptrdiff_t>(k * per_image));
    labels_[k] = data_->labels[i];
  }
  Batch out{images_, labels_, std::span<const std::size_t>(order_).subspan(first, count), epoch_, batch_};
  if (++batch_ == batches_per_epoch()) {
    batch_ = 0;
    ++epoch_;
  }
  return out;
}

}  // namespace mpverify::data
