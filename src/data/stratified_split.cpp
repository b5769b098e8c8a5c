#include "data/stratified_split.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/random.h"

namespace mpverify::data {

namespace {

constexpr std::uint64_t kSplitStreams = std::uint64_t{0x5B17} << 48;

void shuffle(std::vector<std::size_t>& v, std::uint64_t seed, std::uint64_t stream) {
  Draws rng(seed, stream);
  for (std::size_t k = v.size(); k > 1; --k) std::swap(v[k - 1], v[rng.below(k)]);
}

Dataset gather(const Dataset& pool, const std::vector<std::size_t>& indices) {
  Dataset d;
  d.height = pool.height;
  d.width = pool.width;
  d.channels = pool.channels;
  d.classes = pool.classes;
  d.images.reserve(indices.size() * pool.image_size());
  d.labels.reserve(indices.size());
  for (std::size_t i : indices) {
    const auto image = pool.image(i);
    d.images.insert(d.images.end(), image.begin(), image.end());
    d.labels.push_back(pool.labels[i]);
  }
  return d;
}

}  // namespace

Split stratified_split(const Dataset& pool, std::size_t test_size, std::uint64_t seed) {
  validate(pool);
  const std::size_t n = pool.size();
  if (test_size > n) {
    throw std::invalid_argument("stratified_split: test_size " + std::to_string(test_size) + " exceeds the " +
                                std::to_string(n) + " examples");
  }
  const auto classes = static_cast<std::size_t>(pool.classes);
  std::vector<std::vector<std::size_t>> members(classes);
  for (std::size_t i = 0; i < n; ++i) members[static_cast<std::size_t>(pool.labels[i])].push_back(i);

  // Largest-remainder quotas (exact integer arithmetic: n_c T < 2^64 for any pool that fits in memory).
  std::vector<std::size_t> quota(classes), remainder(classes);
  std::size_t assigned = 0;
  for (std::size_t c = 0; c < classes; ++c) {
    const std::size_t product = members[c].size() * test_size;
    quota[c] = n ? product / n : 0;
    remainder[c] = n ? product % n : 0;
    assigned += quota[c];
  }
  std::vector<std::size_t> by_remainder(classes);
  for (std::size_t c = 0; c < classes; ++c) by_remainder[c] = c;
  std::stable_sort(by_remainder.begin(), by_remainder.end(),
                   [&](std::size_t a, std::size_t b) { return remainder[a] > remainder[b]; });
  for (std::size_t k = 0; assigned < test_size; ++k, ++assigned) ++quota[by_remainder[k]];

  std::vector<std::size_t> train, test;
  for (std::size_t c = 0; c < classes; ++c) {
    std::vector<std::size_t> order = members[c];
    shuffle(order, seed, kSplitStreams + c);
    test.insert(test.end(), order.begin(), order.begin() + static_cast<std::ptrdiff_t>(quota[c]));
    train.insert(train.end(), order.begin() + static_cast<std::ptrdiff_t>(quota[c]), order.end());
  }
  std::sort(train.begin(), train.end());
  std::sort(test.begin(), test.end());
  shuffle(train, seed, kSplitStreams + (std::uint64_t{1} << 32));
  shuffle(test, seed, kSplitStreams + (std::uint64_t{1} << 32) + 1);
  return Split{gather(pool, train), gather(pool, test)};
}

}  // namespace mpverify::data
