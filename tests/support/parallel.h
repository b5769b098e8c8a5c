// Runs f(begin, end) over [0, total) in chunks on all hardware threads, and
// collects mismatches (a count and the first few, printed TestFloat-style).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mpverify::test {

template <typename F>
void parallel_chunks(std::uint64_t total, std::uint64_t chunk, F f) {
  std::atomic<std::uint64_t> next{0};
  auto worker = [&] {
    for (std::uint64_t begin; (begin = next.fetch_add(chunk)) < total;) f(begin, std::min(total, begin + chunk));
  };
  const unsigned n = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < n; ++i) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
}

class Mismatches {
 public:
  void add(const std::string& description) {
    std::lock_guard lock(mutex_);
    if (examples_.size() < 12) examples_.push_back(description);
    ++count_;
  }
  std::uint64_t count() const { return count_; }
  std::string report() const {
    std::string s = std::to_string(count_) + " mismatches";
    for (const auto& e : examples_) s += "\n  " + e;
    return s;
  }

 private:
  std::mutex mutex_;
  std::uint64_t count_ = 0;
  std::vector<std::string> examples_;
};

}  // namespace mpverify::test
